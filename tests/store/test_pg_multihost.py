"""A multi-host URL whose first host accepts TCP but never answers — a frozen primary during
a failover (docs/howto/failover.md): every connection the store opens (the first, the pool's,
the listener's) gives that host up after ``connect_timeout`` and uses the next one, so the
store opens, runs statements and hears notifications. Without the timeout a pooled or
listening connection waited on the silent host for good (libpq's default: none; psycopg's:
130 s)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from duetime.store import create_store
from duetime.store.postgres.key_news import CONNECT_TIMEOUT, connect_timeout

pytestmark = pytest.mark.postgres


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose connections complete the TCP handshake (the kernel's backlog)
    and then hear nothing."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


def _behind_silent_host(url: str, port: int) -> str:
    parts = urlsplit(url)
    user, _, hostport = parts.netloc.rpartition("@")
    netloc = f"{user}@127.0.0.1:{port},{hostport}" if user else f"127.0.0.1:{port},{hostport}"
    query = "&".join(filter(None, [parts.query, "target_session_attrs=read-write"]))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


@pytest.mark.timeout(120)
async def test_a_silent_first_host_is_skipped_by_every_connection(
    pg_url: str, silent_port: int
) -> None:
    store = create_store(_behind_silent_host(pg_url, silent_port))
    await store.open()
    try:
        await store.migrate()
        assert await store.schema_version() is not None
        # starts the listener, through the same URL
        waiting = asyncio.ensure_future(store.wait_for_runs(timeout=60))
        # notify until the listener, once connected, hears it
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            while not waiting.done():
                await conn.execute("NOTIFY duetime_runs")
                await asyncio.wait({waiting}, timeout=0.5)
        assert waiting.result() is True
    finally:
        await store.close()


async def test_a_connect_timeout_the_url_sets_is_kept(pg_url: str) -> None:
    """The 5 s per host is a default: an operator who sets ``connect_timeout`` in the URL
    (a shorter one, for a quicker failover) gets it on the pool's connections and the
    listeners', not overridden."""
    sep = "&" if urlsplit(pg_url).query else "?"
    store = create_store(f"{pg_url}{sep}connect_timeout=17")
    await store.open()
    try:
        async with store.pool.connection() as conn:  # type: ignore[attr-defined]
            assert "connect_timeout=17" in conn.info.dsn.split()
    finally:
        await store.close()
    assert connect_timeout(f"{pg_url}{sep}connect_timeout=2") == "2"
    assert connect_timeout(pg_url) == CONNECT_TIMEOUT
