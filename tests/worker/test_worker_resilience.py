"""Losing the database connection pauses a worker; it does not crash it or run anything twice.

PostgreSQL only, on a database of the test's own (terminating every backend of the session's
shared database would break the other tests' connections)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from tests.forwarder import Forwarder
from tests.waiting import eventually
from workerkit import FAR, open_app, outcomes, serving, settled, wait

from duetime import AsyncApp
from duetime._config import Settings
from duetime._types import AttemptOutcome, RunState

pytestmark = pytest.mark.postgres
T = TypeVar("T")


@pytest.fixture
async def app(own_database: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(own_database)
    yield opened
    await opened.close()


async def patiently(op: Callable[[], Awaitable[T]]) -> T:
    """The test's own calls share the worker's pool: they may meet a dead connection too."""
    for _ in range(20):
        try:
            return await op()
        except psycopg.OperationalError:
            continue
    return await op()


def terminate_backends(url: str) -> int:
    """What a PostgreSQL restart does to a client: every connection to the database dies."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


async def test_a_worker_keeps_working_across_dropped_connections(
    app: AsyncApp, own_database: str
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    executions: list[uuid.UUID] = []

    @app.task("res.work")
    async def work(ctx: Any, payload: Any) -> None:
        executions.append(ctx.run_id)
        if payload.get("hold"):
            started.set()
            ctx.progress(0.5)
            await release.wait()
            ctx.checkpoint({"finished": True})

    await app.schedule("j", task="res.work", at=FAR, payload={}, overlap="allow")
    held = await app.trigger("j", payload={"hold": True})
    async with serving(app):
        await wait(started)
        # mid-run: whatever the worker does next (heartbeat, checkpoint, completion, claim)
        # meets a dead connection first
        assert await asyncio.to_thread(terminate_backends, own_database) >= 1
        release.set()
        final = await settled(app, held.id)
        assert final.state is RunState.SUCCEEDED
        assert final.checkpoint == {"finished": True}

        # while idle: its claims (and its LISTEN connection) die too, and it carries on
        assert await asyncio.to_thread(terminate_backends, own_database) >= 1
        later = [await patiently(lambda: app.trigger("j")) for _ in range(3)]
        for run in later:
            assert (await settled(app, run.id)).state is RunState.SUCCEEDED
    assert await outcomes(app, held.id) == [AttemptOutcome.SUCCEEDED]
    assert sorted(executions) == sorted([held.id, *(r.id for r in later)]), "each ran once"


async def test_runs_complete_once_while_connections_keep_dying(
    app: AsyncApp, own_database: str
) -> None:
    """For a second and a half every connection is cut every 50 ms while runs report progress,
    checkpoint, heartbeat and complete: each still runs once, ends with its last checkpoint,
    and the worker goes on claiming."""
    executions: list[uuid.UUID] = []
    all_started = asyncio.Event()

    @app.task("res.steps")
    async def steps(ctx: Any) -> None:
        executions.append(ctx.run_id)
        if len(executions) == len(runs):
            all_started.set()
        for i in range(30):
            ctx.progress(i / 30)
            ctx.checkpoint({"i": i})
            await asyncio.sleep(0.05)

    await app.schedule("j", task="res.steps", at=FAR, overlap="allow")
    runs = [await app.trigger("j") for _ in range(6)]

    def chaos() -> int:
        cuts = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            cuts += terminate_backends(own_database)
            time.sleep(0.05)
        return cuts

    async with serving(app):
        await wait(all_started)
        cuts = await asyncio.to_thread(chaos)
        finals = [await settled(app, run.id, timeout=30) for run in runs]
    assert cuts > 10
    assert [f.state for f in finals] == [RunState.SUCCEEDED] * len(runs)
    assert [f.checkpoint for f in finals] == [{"i": 29}] * len(runs)
    assert sorted(executions) == sorted(r.id for r in runs), "each ran exactly once"
    for run in runs:
        assert await patiently(lambda r=run: outcomes(app, r.id)) == [AttemptOutcome.SUCCEEDED]
    async with serving(app):
        after = await patiently(lambda: app.trigger("j"))
        assert (await settled(app, after.id)).state is RunState.SUCCEEDED


async def test_opening_waits_for_a_database_that_refuses_connections(
    own_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A process started before its database is reachable waits for it (``startup_wait``)
    instead of exiting: here the server's port refuses connections until a forwarder starts
    listening on it. (An unknown database or role ends at once: tests/unit/test_app_connect.py.)"""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    parts = urlsplit(own_database)
    late_url = urlunsplit(parts._replace(netloc=f"postgres@127.0.0.1:{port}"))
    app = AsyncApp(settings=Settings(database_url=late_url, startup_wait=30.0), migrate=True)
    opening = asyncio.create_task(app.open())

    forwarder = Forwarder((parts.hostname or "127.0.0.1", parts.port or 5432), port)
    try:

        async def failed_to_connect() -> bool:
            return any("cannot connect to" in r.getMessage() for r in caplog.records)

        await eventually(failed_to_connect, what="a refused connection attempt, announced")
        assert not opening.done()
        forwarder.open()
        await asyncio.wait_for(opening, 30)
        assert await app.store.schema_version() is not None
    finally:
        if not opening.done():
            opening.cancel()
        await app.close()
        forwarder.cut()
