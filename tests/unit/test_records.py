"""duetime._records: frozen slotted dataclasses built without their ``__init__`` (the claim's
and the completion's hot paths) are the same values ``__init__`` makes; and the row decoders
that use it put every column in its own field."""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from duetime import _json
from duetime._records import positional_builder
from duetime._types import DeliveryMode, RetryPolicy, Run, RunState, RunTrigger
from duetime.store._rows import (
    CLAIMED_COLUMNS,
    NativeCodec,
    SQLiteCodec,
    claimed_from_row,
    claimed_from_tuple,
    run_from_row,
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Point:
    x: int
    y: str = "y"


def test_a_built_instance_equals_the_one_init_makes() -> None:
    build = positional_builder(_Point)
    point = build(1, "b")
    assert point == _Point(1, "b")
    assert hash(point) == hash(_Point(1, "b"))
    assert type(point) is _Point
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]


@dataclasses.dataclass(frozen=True, slots=True)
class _Point3(_Point):
    z: float = 0.0


def test_a_subclass_is_built_alike_through_its_slots() -> None:
    """A class with a base of its own (no mutable twin matches its layout): each slot is
    written through its descriptor, to the same instance."""
    point = positional_builder(_Point3)(1, "b", 2.5)
    assert point == _Point3(1, "b", 2.5)
    assert type(point) is _Point3
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.z = 3.0  # type: ignore[misc]


def test_classes_whose_init_does_more_are_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("x")

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived:
        x: int
        twice: int = dataclasses.field(init=False, default=0)

    for cls in (NoSlots, NotFrozen, Checked, Derived):
        with pytest.raises(TypeError, match=cls.__qualname__):
            positional_builder(cls)


_T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _row() -> dict[str, object]:
    """A claimed run's row with a distinct value in every column (instants a second apart)."""
    return {
        "id": uuid.UUID(int=1),
        "job_id": uuid.UUID(int=2),
        "tenant": "acme",
        "job_name": "nightly",
        "task": "t.x",
        "queue": "q1",
        "payload": {"p": 1},
        "scheduled_for": _T0,
        "available_at": _T0 + timedelta(seconds=1),
        "state": "running",
        "priority": 7,
        "attempt": 2,
        "max_attempts": 5,
        "token": 42,
        "lease_owner": "w-1",
        "lease_expires_at": _T0 + timedelta(seconds=2),
        "claimed_at": _T0 + timedelta(seconds=3),
        "started_at": _T0 + timedelta(seconds=4),
        "finished_at": _T0 + timedelta(seconds=5),
        "trigger": "manual",
        "idempotency_key": "key-1",
        "reason": "why",
        "last_error_class": "E",
        "last_error_message": "boom",
        "replays": 3,
        "created_at": _T0 + timedelta(seconds=6),
        "target": {"type": "http"},
        "progress": 0.5,
        "progress_message": "half",
        "checkpoint": {"c": 2},
        "cancel_requested": True,
        "result": {"r": 3},
        "origin": "backfill",
        "timeout_s": 9.5,
        "backoff_base": 1.0,
        "backoff_factor": 2.0,
        "backoff_cap": 60.0,
        "retry_rules": None,
        "delivery": "at_most_once",
        "one_shot": True,
        "retry_from": _T0 + timedelta(seconds=7),
    }


def test_a_claimed_row_decodes_each_column_into_its_own_field() -> None:
    claimed = claimed_from_row(_row(), NativeCodec())
    expected = Run(
        id=uuid.UUID(int=1),
        job_id=uuid.UUID(int=2),
        tenant="acme",
        job_name="nightly",
        task="t.x",
        queue="q1",
        payload={"p": 1},
        scheduled_for=_T0,
        available_at=_T0 + timedelta(seconds=1),
        state=RunState.RUNNING,
        priority=7,
        attempt=2,
        max_attempts=5,
        token=42,
        lease_owner="w-1",
        lease_expires_at=_T0 + timedelta(seconds=2),
        claimed_at=_T0 + timedelta(seconds=3),
        started_at=_T0 + timedelta(seconds=4),
        finished_at=_T0 + timedelta(seconds=5),
        trigger=RunTrigger.MANUAL,
        idempotency_key="key-1",
        reason="why",
        last_error_class="E",
        last_error_message="boom",
        replays=3,
        created_at=_T0 + timedelta(seconds=6),
        target={"type": "http"},
        progress=0.5,
        progress_message="half",
        checkpoint={"c": 2},
        cancel_requested=True,
        result={"r": 3},
        origin="backfill",
    )
    for name in (f.name for f in dataclasses.fields(Run)):
        assert getattr(claimed.run, name) == getattr(expected, name), name
    assert claimed.run == expected
    assert claimed.timeout == 9.5
    assert claimed.retry == RetryPolicy(5, 1.0, 2.0, 60.0)
    assert claimed.delivery is DeliveryMode.AT_MOST_ONCE
    assert claimed.one_shot is True
    assert claimed.retry_from == _T0 + timedelta(seconds=7)


