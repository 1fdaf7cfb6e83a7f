"""A relay's publish is bounded by its batch's lease (decision 0040): a broker that accepts
the connection and never answers, or one that stops answering once connected (a proxy to the
real broker, frozen: no confirm, ack or reply), is given up on before the lease ends, its rows
left to be retried (not sent, not dead) and its connection dropped during the pass (the next
batch connects anew), while a healthy broker's rows in the same batch are sent; a batch whose
lease may have lapsed is not marked, nor published if its claim returned too late; and the
relay closes its connections even when its last marks fail for good."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest

from duetime import _json
from duetime._config import Settings
from duetime._outbox import OutboxClaimParams, OutboxRow
from duetime.store import Store
from duetime.targets.brokers.config import BrokerConnection, parse_brokers
from duetime.targets.brokers.publish import Resolve, Result, open_publisher
from duetime.testing import FrozenApp, FrozenClock
from duetime.worker.relay import BACKOFF_CAP, Relay, RelayPass, _Published
from tests.brokers.brokerkit import (
    CLOSED,
    PORTS,
    URLS,
    Consumer,
    RedisConsumer,
    brokers_setting,
    only_redis,
    relay_all,
    relay_for,
)
from tests.brokers.test_relay import held_in_outbox, run_feed

LEASE = 2.0
"""The relay's outbox lease here: it gives up on a silent broker 1.5 s after its claim."""

WITHIN = 4.5
"""Seconds a pass may take before the test fails: a bound, not a measurement. Under the
publishers' own timeouts, which were all that bounded a publish before (a RabbitMQ connect
10 s and its confirms none, a NATS connect 5 s and its acks 10 s, a Redis read 10 s)."""


class Silent:
    """A broker on a port of its own that reads what it is sent and never answers; with an
    ``upstream``, a proxy to that real broker until :attr:`frozen` is set (then it stops
    answering, its connections open)."""

    def __init__(self, upstream: tuple[str, int] | None = None) -> None:
        self.upstream = upstream
        self.frozen = upstream is None
        self.opened = 0
        self.ended = 0
        self.changed = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter | None) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await source.read(65536):
                if sink is not None and not self.frozen:
                    sink.write(data)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        self.changed.set()
        back: asyncio.Task[None] | None = None
        upstream: asyncio.StreamWriter | None = None
        try:
            if self.upstream is not None:
                from_broker, upstream = await asyncio.open_connection(*self.upstream)
                back = asyncio.create_task(self.pipe(from_broker, writer))
            await self.pipe(reader, upstream)  # until the client closes the connection
        finally:
            self.ended += 1
            self.changed.set()
            if back is not None:
                back.cancel()
            if upstream is not None:
                upstream.close()
            writer.close()

    def url(self, kind: str) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return {
            "redis": f"redis://127.0.0.1:{port}/0",
            "rabbitmq": f"amqp://guest:guest@127.0.0.1:{port}/",
            "nats": f"nats://127.0.0.1:{port}",
        }[kind]

    async def all_ended(self) -> None:
        """Until every connection made to it has been closed by its client."""
        while self.ended < self.opened:
            self.changed.clear()
            await self.changed.wait()


@asynccontextmanager
async def silent(upstream: tuple[str, int] | None = None) -> AsyncIterator[Silent]:
    broker = Silent(upstream)
    broker.server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    try:
        yield broker
    finally:
        broker.server.close()


def two(kind: str, b: str, h: str) -> str:
    """A brokers setting: ``b`` and ``h``, both of ``kind``."""
    return _json.dumps({"b": {"type": kind, "url": b}, "h": {"type": kind, "url": h}})


