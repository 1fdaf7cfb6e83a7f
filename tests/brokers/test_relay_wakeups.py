"""How soon the relay publishes (decision 0040): another process's commit of outbox rows is
news its relay waits on (PostgreSQL NOTIFY ``duetime_outbox``: ``store.wait_for_outbox``),
and a batch's verdicts are written while the next batch is claimed and published, every one
of them written before the relay stops (the idle poll made an hour long: only the overlap
can publish the second batch), and a batch's failed marks do not drop the next batch's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from duetime._config import Settings
from duetime.store import Store, create_store
from duetime.targets.brokers.config import parse_brokers
from duetime.testing import FrozenApp, FrozenClock
from duetime.worker import relay as relay_module
from duetime.worker.relay import Relay, RelayPass, _Published
from tests.brokers.brokerkit import (
    REDIS_URL,
    RedisConsumer,
    brokers_setting,
    only_redis,
)
from tests.brokers.test_relay import held_in_outbox, run_feed

WITHIN = 60.0
"""Seconds a test waits for messages before it fails (a bound, not a measurement)."""


async def arrived(stream: str, count: int) -> int:
    """Block on the stream (``XREAD BLOCK``) until ``count`` entries are in it; fails after
    :data:`WITHIN` seconds. Returns how many there are."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)
    seen, last, deadline = 0, "0", time.monotonic() + WITHIN
    try:
        while seen < count:
            if time.monotonic() > deadline:
                pytest.fail(f"{seen} of {count} messages published within {WITHIN:.0f}s")
            got = await client.xread({stream: last}, block=500)
            for _, entries in got or []:
                seen += len(entries)
                last = entries[-1][0]
    finally:
        await client.aclose()
    return seen


@pytest.fixture
def no_idle_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay_module, "IDLE_POLL", 3600.0)


@pytest.mark.postgres
@only_redis
async def test_another_process_hears_a_completion_commit_outbox_rows(
    pg_url: str, clock: FrozenClock, broker: RedisConsumer
) -> None:
    settings = Settings(brokers=brokers_setting("redis"))
    async with FrozenApp(pg_url, clock=clock, settings=settings) as app:
        other = create_store(pg_url)  # another process's store: what its relay waits on
        await other.open()
        try:
            assert await other.wait_for_outbox(WITHIN), "the listener's first wake-up (connected)"
            news = asyncio.create_task(other.wait_for_outbox(WITHIN))
            await run_feed(app, broker.target, 2)  # the completions commit the outbox rows
            assert await news, "no NOTIFY duetime_outbox heard"
        finally:
            await other.close()


class HeldMarks(Relay):
    """A relay to Redis whose batches' verdicts are not written until :attr:`release` is set."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, parse_brokers(brokers_setting("redis")), batch=1)
        self.release = asyncio.Event()

    async def _mark(self, done: _Published) -> RelayPass:
        await self.release.wait()
        return await super()._mark(done)


@asynccontextmanager
async def running(relay: HeldMarks) -> AsyncIterator[None]:
    """``relay`` runs while inside; on leaving, its marks are released and it is stopped (its
    run returns once every batch's verdicts are written)."""
    stop = asyncio.Event()
    task = asyncio.create_task(relay.run(stop))
    try:
        yield
    finally:
        relay.release.set()
        stop.set()
        await task


@only_redis
@pytest.mark.usefixtures("no_idle_poll")
async def test_the_next_batch_is_published_while_the_last_one_s_marks_are_written(
    store_url: str, clock: FrozenClock, broker: RedisConsumer
) -> None:
    async with held_in_outbox(store_url, clock, broker, 2) as app:
        async with running(HeldMarks(app.store)):
            # the first batch's marks are held: the second batch is published all the same
            assert await arrived(broker.stream, 2) == 2
        # every verdict written before the relay stopped: nothing pending, nothing twice
        assert (await app.outbox.depth()).pending == 0
        assert len(await broker.read()) == 2


class FirstMarksFail(HeldMarks):
    """A relay whose first batch's verdicts fail to be written (the database unreachable for
    that statement), once :attr:`release` is set; the later batches' are written."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.marks = 0

    async def _mark(self, done: _Published) -> RelayPass:
        self.marks += 1
        if self.marks == 1:
            await self.release.wait()
            raise self.store.transient_errors[0]("the database went away")
        return await super()._mark(done)


@only_redis
@pytest.mark.usefixtures("no_idle_poll")
async def test_a_batch_published_while_the_last_one_s_marks_failed_is_still_marked(
    store_url: str, clock: FrozenClock, broker: RedisConsumer
) -> None:
    async with held_in_outbox(store_url, clock, broker, 2) as app:
        async with running(FirstMarksFail(app.store)):
            # the first batch's marks fail once the second batch is published
            assert await arrived(broker.stream, 2) == 2
        # the first batch's mark failed: it stays leased, to be published again; the second
        # batch's sent mark was written all the same (not published a second time for nothing)
        assert (await app.outbox.depth()).pending == 1
