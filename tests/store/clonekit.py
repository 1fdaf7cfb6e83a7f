"""Many rows made fast for PostgreSQL plan tests: copies of a template row in one statement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import tuple_row


def clone_rows(
    conn: psycopg.Connection[Any],
    table: str,
    fresh: Mapping[str, str],
    count: int,
    *,
    where: str = "",
    values: Mapping[str, Any] | None = None,
) -> None:
    """``count`` copies of each row of ``table`` that ``where`` (``WHERE …``, or empty: all)
    matches, in one statement: ``g`` numbers the copies from 1; a column named in ``fresh``
    takes that SQL expression (of ``g``, the row as ``{table}.column`` and ``values`` as
    ``%(name)s``; a literal ``%`` is ``%%``), every other column is copied."""
    with conn.cursor(row_factory=tuple_row) as cur:
        columns = [
            str(row[0])
            for row in cur.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = %s ORDER BY ordinal_position",
                (table,),
            )
        ]
    select = ", ".join(fresh.get(c, f"{table}.{c}") for c in columns)
    conn.execute(
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {table} "  # type: ignore[arg-type]
        f"CROSS JOIN generate_series(1, %(count)s) g {where}",
        {**(values or {}), "count": count},
    )
