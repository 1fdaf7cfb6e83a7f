"""Building frozen slotted dataclasses on hot paths without their generated ``__init__``.

A frozen dataclass's ``__init__`` sets each field with ``object.__setattr__`` (a frozen class
forbids the plain assignment), which costs a generic attribute lookup per field: for
:class:`~duetime._types.Run`'s 33 fields that is most of the cost of decoding a claimed row. A
:func:`positional_builder` makes the same instance by writing each slot through its own
descriptor, in one generated function (no loop, no keyword matching).

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
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for index, name in enumerate(names):
        scope[f"_set{index}"] = cls.__dict__[name].__set__  # the slot's member descriptor
    args = ", ".join(f"a{index}" for index in range(len(names)))
    body = "".join(f"    _set{index}(o, a{index})\n" for index in range(len(names)))
    source = f"def build({args}):\n    o = _new(_cls)\n{body}    return o\n"
    exec(compile(source, f"<positional_builder {cls.__qualname__}>", "exec"), scope)
    build: Callable[..., T] = scope["build"]
    build.__qualname__ = f"positional_builder.<{cls.__qualname__}>"
    return build
