"""The COPY text fields the bulk path encodes by hand: each value comes back from PostgreSQL
exactly as it went in."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from duetime.store.postgres import copy_text

pytestmark = pytest.mark.postgres

CASES: list[tuple[str, object]] = [
    ("text", "plain"),
    ("text", "back\\slash \\N tab\tnewline\nreturn\r end"),
    ("text", "é 🙂 \u2028"),
    ("text", ""),
    ("text", None),
    ("boolean", True),
    ("boolean", False),
    ("bigint", -(2**62)),
    ("double precision", 0.1),
    ("double precision", 1e-300),
    ("timestamptz", datetime(2026, 3, 29, 1, 30, 0, 123456, tzinfo=UTC)),
    ("timestamptz", datetime(2026, 10, 25, 2, 30, tzinfo=timezone(timedelta(hours=5, minutes=30)))),
    (
        "timestamptz",  # an offset with seconds and microseconds, as some historic zones have
        datetime(1900, 1, 1, 12, tzinfo=timezone(timedelta(hours=5, seconds=28, microseconds=7))),
    ),
    ("uuid", uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
]


def test_every_field_comes_back_as_it_went_in(pg_url: str) -> None:
    columns = ", ".join(f"c{i} {kind}" for i, (kind, _) in enumerate(CASES))
    line = "\t".join(copy_text.field(value) for _, value in CASES) + "\n"
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"CREATE TEMP TABLE copied ({columns})")
        with conn.cursor().copy("COPY copied FROM STDIN") as copy:
            copy.write(line)
        row = conn.execute("SELECT * FROM copied").fetchone()
    assert row is not None
    assert list(row) == [value for _, value in CASES]


def test_an_interval_is_written_as_whole_microseconds() -> None:
    assert copy_text.field(timedelta(seconds=90, microseconds=5)) == "90000005"


def test_a_value_it_cannot_encode_is_refused_by_type() -> None:
    with pytest.raises(TypeError, match="dict"):
        copy_text.field({"a": 1})
