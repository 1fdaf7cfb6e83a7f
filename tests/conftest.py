"""Shared fixtures: the store conformance fixtures (SQLite and PostgreSQL), a frozen clock,
and the hypothesis profiles.

PostgreSQL: the base URL comes from ``DUETIME_TEST_PG_URL`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``). One fresh database is created per test
session and dropped at its end (``make_pg_database``/``drop_pg_database`` do the same for
subprocess-based tests). Isolation inside it: ``pg_url`` is a URL whose ``search_path`` is a
fresh schema, one per test; the store conformance tests share one migrated schema whose rows
are deleted before each test (migrating a fresh schema costs ~0.1 s a test), except tests
marked ``fresh_database``, which get a ``pg_url``. When the server is unreachable the postgres
tests are skipped, except under ``CI=true`` where they fail. ``-m "not postgres"`` deselects
them.

PgBouncer: with ``DUETIME_TEST_PGBOUNCER=1`` the store fixtures gain a third store,
``pgbouncer``: the same PostgreSQL through a real PgBouncer in transaction pooling mode
(tests/pgbouncer_kit.py), with ``DUETIME_PGBOUNCER=transaction`` and a direct
``DUETIME_LISTEN_URL`` set for the test (apps made from the URL read them), for the folders
of :data:`PGBOUNCER_SUITES` only (elsewhere tests build settings of their own, without the
mode, and their ``pgbouncer`` variants are deselected).

Hash-partitioned runs: the store fixtures' ``hashed`` store is PostgreSQL with ``runs``
partitioned into :data:`HASH_PARTITIONS` by job partition key (docs/decisions/0033), for the
run-path conformance files of :data:`HASHED_FILES` only (elsewhere it is deselected).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from hypothesis import HealthCheck, settings

from duetime._clock import Clock, FrozenClock
from duetime._config import Settings
from duetime.store import Pooling, Store, create_store

PG_URL_ENV = "DUETIME_TEST_PG_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_STORE_MODULE = "duetime.store.postgres.store"
PGBOUNCER_ENV = "DUETIME_TEST_PGBOUNCER"
PGBOUNCER_SUITES = ("store", "worker", "workflows")
"""The test folders whose ``store_url`` tests also run through PgBouncer: the store
conformance suite and the worker and workflow end-to-end tests."""
HASH_PARTITIONS = 4
HASHED_FILES = frozenset(
    f"tests/store/test_store_{name}.py"
    for name in (
        "claim complete completer_refused start reaper retention trigger materialize misfire "
        "overlap overlap_races overlap_replace replay_cancel runs_read runs_filters longruns "
        "retry_window buffer_one outbox fairness run_id_prefix job_lifecycle "
        "calendars_backfill transaction run_events materialize_plain claim_alone"
    ).split()
) | {
    f"tests/workflows/test_workflow_{name}.py"
    for name in ("runs", "fanout_paths", "step_runs_store")
}
"""The store conformance files (every one whose statements touch runs) and the workflow files
that insert step runs, whose tests also run with ``runs`` hash-partitioned (the ``hashed``
store)."""

# --- hypothesis ----------------------------------------------------------------------------

# "ci": few examples, no deadline, reproducible; "dev": more examples. Property tests of other
# folders reuse these (they register their own only when missing).
settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fresh_database: store tests get an empty, unmigrated database (on PostgreSQL a fresh "
        "schema) instead of the shared one emptied between tests",
    )
    config.addinivalue_line(
        "markers",
        "pgbouncer: runs through a real PgBouncer in transaction pooling mode "
        "(tests/pgbouncer_kit.py; the store fixtures' third store with DUETIME_TEST_PGBOUNCER=1)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``pgbouncer`` store outside :data:`PGBOUNCER_SUITES`, and the ``hashed``
    store outside :data:`HASHED_FILES` (and in tests that migrate a fresh schema themselves)."""
    here = os.path.dirname(__file__)
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        chosen = callspec.params.get("store_url") if callspec is not None else None
        path = os.path.relpath(str(item.path), here).split(os.sep)
        unwanted = (chosen == "pgbouncer" and path[0] not in PGBOUNCER_SUITES) or (
            chosen == "hashed"
            and ("/".join(["tests", *path]) not in HASHED_FILES
                 or item.get_closest_marker("fresh_database") is not None)
        )  # fmt: skip
        (dropped if unwanted else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def through_pgbouncer() -> bool:
    """Whether the store fixtures also run through PgBouncer (``DUETIME_TEST_PGBOUNCER=1``)."""
    return os.environ.get(PGBOUNCER_ENV, "").strip() == "1"


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
        return f"PostgreSQL unreachable at {url} ({PG_URL_ENV}): {exc}"
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


def _pg_database_while_used() -> Iterator[str]:
    reason = pg_unavailable_reason()
    if reason is not None:
        _unavailable(reason)
    url = make_pg_database()
    try:
        yield url
    finally:
        drop_pg_database(url)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The URL of this session's own PostgreSQL database (created once, dropped at the end)."""
    yield from _pg_database_while_used()


@pytest.fixture
def own_database() -> Iterator[str]:
    """A PostgreSQL database of this test's own, dropped after it: for tests that cut its
    connections or count every row in it."""
    yield from _pg_database_while_used()


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A URL of the session database whose ``search_path`` is a fresh, empty schema."""
    return make_pg_schema(pg_database)


class SharedSchema:
    """One schema of the session database and an autocommit connection to it, opened again
    when the server has dropped it (a PostgreSQL restart in the middle of the run)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def connection(self, *, wait: float = 30.0) -> Any:
        """A live connection: the current one if it still answers, else a new one (trying for
        up to ``wait`` seconds while the server comes back)."""
        import psycopg

        if self._conn is not None:
            try:
                self._conn.execute("SELECT 1")
                return self._conn
            except psycopg.Error:
                self._conn.close()
                self._conn = None
        deadline = time.monotonic() + wait
        while True:
            try:
                self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=3)
                return self._conn
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the server is restarting: nothing to wait on but time

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


