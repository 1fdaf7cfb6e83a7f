"""Fixtures for the REST API tests: per store (SQLite, PostgreSQL) one migrated database and
one real ``duetime server`` process on loopback, shared by the package's tests (each test uses
its own job names), and API keys for two tenants."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime.app import AsyncApp
from tests.conftest import make_pg_schema

pytest.register_assert_rewrite("tests.api.apikit")
from tests.api.apikit import Keys, ServerProcess, make_keys, start  # noqa: E402


@pytest.fixture(
    scope="package",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def api_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return str(tmp_path_factory.mktemp("api") / "api.db")
    url = make_pg_schema(request.getfixturevalue("pg_database"))

    async def migrate() -> None:
        async with AsyncApp(url, migrate=True):
            pass

    asyncio.run(migrate())
    return url


@pytest.fixture(scope="package")
def keys(api_db: str) -> Keys:
    return make_keys(api_db)


@pytest.fixture(scope="package")
def server(
    api_db: str, keys: Keys, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """``duetime server`` with API keys required (rate limit off)."""
    proc = start(api_db, cwd=tmp_path_factory.mktemp("server"))
    yield proc
    proc.stop()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
