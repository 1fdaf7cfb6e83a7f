"""A pause's note, validated (decision 0023): who paused a job, why, and until when."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime._types import JobPause
from duetime.errors import ValidationError

__all__ = ["MAX_NOTE", "RESERVED_BY", "pause_note"]

RESERVED_BY = "duetime"
"""The ``by`` of a pause on failure (the alert's mark); no caller may give it."""

MAX_NOTE = 1000
"""Characters a note (and a name in ``by``) may have."""


def pause_note(
    *, note: str | None, until: datetime | None, by: str | None, now: datetime
) -> JobPause | None:
    """The :class:`JobPause` of a pause, None when nothing is said. ``until`` must be aware
    and after ``now``; ``note`` and ``by`` are trimmed, at most :data:`MAX_NOTE` characters.
    Raises ValidationError naming the argument."""
    if until is not None:
        if until.tzinfo is None or until.utcoffset() is None:
            raise ValidationError("until", f"must be timezone-aware, got {until.isoformat()}")
        until = until.astimezone(UTC)
        if until <= now:
            raise ValidationError(
                "until", f"{until.isoformat()} is not in the future (now {now.isoformat()})"
            )
    note = _text("note", note)
    by = _text("by", by)
    if by == RESERVED_BY:
        raise ValidationError("by", f"{RESERVED_BY!r} is reserved for pause on failure")
    if note is None and until is None and by is None:
        return None
    return JobPause(by=by, note=note, until=until)


def _text(field: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    value = value.strip()
    if len(value) > MAX_NOTE:
        raise ValidationError(field, f"is {len(value)} characters; at most {MAX_NOTE}")
    return value or None