async def test_a_broker_that_never_answers_is_given_up_on_within_the_lease(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    kind = broker.kind
    down = Settings(brokers=two(kind, CLOSED[kind], CLOSED[kind]))
    async with silent() as hung, FrozenApp(store_url, clock=clock, settings=down) as app:
        await run_feed(app, broker.target, 2)  # held in the outbox: the drain's relay failed
        await run_feed(app, {**broker.target, "connection": "h"}, 3, name="hung")
        clock.advance(seconds=BACKOFF_CAP + 1)
        relay = Relay(app.store, parse_brokers(two(kind, URLS[kind], hung.url(kind))), lease=LEASE)
        try:
            async with asyncio.timeout(WITHIN):
                done = await relay.run_once()
            # the healthy broker's rows sent, the silent one's put back to be retried
            assert done == RelayPass(claimed=5, sent=2, retried=3)
            depth = await app.outbox.depth()
            assert (depth.pending, depth.dead) == (3, 0)
            # the silent broker's connection dropped by the pass (not left open until close)
            assert hung.opened >= 1
            async with asyncio.timeout(WITHIN):
                await hung.all_ended()
        finally:
            await relay.close()
        clock.advance(seconds=BACKOFF_CAP + 1)
        (row, *_) = await app.store.outbox_claim(OutboxClaimParams(connections=["h"]))
        assert "TimeoutError" in (row.last_error or "")
    assert len(await broker.read()) == 2


async def test_a_broker_that_stops_answering_is_given_up_on_within_the_lease(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    kind = broker.kind
    down = Settings(brokers=two(kind, CLOSED[kind], CLOSED[kind]))
    async with (
        silent(("127.0.0.1", PORTS[kind])) as proxy,
        FrozenApp(store_url, clock=clock, settings=down) as app,
    ):
        relay = Relay(app.store, parse_brokers(two(kind, URLS[kind], proxy.url(kind))), lease=LEASE)
        try:
            await run_feed(app, {**broker.target, "connection": "h"}, 1, name="before")
            clock.advance(seconds=BACKOFF_CAP + 1)
            assert (await relay.run_once()).sent == 1  # connected through the proxy
            proxy.frozen = True  # the broker stops answering: no confirm, ack or reply
            await run_feed(app, broker.target, 2)
            await run_feed(app, {**broker.target, "connection": "h"}, 3, name="hung")
            clock.advance(seconds=BACKOFF_CAP + 1)
            async with asyncio.timeout(WITHIN):
                done = await relay.run_once()
            assert done == RelayPass(claimed=5, sent=2, retried=3)
            assert (await app.outbox.depth()).pending == 3
            async with asyncio.timeout(WITHIN):  # the silent connection dropped by the pass
                await proxy.all_ended()
            # the broker answers again: the next batch connects anew and publishes the rows
            proxy.frozen = False
            relay._resume_at.clear()  # its backoff over
            clock.advance(seconds=BACKOFF_CAP + 1)
            again = await relay.run_once()
            assert (again.claimed, again.sent, proxy.opened) == (3, 3, 2)
        finally:
            await relay.close()
    assert len(await broker.read()) == 6  # 1 before, the healthy broker's 2, then the 3


@only_redis
async def test_a_batch_whose_lease_may_have_lapsed_is_left_unmarked(
    store_url: str, clock: FrozenClock, broker: RedisConsumer
) -> None:
    async with held_in_outbox(store_url, clock, broker, 2) as app:
        relay = relay_for(app.store, brokers_setting("redis"), lease=LEASE)
        try:
            published = await relay._claim_and_publish()
            assert len(published.sent) == 2
            published.mark_by = float("-inf")  # the marks begin once the lease may have ended
            assert await relay._mark(published) == RelayPass(claimed=2, lapsed=2)
        finally:
            await relay.close()
        assert (await app.outbox.depth()).pending == 2  # left leased, not sent
        assert await relay_all(relay_for(app.store, brokers_setting("redis"))) == RelayPass()
        clock.advance(seconds=LEASE + 1)  # its lease over: published again, then marked
        done = await relay_all(relay_for(app.store, brokers_setting("redis")))
        assert (done.claimed, done.sent) == (2, 2)
    assert len(await broker.read()) == 4  # at least once: the same message ids twice


@only_redis
async def test_a_batch_claimed_after_its_publish_deadline_is_not_published(
    store_url: str, clock: FrozenClock, broker: RedisConsumer
) -> None:
    async with held_in_outbox(store_url, clock, broker, 2) as app:
        # a lease shorter than any claim's round trip: the deadline has passed when it returns
        relay = relay_for(app.store, brokers_setting("redis"), lease=1e-9)
        try:
            assert await relay.run_once() == RelayPass(claimed=2, lapsed=2)
        finally:
            await relay.close()
        assert (await app.outbox.depth()).pending == 2
    assert await broker.read() == []


class Watched:
    """A real publisher that notes whether it was closed."""

    def __init__(self, connection: BrokerConnection, resolve: Resolve) -> None:
        self.inner = open_publisher(connection, resolve)
        self.closed = False

    async def publish(
        self, rows: Sequence[OutboxRow], deadline: float | None = None
    ) -> list[Result]:
        return await self.inner.publish(rows, deadline)

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


class BrokenMarks(Relay):
    """A relay whose marks fail with a bug (no transient error), which also stops it: the
    failure surfaces at the final wait for the marks."""

    def __init__(self, store: Store, setting: str, stop: asyncio.Event) -> None:
        self.opened: list[Watched] = []

        def opener(connection: BrokerConnection, resolve: Resolve) -> Watched:
            self.opened.append(Watched(connection, resolve))
            return self.opened[-1]

        super().__init__(store, parse_brokers(setting), opener=opener)
        self.stop = stop

    async def _mark(self, done: _Published) -> RelayPass:
        self.stop.set()
        raise RuntimeError("a bug in the marks")


@only_redis
async def test_the_relay_closes_its_connections_when_its_last_marks_fail(
    store_url: str, clock: FrozenClock, broker: RedisConsumer
) -> None:
    async with held_in_outbox(store_url, clock, broker, 1) as app:
        stop = asyncio.Event()
        relay = BrokenMarks(app.store, brokers_setting("redis"), stop)
        with pytest.raises(RuntimeError, match="a bug in the marks"):
            async with asyncio.timeout(60):
                await relay.run(stop)
        assert [p.closed for p in relay.opened] == [True]
