"""Helpers for worker tests: an app with fast settings on a real store, a worker served in the
background, and waiting on conditions (``tests.waiting``: never on fixed sleeps)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

from tests.waiting import eventually, signalled

from duetime import AsyncApp, Retry
from duetime._config import Settings
from duetime._types import Attempt, AttemptOutcome, Run
from duetime.store.base import RunCompletion
from duetime.worker.worker import Worker

FAST = {
    "lease_ttl": 5.0,
    "heartbeat_interval": 0.2,
    "worker_poll_interval": 0.05,
    "worker_lookahead": 0.2,
    "shutdown_grace": 2.0,
}
QUICK_RETRY = Retry(max_attempts=3, backoff_base=0.01, backoff_factor=1.0, backoff_cap=0.01)
FAR = timedelta(days=365)
"""A one-shot job's own instant, out of every horizon: its runs come from triggers."""
NO_HEARTBEAT = {"lease_ttl": 600.0, "heartbeat_interval": 300.0}
"""A worker that never heartbeats during a test: its lease lapses only when the test says."""


async def open_app(url: str, **settings: Any) -> AsyncApp:
    # from the environment too: the PgBouncer store of tests/conftest.py sets its mode there
    app = AsyncApp(
        settings=Settings.from_env(database_url=url, **{**FAST, **settings}), migrate=True
    )
    return await app.open()


@contextlib.asynccontextmanager
async def serving(
    app: AsyncApp,
    *,
    on_complete: Callable[[RunCompletion, bool], None] | None = None,
    **settings: Any,
) -> AsyncIterator[Worker]:
    """A worker of ``app`` (with ``settings`` overrides) running until the block ends; then it
    shuts down gracefully, and a worker loop that died re-raises here."""
    worker = Worker(
        app.store,
        app.registry,
        app.settings.with_(**settings),
        tasks=sorted(n for n in app.registry.names() if not n.startswith("duetime.")),
        on_complete=on_complete,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def settled(app: AsyncApp, run_id: uuid.UUID, *, timeout: float = 15.0) -> Run:
    """The run once it reached a terminal state."""

    async def probe() -> Run | None:
        try:
            run = await app.run(run_id)
        except app.store.transient_errors:  # resilience tests cut the test's connections too
            return None
        return run if run.state.terminal else None

    return await eventually(probe, what=f"run {run_id} to end", timeout=timeout)


async def outcomes(app: AsyncApp, run_id: uuid.UUID) -> list[AttemptOutcome]:
    return [a.outcome for a in await app.attempts(run_id)]


async def attempts_reach(app: AsyncApp, run_id: uuid.UUID, *expected: AttemptOutcome) -> None:
    async def probe() -> list[Attempt] | None:
        found = await app.attempts(run_id)
        return found if [a.outcome for a in found] == list(expected) else None

    await eventually(probe, what=f"attempts {expected}")


async def wait(event: asyncio.Event, timeout: float = 15.0, *, what: str = "an event") -> None:
    await signalled(event, what=what, timeout=timeout)
