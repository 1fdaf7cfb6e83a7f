"""Array parameters in PostgreSQL's binary format, one per column of a batch.

A statement that takes a batch as ``unnest(%(a)s::uuid[], %(b)s::bigint[], …)`` gets each column
as one typed array: PostgreSQL reads the values as they are stored (16 bytes a UUID, 8 an
instant), nothing to parse. psycopg's own list adaptation dumps each element through a Python
call (~10 µs a completion of 16 columns, docs/decisions/0015), so the builders here make the
array's bytes themselves, with C-level iteration (``map``, ``join``, ``set``) and a Python step
per distinct value rather than per element where they can: a batch's states, outcomes, worker
ids and flags repeat, and its instants and integers go through ``struct`` in one pass.

Each builder returns a :class:`PgArray` whose class names the array type (a binary dumper
registered with psycopg sends its bytes under that type). A column whose values are all NULL is
sent empty (ndim 0): ``unnest`` with several arguments pads a shorter array with NULLs, so it
reads the same as an array of NULLs — the statement's first column must never be all NULL.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import chain, repeat
from operator import attrgetter, floordiv, sub
from typing import Any, ClassVar, TypeVar, cast

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_HEADER = struct.Struct(">iiIii")  # ndim, has nulls, element type, length, lower bound
_EMPTY = struct.Struct(">iiI")  # ndim 0, no nulls, element type
_LEN = struct.Struct(">i")
_INT8 = struct.Struct(">q")
_INT4 = struct.Struct(">i")
_NULL = _LEN.pack(-1)
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""PostgreSQL's binary instants count microseconds from here."""
_MICROSECOND = timedelta(microseconds=1)
_UUID_INT = attrgetter("int")


