"""The PostgreSQL store's pool pings a connection before handing it out only when the
connection has not answered a statement within the last second: on the hot paths (a claim, a
completion, a trigger) the ping would double the round trips."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from tests.waiting import eventually

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


async def test_a_connection_the_server_closed_is_replaced_before_use(
    store: Store, pings: list[Any], pg_url: str
) -> None:
    """A restart, a failover or pg_terminate_backend ends the session from the server's side:
    the socket then has something to read, so even a connection used a moment ago is pinged —
    and replaced — before the next statement, which succeeds."""
    import psycopg

    await store.job_list(JobListParams(tenant="default"))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        others = "datname = current_database() AND pid <> pg_backend_pid()"
        admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {others}")

        async def all_gone() -> bool:
            # a backend leaves pg_stat_activity after it told its client and closed the socket
            row = admin.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {others}").fetchone()
            return row is not None and row[0] == 0

        await eventually(all_gone, what="the terminated backends to exit")
    before = len(pings)
    await store.job_list(JobListParams(tenant="default"))  # no AdminShutdown
    assert len(pings) > before, "the closed connection was handed out without a ping"
