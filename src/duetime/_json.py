"""JSON encoding used for payloads and stored documents (orjson: fast, strict)."""

from __future__ import annotations

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
    if len(data) > limit:
        raise ValidationError(field, f"is {len(data)} bytes as JSON; the limit is {limit} bytes")
    return data.decode()
