"""The pytest plugin of :mod:`duetime.testing` (entry point ``pytest11``: ``duetime``).

Fixtures — none autouse; this module's own imports are pytest's (duetime's modules load when a
test first asks for a fixture; the ``duetime`` package itself is imported with it):

- ``duetime_clock``: a :class:`~duetime.testing.FrozenClock` at the start of the current
  minute (UTC); move it with ``advance(hours=1)`` / ``set(instant)``.
- ``duetime_database_url``: the test's own database: a SQLite file under ``tmp_path``, or, when
  a PostgreSQL URL is given (``--duetime-database-url``, the ``duetime_database_url`` ini
  option or ``DUETIME_TEST_DATABASE_URL``), a fresh schema of it, dropped after the test.
- ``duetime_registry``: the tasks the app runs — an empty registry (with the built-in tasks);
  override it to hand over your own (``return my_app.registry``).
- ``duetime_app``: an open :class:`~duetime.testing.FrozenApp` (an ``AsyncApp``) on that
  database, clock and registry; closed after the test. Async: needs pytest-asyncio.
- ``duetime_sync_app``: the same as a blocking :class:`~duetime.App`, for sync tests.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from duetime._clock import FrozenClock
    from duetime.targets.python import TaskRegistry
    from duetime.testing.app import FrozenApp, FrozenSyncApp

try:  # pytest-asyncio's strict mode runs only async fixtures made with its decorator
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - without it, async fixtures need another runner
    async_fixture = pytest.fixture  # type: ignore[assignment]  # same call shape, other overloads

ENV_URL = "DUETIME_TEST_DATABASE_URL"  # duetime.testing.database.ENV_URL, without importing it


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--duetime-database-url",
        default=None,
        help="PostgreSQL URL for the duetime_* fixtures (each test gets a fresh schema); "
        "default: a SQLite file per test",
    )
    parser.addini(
        "duetime_database_url",
        "PostgreSQL URL for the duetime_* fixtures (default: a SQLite file per test)",
        default="",
    )


def _given_url(config: pytest.Config) -> str | None:
    option = config.getoption("--duetime-database-url", default=None)
    ini = str(config.getini("duetime_database_url") or "")
    return option or ini or os.environ.get(ENV_URL) or None


@pytest.fixture
def duetime_clock() -> FrozenClock:
    """A frozen clock at the start of the current minute (UTC)."""
    from duetime._clock import FrozenClock
    from duetime.testing.app import start_of_minute

    return FrozenClock(start_of_minute())


@pytest.fixture
def duetime_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The test's own database: a SQLite file under ``tmp_path``, or a fresh PostgreSQL schema
    (dropped after the test) when a URL was given."""
    from duetime.testing.database import is_postgres, postgres_schema, sqlite_file

    given = _given_url(request.config)
    if given is None:
        yield sqlite_file(tmp_path)
        return
    if not is_postgres(given):
        raise pytest.UsageError(f"duetime_database_url must be a postgresql:// URL: {given!r}")
    with postgres_schema(given) as url:
        yield url


@pytest.fixture
def duetime_registry() -> TaskRegistry:
    """The tasks ``duetime_app`` runs: override this fixture to return your app's registry."""
    from duetime.targets.python import TaskRegistry

    return TaskRegistry()


@async_fixture
async def duetime_app(
    duetime_database_url: str, duetime_clock: FrozenClock, duetime_registry: TaskRegistry
) -> AsyncIterator[FrozenApp]:
    """An open AsyncApp (``FrozenApp``) on the test's database, clock and registry."""
    from duetime.testing.app import FrozenApp

    app = FrozenApp(duetime_database_url, clock=duetime_clock, registry=duetime_registry)
    await app.open()
    try:
        yield app
    finally:
        await app.close()


@pytest.fixture
def duetime_sync_app(
    duetime_database_url: str, duetime_clock: FrozenClock, duetime_registry: TaskRegistry
) -> Iterator[FrozenSyncApp]:
    """A blocking App (``FrozenSyncApp``) on the test's database, clock and registry."""
    from duetime.testing.app import FrozenSyncApp

    app = FrozenSyncApp(duetime_database_url, clock=duetime_clock, registry=duetime_registry)
    try:
        yield app
    finally:
        app.close()