@pytest.fixture(scope="session")
def pg_shared_schema(pg_database: str) -> Iterator[SharedSchema]:
    """One schema of the session database shared by the store tests (migrated by the first
    test that uses it, emptied before each test), with a connection that survives a server
    restart.

    Migrating a fresh schema for every test costs ~0.1 s; emptying ~1 ms."""
    shared = SharedSchema(make_pg_schema(pg_database))
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture(scope="session")
def pg_hashed_schema(pg_database: str) -> Iterator[SharedSchema]:
    """Another shared schema of the session database, migrated and with ``runs`` partitioned
    into :data:`HASH_PARTITIONS` by job partition key (``Store.runs_partition_by_key``)."""
    import asyncio

    shared = SharedSchema(make_pg_schema(pg_database))

    async def prepare() -> None:
        store = create_store(shared.url)
        await store.open()
        try:
            await store.migrate()
            await store.runs_partition_by_key(HASH_PARTITIONS)
        finally:
            await store.close()

    asyncio.run(prepare())
    try:
        yield shared
    finally:
        shared.close()


def empty_pg_schema(conn: Any) -> None:
    """Delete every row of every table in the connection's schema except the migrations
    record, referencing tables first, and drop the weekly attempt partitions a test made; the
    schema itself stays."""
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
            "AND NOT c.relispartition AND c.relname <> 'duetime_migrations'"
        )
    }
    edges = {
        (child, parent)
        for child, parent in conn.execute(
            "SELECT con.conrelid::regclass::text, con.confrelid::regclass::text "
            "FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace "
            "WHERE con.contype = 'f' AND n.nspname = current_schema()"
        )
        if child != parent
    }
    order: list[str] = []
    left = set(tables)
    while left:
        # a table goes once no table still to empty references it
        ready = sorted(t for t in left if not any(p == t and c in left for c, p in edges))
        if not ready:  # a reference cycle: fall back to TRUNCATE
            order = []
            break
        order.extend(ready)
        left -= set(ready)
    from psycopg import sql

    weekly = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
            "AND c.relname LIKE 'attempts\\_w%'"
        )
    ]
    with conn.transaction():
        for partition in weekly:  # a test that made attempt partitions leaves none behind
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(partition)))
        if order or not tables:
            for table in order:
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
        else:
            names = sql.SQL(", ").join(sql.Identifier(t) for t in sorted(tables))
            conn.execute(sql.SQL("TRUNCATE {}").format(names))


