"""Building frozen slotted dataclasses on hot paths without their generated ``__init__``.

A frozen dataclass's ``__init__`` sets each field with ``object.__setattr__`` (a frozen class
forbids the plain assignment), which costs a generic attribute lookup per field: for
:class:`~duetime._types.Run`'s 33 fields that is most of the cost of decoding a claimed row. A
:func:`positional_builder` makes the same instance in one generated function (no loop, no
keyword matching): it fills an instance of a mutable twin of the class — the same slots, in
the same order, on the same base — with plain attribute stores (which the interpreter
specializes to direct slot writes), then gives it the class (``__class__`` assignment, which
Python allows between such layouts). A class whose layout the twin cannot match gets each slot
written through its member descriptor instead (a call per field: about twice the cost).

Only for classes whose ``__init__`` does nothing but store its arguments: frozen, slotted,
without ``__post_init__``, every field an ``__init__`` argument. The instance is the same as
``cls(*values)`` makes (equal, hashing alike, immutable).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def positional_builder(cls: type[T]) -> Callable[..., T]:
    """A function ``build(v1, v2, …)`` returning ``cls(v1, v2, …)``: every field given, in
    declaration order (no defaults applied). Raises TypeError for a class it cannot build."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__} is not a frozen slotted dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__qualname__} has a __post_init__: build it with its __init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__qualname__} has a field its __init__ does not take")
    names = [f.name for f in fields]
    args = ", ".join(f"a{index}" for index in range(len(names)))
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    twin = _twin(cls)
    if twin is not None:
        scope["_twin"] = twin
        body = "".join(f"    o.{name} = a{index}\n" for index, name in enumerate(names))
        body += "    o.__class__ = _cls\n"
        source = f"def build({args}):\n    o = _new(_twin)\n{body}    return o\n"
    else:
        for index, name in enumerate(names):
            # the slot's member descriptor, in the class that declares the field
            owner = next(k for k in cls.__mro__ if name in k.__dict__)
            scope[f"_set{index}"] = owner.__dict__[name].__set__
        body = "".join(f"    _set{index}(o, a{index})\n" for index in range(len(names)))
        source = f"def build({args}):\n    o = _new(_cls)\n{body}    return o\n"
    exec(compile(source, f"<positional_builder {cls.__qualname__}>", "exec"), scope)
    build: Callable[..., T] = scope["build"]
    build.__qualname__ = f"positional_builder.<{cls.__qualname__}>"
    return build


def _twin(cls: type) -> type | None:
    """A mutable class with ``cls``'s slots, whose instances may become ``cls`` instances by
    ``__class__`` assignment; None when ``cls``'s layout does not allow it (a base other than
    ``object``, say)."""
    if cls.__bases__ != (object,):
        return None
    twin = type(f"_{cls.__name__}Twin", (object,), {"__slots__": cls.__dict__["__slots__"]})
    probe: Any = object.__new__(twin)
    try:
        probe.__class__ = cls
    except TypeError:  # pragma: no cover - layouts Python will not convert between
        return None
    return twin
