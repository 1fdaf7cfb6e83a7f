"""A scratch database beside a user's own, for measurements that must not touch their data.

PostgreSQL: a fresh schema ``duetime_scratch_<hex>`` in the URL's database (the same server,
disks and settings), reached through a URL whose ``search_path`` is that schema, and dropped
with everything in it on exit. SQLite: a fresh file in the directory of the URL's file (the
same disk), removed with its WAL files on exit. The user's own schema or file is never read
or written; the scratch is unmigrated (open an app on it to migrate)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from duetime._redact import redact_url
from duetime.errors import ConnectError, DuetimeError
from duetime.store import is_postgres_url

PREFIX = "duetime_scratch_"


@contextlib.contextmanager
def scratch_database(url: str) -> Iterator[str]:
    """Yield the URL of a fresh, empty database beside ``url``'s; drop it on exit (also when
    the body raises). Raises ``ConnectError`` when the server cannot be reached, and
    ``DuetimeError`` when the URL's role may not create a schema there."""
    if is_postgres_url(url):
        with _pg_schema(url) as scratch:
            yield scratch
        return
    path = Path(url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch_path = path.parent / f"{PREFIX}{secrets.token_hex(6)}.db"
    try:
        yield str(scratch_path)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{scratch_path}{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def _pg_schema(url: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    schema = f"{PREFIX}{secrets.token_hex(6)}"
    try:
        conn = psycopg.connect(plain, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise ConnectError(redact_url(url), _first_line(exc), retryable=False) from None
    with conn:
        try:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        except psycopg.Error as exc:
            raise DuetimeError(
                f"cannot create a scratch schema in {redact_url(url)}: {_first_line(exc)} "
                "(the role needs CREATE on the database)"
            ) from None
    try:
        yield _with_search_path(url, schema)
    finally:
        with psycopg.connect(plain, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    kept = [o for o in query.get("options", "").split() if not o.startswith("-csearch_path=")]
    query["options"] = " ".join([*kept, f"-csearch_path={schema}"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))
