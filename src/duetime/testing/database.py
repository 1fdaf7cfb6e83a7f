"""Where a test's jobs live: a SQLite file, or a fresh schema of a PostgreSQL database that is
dropped afterwards (each test sees only its own rows)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ENV_URL = "DUETIME_TEST_DATABASE_URL"
"""The environment variable the pytest plugin reads a PostgreSQL URL from."""


def is_postgres(url: str | None) -> bool:
    return bool(url) and urlsplit(url or "").scheme in ("postgres", "postgresql")


def sqlite_file(directory: Path) -> str:
    """A fresh SQLite database's path in ``directory`` (created on first use)."""
    return str(directory / "duetime.db")


def with_search_path(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` (``options=-csearch_path=…``, other options
    kept)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    option = f"-csearch_path={schema}"
    query["options"] = f"{query['options']} {option}" if query.get("options") else option
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


@contextlib.contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """A fresh schema ``duetime_test_<random>`` in the database at ``url``, dropped (with
    everything in it) when the block ends; yields a URL whose search path is that schema."""
    import psycopg  # only when a PostgreSQL URL was given
    from psycopg import sql

    schema = f"duetime_test_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield with_search_path(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
