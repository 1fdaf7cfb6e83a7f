"""Fields of PostgreSQL's COPY text format, encoded by hand for the bulk registration path.

psycopg's ``write_row`` adapts each value through its dumpers: ~8 µs for one 35-column job row,
more than the rest of bulk registration together. The rows of a bulk insert share most of their
columns, so the store encodes those once per shape with :func:`field` and only each job's own
columns per row.

The text format (PostgreSQL docs, COPY, "Text Format"): columns are separated by a tab, rows end
with a newline, ``\\N`` is NULL, and a backslash, tab, newline or carriage return inside a value
is written as ``\\\\``, ``\\t``, ``\\n``, ``\\r``. Every other character stands for itself.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

NULL = "\\N"

ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
"""For ``str.translate``: a string column's field is ``value.translate(ESCAPES)``."""
_MICROSECOND = timedelta(microseconds=1)


def text(value: str) -> str:
    """A string column's field."""
    return value.translate(ESCAPES)


def instant(value: datetime | None) -> str:
    """A ``timestamptz`` column's field: ISO 8601 in UTC (PostgreSQL reads no offset with
    fractions of a second, which ``isoformat`` writes for some historic zones)."""
    return NULL if value is None else value.astimezone(UTC).isoformat()


def field(value: Any) -> str:
    """Any column value the job rows hold: None, str (enums included), bool, int, float,
    datetime, timedelta (as whole microseconds, for ``bigint`` columns) or UUID."""
    if value is None:
        return NULL
    if isinstance(value, str):
        return text(value)
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return instant(value)
    if isinstance(value, timedelta):
        return str(value // _MICROSECOND)
    if isinstance(value, int | float | uuid.UUID):
        return str(value)
    raise TypeError(f"no COPY text encoding for {type(value).__name__}")