def test_a_row_without_origin_reads_none_in_every_dialect() -> None:
    row = _row()
    del row["origin"]
    assert run_from_row(row, NativeCodec()).origin is None
    micros = {k: v for k, v in row.items()}
    for key, value in row.items():
        if isinstance(value, datetime):
            micros[key] = int(
                (value - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1)
            )
        elif isinstance(value, uuid.UUID):
            micros[key] = str(value)
        elif isinstance(value, dict):
            micros[key] = '{"k": 1}'
    run = run_from_row(micros, SQLiteCodec())
    assert (run.origin, run.scheduled_for, run.id, run.payload) == (
        None,
        _T0,
        uuid.UUID(int=1),
        {"k": 1},
    )


def _as_sqlite(row: dict[str, object]) -> dict[str, object]:
    """``row`` as SQLite keeps it: instants as integer microseconds, ids and JSON as text,
    booleans as integers."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    stored: dict[str, object] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            stored[key] = (value - epoch) // timedelta(microseconds=1)
        elif isinstance(value, uuid.UUID):
            stored[key] = str(value)
        elif isinstance(value, dict):
            stored[key] = _json.dumps(value)
        elif isinstance(value, bool):
            stored[key] = int(value)
        else:
            stored[key] = value
    return stored


def test_a_claimed_tuple_decodes_as_its_row_does_in_every_dialect() -> None:
    """The claim's rows come as values in ``CLAIMED_COLUMNS`` order (PostgreSQL: a tuple, its
    fair claim's flags after them; SQLite: a ``sqlite3.Row``, read by position)."""
    row = _row()
    row["retry_rules"] = {"within": 60.0, "permanent_on": ["ValueError"]}
    assert list(row) == list(CLAIMED_COLUMNS)
    expected = claimed_from_row(row, NativeCodec())
    assert expected.retry.within == 60.0
    assert expected.retry.permanent_on == ("ValueError",)

    flags = (2, 1, False)  # deferred, capped, wide: not read by the decoding
    native = tuple(row.values()) + flags
    assert claimed_from_tuple(native, NativeCodec()) == expected

    stored = _as_sqlite(row)
    with sqlite3.connect(":memory:") as conn:
        conn.row_factory = sqlite3.Row
        columns = ", ".join(f"? AS {name}" for name in stored)
        lite = conn.execute(f"SELECT {columns}", tuple(stored.values())).fetchone()
    assert claimed_from_tuple(lite, SQLiteCodec()) == expected
    assert claimed_from_row(lite, SQLiteCodec()) == expected


def test_instants_of_a_session_in_another_zone_read_as_utc() -> None:
    """PostgreSQL rows are used as they come when their instants are UTC already (a UTC
    session); a row of a session in another zone has every instant converted."""
    zone = timezone(timedelta(hours=2))
    row = {k: v.astimezone(zone) if isinstance(v, datetime) else v for k, v in _row().items()}
    claimed = claimed_from_tuple(tuple(row.values()), NativeCodec())
    expected = claimed_from_tuple(tuple(_row().values()), NativeCodec())
    assert claimed == expected
    run = claimed.run
    instants = [getattr(run, f.name) for f in dataclasses.fields(run)]
    instants = [at for at in instants if isinstance(at, datetime)] + [claimed.retry_from]
    assert len(instants) == 8
    assert all(at is not None and at.tzinfo is UTC for at in instants)
