"""The PostgreSQL store's pool pings a connection before handing it out only when the
connection has not answered a statement within the last second: on the hot paths (a claim, a
completion, a trigger) the ping would double the round trips."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from duetime.store import Store, create_store
from duetime.store.base import JobListParams

pytestmark = pytest.mark.postgres


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The connections the pool pings (psycopg_pool's own check, called through)."""
    seen: list[Any] = []
    original = AsyncConnectionPool.check_connection

    async def counting(conn: Any) -> None:
        seen.append(conn)
        await original(conn)

    monkeypatch.setattr(AsyncConnectionPool, "check_connection", staticmethod(counting))
    return seen


@pytest.fixture
async def store(pg_url: str, pings: list[Any]) -> AsyncIterator[Store]:
    opened = create_store(pg_url)
    await opened.open()
    try:
        await opened.migrate()
        yield opened
    finally:
        await opened.close()


async def test_a_connection_used_a_moment_ago_is_not_pinged(store: Store, pings: list[Any]) -> None:
    before = len(pings)
    for _ in range(20):
        await store.job_list(JobListParams(tenant="default"))
    assert len(pings) - before <= 1, "a connection that just answered was pinged again"


async def test_a_connection_idle_for_a_while_is_pinged_first(
    store: Store, pings: list[Any]
) -> None:
    # what a second without use leaves: the connection's last answer is too old to trust
    store._last_used.clear()  # type: ignore[attr-defined]
    before = len(pings)
    await store.job_list(JobListParams(tenant="default"))
    assert len(pings) - before == 1
