"""The relay against the real brokers, on each store: while a connection's broker is down the
outbox holds its messages (retried with backoff, the error kept); once it answers they are
published. A message the broker refuses for good goes to the dead-message list, which the app
lists and replays. A relay that claimed a batch and died leaves it to the next relay after
the lease, which publishes it again with the same message id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from duetime._config import Settings
from duetime._outbox import OutboxClaimParams
from duetime._types import RunState
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.brokers.publish import Verdict, open_publisher
from duetime.testing import FrozenApp, FrozenClock, drain
from duetime.worker.relay import BACKOFF_CAP, RelayPass
from tests.brokers.brokerkit import (
    CLOSED,
    Consumer,
    RabbitConsumer,
    brokers_setting,
    consumer,
    need,
    relay_all,
    relay_for,
)


async def run_feed(
    app: FrozenApp, target: dict[str, object], count: int, name: str = "feed"
) -> None:
    """``count`` one-shot jobs with ``target``, run by the worker until none is due."""
    for i in range(count):
        await app.schedule(
            f"{name}-{i}", target=target, now=True, payload={"n": i}, allow_unregistered=True
        )
    runs = await drain(app)
    assert [r.state for r in runs] == [RunState.SUCCEEDED] * count


@asynccontextmanager
async def held_in_outbox(
    store_url: str, clock: FrozenClock, broker: Consumer, count: int
) -> AsyncIterator[FrozenApp]:
    """An app whose connection ``b`` to ``broker`` is down, after :func:`run_feed` of ``count``
    runs: their messages held in the outbox (the drain's own relay failed), the backoff over."""
    down = Settings(brokers=brokers_setting(broker.kind, CLOSED[broker.kind]))
    async with FrozenApp(store_url, clock=clock, settings=down) as app:
        await run_feed(app, broker.target, count)
        clock.advance(seconds=BACKOFF_CAP + 1)
        yield app


async def test_messages_wait_while_the_broker_is_down(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    down = brokers_setting(broker.kind, CLOSED[broker.kind])
    settings = Settings(database_url=store_url, brokers=down)
    async with FrozenApp(store_url, clock=clock, settings=settings) as app:
        await run_feed(app, broker.target, 2)  # the drain's own relay fails too
        relay = relay_for(app.store, down)
        clock.advance(seconds=BACKOFF_CAP + 1)
        done = await relay.run_once()
        assert (done.claimed, done.sent, done.retried) == (2, 0, 2)
        depth = await app.outbox.depth()
        assert depth.pending == 2
        assert depth.oldest is not None
        assert await relay.run_once() == RelayPass()  # backing off: nothing claimed
        await relay.close()

        # the broker is back (the worker restarted with the right address)
        clock.advance(seconds=BACKOFF_CAP + 1)
        fixed = relay_for(app.store, brokers_setting(broker.kind))
        done = await relay_all(fixed)
        assert (done.sent, done.retried, done.dead) == (2, 0, 0)
        assert (await app.outbox.depth()).pending == 0
    assert sorted(m.body["n"] for m in await broker.read()) == [0, 1]


async def test_the_last_error_is_kept_while_retrying(store_url: str, clock: FrozenClock) -> None:
    need("redis")
    down = brokers_setting("redis", CLOSED["redis"])
    async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=down)) as app:
        await run_feed(app, {"type": "redis", "connection": "b", "stream": "never"}, 1)
        clock.advance(seconds=BACKOFF_CAP + 1)
        await relay_all(relay_for(app.store, down), passes=1)
        clock.advance(seconds=BACKOFF_CAP + 1)
        (row,) = await app.store.outbox_claim(OutboxClaimParams(connections=["b"]))
    assert row.last_error is not None
    assert "ConnectionError" in row.last_error
    assert row.tries >= 2


async def test_a_crashed_relay_s_batch_is_published_again_with_the_same_id(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    down = brokers_setting(broker.kind, CLOSED[broker.kind])
    up = brokers_setting(broker.kind)
    async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=down)) as app:
        await run_feed(app, broker.target, 2)  # held in the outbox: the drain's relay failed
        clock.advance(seconds=BACKOFF_CAP + 1)
        # a relay claims the batch, publishes it, and dies before marking it sent
        rows = await app.store.outbox_claim(OutboxClaimParams(connections=["b"], lease=10))
        crashed = open_publisher(parse_brokers(up)["b"], lambda value: value)
        try:
            assert {r.verdict for r in await crashed.publish(rows)} == {Verdict.SENT}
        finally:
            await crashed.close()
        assert await relay_all(relay_for(app.store, up)) == RelayPass()  # still leased
        clock.advance(seconds=11)
        done = await relay_all(relay_for(app.store, up))
        assert (done.claimed, done.sent) == (2, 2)
    received = await broker.read()
    ids = sorted(m.headers["duetime-message-id"] for m in received)
    expected = sorted(r.message_id for r in rows)
    if broker.kind == "nats":  # JetStream dropped the copies (Nats-Msg-Id, duplicate window)
        assert ids == expected
    else:  # Redis and RabbitMQ deliver both: consumers dedupe on the id (docs/brokers.md)
        assert ids == sorted(expected * 2)


@pytest.mark.parametrize("kind", ["redis", "rabbitmq", "nats"])
async def test_a_message_the_broker_refuses_goes_dead_and_replays(
    store_url: str, clock: FrozenClock, kind: str
) -> None:
    need(kind)
    setting = brokers_setting(kind)
    if kind == "redis":
        broker: Consumer = await consumer("redis")
        target = dict(broker.target)
        await broker.client.set(broker.stream, "not a stream")  # type: ignore[attr-defined]
    elif kind == "rabbitmq":
        broker = RabbitConsumer()  # the exchange does not exist yet
        target = dict(broker.target)
    else:
        broker = await consumer("nats")
        target = {**broker.target, "subject": broker.target["subject"] + ".nowhere"}
    async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=setting)) as app:
        await run_feed(app, target, 1)
        relay = relay_for(app.store, setting)
        await relay_all(relay)
        (dead,) = await app.outbox.dead()
        refusal = {"redis": "WRONGTYPE", "rabbitmq": "NOT_FOUND", "nats": "NoStreamResponse"}
        assert refusal[kind] in (dead.last_error or "")
        assert (await app.outbox.depth()).dead == 1

        if kind == "redis":
            await broker.client.delete(broker.stream)  # type: ignore[attr-defined]
        elif kind == "rabbitmq":
            await broker.open()  # type: ignore[attr-defined]
        assert await app.outbox.replay([dead.id]) == 1
        assert await app.outbox.dead() == []
        await relay_all(relay)
        if kind != "nats":
            (received,) = await broker.read()
            assert received.headers["duetime-message-id"] == dead.message_id
            assert (await app.outbox.depth()).dead == 0
        else:  # still no stream for that subject: refused again
            assert (await app.outbox.depth()).dead == 1
    await broker.close()


async def test_an_unroutable_rabbitmq_message_is_dead(store_url: str, clock: FrozenClock) -> None:
    broker = await consumer("rabbitmq")
    setting = brokers_setting("rabbitmq")
    target = {**broker.target, "routing_key": "no-queue-is-bound-to-this"}
    try:
        async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=setting)) as app:
            await run_feed(app, target, 1)
            await relay_all(relay_for(app.store, setting))
            (dead,) = await app.outbox.dead()
    finally:
        await broker.close()
    assert "PublishError" in (dead.last_error or "")
