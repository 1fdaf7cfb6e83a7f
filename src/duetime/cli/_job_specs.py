"""A job of the JSON format the CLI reads (``jobs import`` and ``jobs sync`` files): one JSON
object → the keyword fields of a :class:`~duetime.registration.JobSpec` (instants and delays
parsed, ``retry`` an object of ``RetryPolicy`` fields). Shared by the command modules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from duetime._durations import parse_duration
from duetime._types import RetryPolicy
from duetime.errors import ValidationError

__all__ = ["spec_fields"]


def _instant(value: Any, field: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(field, f"{value!r} is not an ISO 8601 instant") from None


def spec_fields(obj: Any) -> dict[str, Any]:
    """One JSON object of the import format → keyword fields of a JobSpec."""
    if not isinstance(obj, dict):
        raise ValidationError("spec", "each line must be a JSON object")
    values = dict(obj)
    if isinstance(values.get("at"), str):
        delay = parse_duration(values["at"])
        values["at"] = delay if delay is not None else _instant(values["at"], "at")
    for field in ("anchor", "start_at", "end_at"):
        if field in values:
            values[field] = _instant(values[field], field)
    # a text "every" ("90s", "PT15M", "1 day") is read by registration (schedules.parse_every)
    if isinstance(values.get("retry"), dict):
        try:
            values["retry"] = RetryPolicy(**values["retry"])
        except TypeError as exc:
            raise ValidationError("retry", str(exc)) from None
    return values
