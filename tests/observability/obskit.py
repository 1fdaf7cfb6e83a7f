"""Helpers for the observability tests: an app with fast settings on a real store, loops run in
the background (waiting on conditions: ``tests.waiting``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from duetime import AsyncApp
from duetime._config import Settings

FAST = {
    "lease_ttl": 5.0,
    "heartbeat_interval": 0.2,
    "worker_poll_interval": 0.05,
    "worker_lookahead": 0.2,
    "shutdown_grace": 2.0,
    "scheduler_tick": 0.1,
    "scheduler_horizon": 1.0,
}


async def open_app(url: str, *, tenant: str = "default", **settings: Any) -> AsyncApp:
    app = AsyncApp(
        settings=Settings(database_url=url, **{**FAST, **settings}), tenant=tenant, migrate=True
    )
    return await app.open()


@contextlib.asynccontextmanager
async def running(*loops: Callable[[asyncio.Event], Awaitable[None]]) -> AsyncIterator[None]:
    """Run ``loop(stop)`` for each loop until the block ends; a loop that died re-raises."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(loop(stop)) for loop in loops]
    try:
        yield
    finally:
        stop.set()
        for task in tasks:
            await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def worker(app: AsyncApp, tasks: Sequence[str], **settings: Any) -> AsyncIterator[Any]:
    from duetime.worker.worker import Worker

    w = Worker(app.store, app.registry, app.settings.with_(**settings), tasks=list(tasks))
    async with running(w.run):
        yield w
