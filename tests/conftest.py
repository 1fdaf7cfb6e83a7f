"""Shared fixtures: the store conformance fixtures (SQLite and PostgreSQL), a frozen clock,
and the hypothesis profiles.

PostgreSQL: the base URL comes from ``DUETIME_TEST_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``). One fresh database is created per test
session and dropped at its end; every test gets a fresh schema in it (``pg_url``). When the
server is unreachable the postgres tests are skipped, except under ``CI=true`` where they fail.
``-m "not postgres"`` deselects them.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from hypothesis import settings

from duetime._clock import FrozenClock
from duetime.store import Store, create_store

PG_URL_ENV = "DUETIME_TEST_PG_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_STORE_MODULE = "duetime.store.postgres.store"

# --- hypothesis ----------------------------------------------------------------------------

settings.register_profile("ci", max_examples=30, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if in_ci() else "dev"))


# --- PostgreSQL helpers (plain functions: usable from subprocess-based tests) ----------------


def pg_base_url() -> str:
    return os.environ.get(PG_URL_ENV) or DEFAULT_PG_URL


def _replace_url(url: str, *, dbname: str | None = None, search_path: str | None = None) -> str:
    parts = urlsplit(url)
    path = parts.path if dbname is None else "/" + dbname
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if search_path is not None:
        option = f"-csearch_path={search_path}"
        query["options"] = f"{query['options']} {option}" if query.get("options") else option
    return urlunsplit((parts.scheme, parts.netloc, path, urlencode(query), parts.fragment))


def _dbname(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def pg_unavailable_reason(base_url: str | None = None) -> str | None:
    """None if PostgreSQL answers at ``base_url``, else why not."""
    import psycopg

    url = base_url or pg_base_url()
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure to connect means "unavailable"
        return f"PostgreSQL unreachable at {url} ({PG_URL_ENV}): {exc}".strip()
    return None


def make_pg_database(base_url: str | None = None) -> str:
    """Create a fresh, empty database next to ``base_url``; return its URL.

    Drop it with :func:`drop_pg_database`.
    """
    import psycopg
    from psycopg import sql

    base = base_url or pg_base_url()
    name = f"duetime_test_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(base, connect_timeout=5, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return _replace_url(base, dbname=name)


def drop_pg_database(url: str, base_url: str | None = None) -> None:
    import psycopg
    from psycopg import sql

    name = _dbname(url)
    with psycopg.connect(base_url or pg_base_url(), connect_timeout=5, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def make_pg_schema(database_url: str) -> str:
    """Create a fresh schema in ``database_url``; return a URL whose search_path is it."""
    import psycopg
    from psycopg import sql

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(database_url, connect_timeout=5, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return _replace_url(database_url, search_path=schema)


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} — PostgreSQL is required when CI=true", pytrace=False)
    pytest.skip(reason)


# --- PostgreSQL fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The URL of this session's own PostgreSQL database (created once, dropped at the end)."""
    reason = pg_unavailable_reason()
    if reason is not None:
        _unavailable(reason)
    url = make_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A URL of the session database whose ``search_path`` is a fresh, empty schema."""
    return make_pg_schema(pg_database)


# --- the store fixtures ------------------------------------------------------------------------


@pytest.fixture
def t0() -> datetime:
    """The instant tests start at: the current minute (real-ish, so time-partitioned tables have
    a partition for it), UTC. Tests move time by passing ``now=t0 + …``."""
    return datetime.now(UTC).replace(second=0, microsecond=0)


@pytest.fixture
def clock(t0: datetime) -> FrozenClock:
    return FrozenClock(t0)


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """The URL of an empty database for one test, for each store."""
    if request.param == "sqlite":
        return str(tmp_path / "duetime.db")
    if importlib.util.find_spec(PG_STORE_MODULE) is None:
        _unavailable(f"{PG_STORE_MODULE} does not exist yet")
    return request.getfixturevalue("pg_url")


StoreFactory = Callable[..., Awaitable[Store]]


@pytest.fixture
async def make_store(store_url: str, clock: FrozenClock) -> AsyncIterator[StoreFactory]:
    """``await make_store(migrate=True)``: one more opened store over the same database (for
    concurrency tests); every store it made is closed after the test."""
    opened: list[Store] = []

    async def factory(*, migrate: bool = True) -> Store:
        store = create_store(store_url, clock=clock)
        await store.open()
        opened.append(store)
        if migrate:
            await store.migrate()
        return store

    yield factory
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def store(make_store: StoreFactory) -> Store:
    """An opened, migrated store (SQLite file in tmp_path, or a fresh PostgreSQL schema)."""
    return await make_store()