# --- the store fixtures ------------------------------------------------------------------------


@pytest.fixture
def t0() -> datetime:
    """The instant tests start at: the current minute (real-ish, so time-partitioned tables have
    a partition for it), UTC. Tests move time by passing ``now=t0 + …``."""
    return datetime.now(UTC).replace(second=0, microsecond=0)


@pytest.fixture
def clock(t0: datetime) -> FrozenClock:
    return FrozenClock(t0)


@pytest.fixture(scope="session")
def pgbouncer(pg_database: str) -> Iterator[Any]:
    """A PgBouncer in transaction pooling mode in front of the session's server
    (tests/pgbouncer_kit.py); skipped when pgbouncer is not installed, except under CI=true."""
    from tests.pgbouncer_kit import PgBouncer, pgbouncer_binary

    if pgbouncer_binary() is None:
        _unavailable("pgbouncer is not installed (apt-get install -y pgbouncer)")
    bouncer = PgBouncer(pg_database)
    try:
        yield bouncer
    finally:
        bouncer.stop()


def pgbouncer_alias(bouncer: Any, direct_url: str) -> str:
    """A URL through ``bouncer`` of the database and schema (its ``search_path`` option) that
    ``direct_url`` names: PgBouncer does not forward ``options``, its alias sets the schema."""
    parts = urlsplit(direct_url)
    options = dict(parse_qsl(parts.query)).get("options", "")
    schema = options.partition("-csearch_path=")[2].split(" ")[0] or None
    name = f"a_{schema or _dbname(direct_url)}"
    return cast(str, bouncer.alias(name, dbname=_dbname(direct_url), schema=schema))


_STORES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("hashed", id="hashed", marks=pytest.mark.postgres),
]
if through_pgbouncer():
    _STORES.append(
        pytest.param(
            "pgbouncer", id="pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]
        )
    )


@pytest.fixture(params=_STORES)
def store_url(request: pytest.FixtureRequest, tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of an empty database for one test, for each store: SQLite, a fresh file;
    PostgreSQL, the session's shared schema emptied of rows (migrated once), or — for tests
    marked ``fresh_database`` — a fresh, unmigrated schema; ``pgbouncer`` (opt-in), the same
    through PgBouncer, with the settings that mode needs in the environment."""
    if request.param == "sqlite":
        return str(tmp_path / "duetime.db")
    if importlib.util.find_spec(PG_STORE_MODULE) is None:
        _unavailable(f"{PG_STORE_MODULE} does not exist yet")
    if request.node.get_closest_marker("fresh_database"):
        url = cast(str, request.getfixturevalue("pg_url"))
    elif request.param == "hashed":
        hashed: SharedSchema = request.getfixturevalue("pg_hashed_schema")
        empty_pg_schema(hashed.connection())
        return hashed.url
    else:
        shared: SharedSchema = request.getfixturevalue("pg_shared_schema")
        empty_pg_schema(shared.connection())
        url = shared.url
    if request.param == "pgbouncer":
        monkeypatch.setenv("DUETIME_PGBOUNCER", "transaction")
        monkeypatch.setenv("DUETIME_LISTEN_URL", url)
        return pgbouncer_alias(request.getfixturevalue("pgbouncer"), url)
    return url


StoreFactory = Callable[..., Awaitable[Store]]
_FROZEN = object()


@pytest.fixture
async def make_store(store_url: str, clock: FrozenClock) -> AsyncIterator[StoreFactory]:
    """``await make_store(migrate=True)``: one more opened store over the same database (for
    concurrency tests); every store it made is closed after the test. ``clock=None`` makes a
    store on its default clock (the database clock on PostgreSQL) instead of the frozen one."""
    opened: list[Store] = []
    frozen = clock
    pooling = Pooling.of(Settings.from_env(database_url=store_url))  # PgBouncer's, if any

    async def factory(*, migrate: bool = True, clock: Clock | object | None = _FROZEN) -> Store:
        chosen = frozen if clock is _FROZEN else cast("Clock | None", clock)
        store = create_store(store_url, clock=chosen, pooling=pooling)
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
    """An opened, migrated, empty store on a frozen clock at ``t0`` (see ``store_url``)."""
    return await make_store()
