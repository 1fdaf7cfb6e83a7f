"""Worker pools: a worker started with queues claims only runs of those queues, so long and
short jobs do not block each other (``duetime worker --queue``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from tests.waiting import eventually
from workerkit import FAR, open_app

from duetime import AsyncApp
from duetime._types import RunState
from duetime.worker.worker import Worker


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def test_a_pool_serves_only_its_queues(app: AsyncApp) -> None:
    release = asyncio.Event()

    @app.task("pool.long")
    async def long_task(ctx: object, payload: object) -> None:
        await release.wait()

    @app.task("pool.short")
    async def short_task(ctx: object, payload: object) -> None:
        return None

    long_job = await app.schedule("long", task="pool.long", at=FAR, queue="long")
    short_job = await app.schedule("short", task="pool.short", at=FAR, queue="short")
    longs = [await app.trigger(long_job.id) for _ in range(3)]
    shorts = [await app.trigger(short_job.id) for _ in range(5)]

    stop = asyncio.Event()
    only_short = app.worker(tasks=["pool.long", "pool.short"], queues=["short"])
    assert isinstance(only_short, Worker)
    task = asyncio.create_task(only_short.run(stop))
    try:

        async def shorts_done() -> bool:
            states = [(await app.run(r.id)).state for r in shorts]
            return all(s is RunState.SUCCEEDED for s in states)

        await eventually(shorts_done, what="the short runs")
        assert [(await app.run(r.id)).state for r in longs] == [RunState.SCHEDULED] * 3
        workers = await app.store.workers_list()
        assert [w.queues for w in workers if w.id == only_short.id] == [("short",)]
    finally:
        release.set()
        stop.set()
        await asyncio.wait_for(task, 30)
