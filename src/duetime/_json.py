"""JSON encoding used for payloads and stored documents (orjson: fast, strict)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import orjson

from duetime.errors import ValidationError


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def loads(text: str | bytes | None) -> Any:
    return None if text is None else orjson.loads(text)


def encode_payload(value: Any, *, limit: int, field: str = "payload") -> str:
    """Encode a user payload; raise ValidationError if it is not JSON or exceeds ``limit`` bytes."""
    try:
        data = orjson.dumps(value)
    except TypeError as exc:
        raise ValidationError(field, f"is not JSON-serializable ({exc})") from None
    if b"null" in data:  # orjson writes NaN and ±Infinity as null: look for them only then
        where = non_finite(value)
        if where is not None:
            path, number = where
            raise ValidationError(
                field + path,
                f"is {_name(number)}: JSON has no NaN or Infinity (it would be stored as null)",
            )
    if len(data) > limit:
        raise ValidationError(field, f"is {len(data)} bytes as JSON; the limit is {limit} bytes")
    return data.decode()


def non_finite(value: Any) -> tuple[str, float] | None:
    """Where ``value`` (JSON data) holds a NaN or an infinity, as a path (``.items[2].price``)
    and the number; None if it holds none."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return path, item
        elif isinstance(item, dict):
            stack.extend((f"{path}.{k}", v) for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):  # orjson takes them
            fields = dataclasses.fields(item)
            stack.extend((f"{path}.{f.name}", getattr(item, f.name)) for f in reversed(fields))
    return None


def _name(number: float) -> str:
    """NaN, Infinity or -Infinity: what the number is called in JavaScript (and JSON5)."""
    return "NaN" if math.isnan(number) else "Infinity" if number > 0 else "-Infinity"