class PgArray:
    """A one-dimensional array parameter, already in PostgreSQL's binary format."""

    __slots__ = ("data",)
    oid: ClassVar[int]
    """The array type's oid (the dumper sends ``data`` as this type)."""
    element: ClassVar[int]
    """The element type's oid (written in ``data``'s header)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.data)} bytes)"


class UuidArray(PgArray):
    __slots__ = ()
    oid, element = 2951, 2950


class Int8Array(PgArray):
    __slots__ = ()
    oid, element = 1016, 20


class Int4Array(PgArray):
    __slots__ = ()
    oid, element = 1007, 23


class BoolArray(PgArray):
    __slots__ = ()
    oid, element = 1000, 16


class TextArray(PgArray):
    __slots__ = ()
    oid, element = 1009, 25


class TimestamptzArray(PgArray):
    __slots__ = ()
    oid, element = 1185, 1184


class JsonbArray(PgArray):
    __slots__ = ()
    oid, element = 3807, 3802


class _PgArrayDumper(Dumper):
    format = Format.BINARY

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        self.oid = cast("type[PgArray]", cls).oid  # the PgArray subclass being dumped

    def dump(self, obj: PgArray) -> bytes:
        return obj.data


psycopg.adapters.register_dumper(PgArray, _PgArrayDumper)

A = TypeVar("A", bound=PgArray)


def _array(cls: type[A], count: int, nulls: bool, elements: bytes) -> A:
    if not count:
        return cls(_EMPTY.pack(0, 0, cls.element))
    return cls(_HEADER.pack(1, nulls, cls.element, count, 1) + elements)


def _fixed(cls: type[A], width: int, packed: Any, count: int) -> A:
    """An array of ``count`` values of ``width`` bytes each, ``packed`` an iterable of them."""
    length = _LEN.pack(width)
    return _array(cls, count, False, length + length.join(packed) if count else b"")


def uuids(values: Sequence[uuid.UUID]) -> UuidArray:
    """``uuid[]`` of ``values`` (no NULLs)."""
    return _fixed(UuidArray, 16, map(int.to_bytes, map(_UUID_INT, values), repeat(16)), len(values))


def int8s(values: Sequence[int]) -> Int8Array:
    """``bigint[]`` of ``values`` (no NULLs; struct.error beyond 64 bits)."""
    return _fixed(Int8Array, 8, map(_INT8.pack, values), len(values))


def int4s(values: Sequence[int]) -> Int4Array:
    """``int[]`` of ``values`` (no NULLs; struct.error beyond 32 bits)."""
    return _fixed(Int4Array, 4, map(_INT4.pack, values), len(values))


_BOOLS = {True: b"\x00\x00\x00\x01\x01", False: b"\x00\x00\x00\x01\x00", None: _NULL}


def bools(values: Sequence[bool | None]) -> BoolArray:
    """``bool[]`` of ``values``."""
    return _array(BoolArray, len(values), None in values, b"".join(map(_BOOLS.__getitem__, values)))


def _element(data: bytes) -> bytes:
    return _LEN.pack(len(data)) + data


def _variable(
    cls: type[A],
    values: Sequence[Any],
    encode: Callable[[Any], bytes],
    each: Callable[[Sequence[Any]], list[bytes]],
    width: int | None = None,
) -> A:
    """An array of ``values``, each ``encode(v)`` (its bytes without their length); empty when
    every value is None. A column whose first value fills at least half the batch (its states,
    outcomes, worker ids, the instant its claim started the runs) is encoded once per distinct
    value; otherwise ``each(values)`` encodes them at C level (it raises TypeError on a None;
    ``width``: each of its elements is that long), and failing that the values go one by
    one."""
    count = len(values)
    first = values[0] if count else None
    if first is not None and values.count(first) * 2 >= count:
        distinct = set(values)
        by_value = {v: _element(encode(v)) for v in distinct if v is not None}
        by_value[None] = _NULL
        elements = b"".join(map(by_value.__getitem__, values))
        return _array(cls, count, None in distinct, elements)
    try:
        data = each(values)
    except TypeError:  # a None among them (or a value ``each`` does not take)
        pass
    else:
        if width is not None:  # every element that long: one length between each
            return _fixed(cls, width, data, count)
        lengths = map(_LEN.pack, map(len, data))
        elements = b"".join(chain.from_iterable(zip(lengths, data, strict=True)))
        return _array(cls, count, False, elements)
    nulls = values.count(None)
    if nulls == count:
        return _array(cls, 0, False, b"")
    elements = b"".join(_NULL if v is None else _element(encode(v)) for v in values)
    return _array(cls, count, nulls > 0, elements)


def _encoded(values: Sequence[str]) -> list[bytes]:
    return list(map(str.encode, values))


def texts(values: Sequence[str | None]) -> TextArray:
    """``text[]`` of ``values`` (UTF-8; PostgreSQL refuses a NUL character)."""
    return _variable(TextArray, values, str.encode, _encoded)


def _jsonb(text: str) -> bytes:
    return b"\x01" + str.encode(text)  # jsonb's binary format: version 1, then the JSON text


def jsonbs(values: Sequence[str | None]) -> JsonbArray:
    """``jsonb[]`` of ``values``, each JSON text (PostgreSQL parses each as it stores it)."""
    return _variable(JsonbArray, values, _jsonb, lambda given: list(map(_jsonb, given)))


def _instant(at: datetime) -> bytes:
    if at.tzinfo is None:  # as PostgreSQL reads a naive instant in the store's UTC sessions
        at = at.replace(tzinfo=UTC)
    return _INT8.pack((at - _EPOCH) // _MICROSECOND)


def _instants(values: Sequence[datetime]) -> list[bytes]:
    """Aware instants at C level, no Python call per value (TypeError on a None or a naive
    one: those go one by one)."""
    micros = map(floordiv, map(sub, values, repeat(_EPOCH)), repeat(_MICROSECOND))
    return list(map(_INT8.pack, micros))


def instants(values: Sequence[datetime | None]) -> TimestamptzArray:
    """``timestamptz[]`` of ``values`` (a naive instant is taken as UTC)."""
    return _variable(TimestamptzArray, values, _instant, _instants, width=8)
