"""The real brokers on loopback (Redis :6379, RabbitMQ :5672 guest/guest, NATS JetStream
:4222; ``.ci/run`` starts them), test consumers that read back what a relay published, and
helpers that run the relay until the outbox is drained. Each test uses names of its own
(streams, exchanges, subjects), so tests never see each other's messages."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from duetime import _json
from duetime.store import Store
from duetime.targets.brokers.config import parse_brokers
from duetime.worker.relay import Relay, RelayPass

REDIS_URL = os.environ.get("DUETIME_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("DUETIME_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
NATS_URL = os.environ.get("DUETIME_TEST_NATS_URL", "nats://127.0.0.1:4222")
URLS = {"redis": REDIS_URL, "rabbitmq": AMQP_URL, "nats": NATS_URL}
PORTS = {"redis": 6379, "rabbitmq": 5672, "nats": 4222}
CLOSED = {  # a port nothing listens on: the broker is "down"
    "redis": "redis://127.0.0.1:9/0",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:9/",
    "nats": "nats://127.0.0.1:9",
}


def need(kind: str) -> None:
    """Skip (fail under CI=true) when the broker does not answer on loopback."""
    try:
        socket.create_connection(("127.0.0.1", PORTS[kind]), timeout=2).close()
    except OSError:
        message = f"{kind} is not reachable on 127.0.0.1:{PORTS[kind]} (.ci/run starts it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def brokers_setting(kind: str, url: str | None = None, **options: Any) -> str:
    return _json.dumps({"b": {"type": kind, "url": url or URLS[kind], **options}})


def relay_for(store: Store, setting: str, **kwargs: Any) -> Relay:
    return Relay(store, parse_brokers(setting), **kwargs)


async def relay_all(relay: Relay, passes: int = 20) -> RelayPass:
    """Run passes until one claims nothing, then close the relay's connections (the next
    pass opens them again); the totals."""
    claimed = sent = retried = dead = 0
    try:
        for _ in range(passes):
            done = await relay.run_once()
            if not done.claimed:
                break
            claimed, sent = claimed + done.claimed, sent + done.sent
            retried, dead = retried + done.retried, dead + done.dead
    finally:
        await relay.close()
    return RelayPass(claimed, sent, retried, dead)


@dataclass(frozen=True, slots=True)
class Received:
    """A message as a consumer read it."""

    body: Any
    headers: dict[str, str]


class Consumer:
    """One broker destination made for a test, and a reader of what arrived there."""

    kind: str
    target: dict[str, Any]

    async def read(self) -> list[Received]:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class RedisConsumer(Consumer):
    kind = "redis"

    def __init__(self) -> None:
        import redis.asyncio as aioredis

        self.stream = f"duetime-test-{uuid.uuid4().hex}"
        self.target = {"type": "redis", "connection": "b", "stream": self.stream}
        self.client = aioredis.from_url(REDIS_URL)

    async def read(self) -> list[Received]:
        entries = await self.client.xrange(self.stream)
        out = []
        for _, fields in entries:
            decoded = {k.decode(): v.decode() for k, v in fields.items()}
            body = decoded.pop("payload")
            out.append(Received(_json.loads(body), decoded))
        return out

    async def close(self) -> None:
        await self.client.delete(self.stream)
        await self.client.aclose()


class RabbitConsumer(Consumer):
    kind = "rabbitmq"

    def __init__(self) -> None:
        self.exchange = f"duetime-test-{uuid.uuid4().hex}"
        self.target = {
            "type": "rabbitmq",
            "connection": "b",
            "exchange": self.exchange,
            "routing_key": "due",
        }
        self.conn: Any = None
        self.queue: Any = None

    async def open(self) -> None:
        import aio_pika

        self.conn = await aio_pika.connect(AMQP_URL)
        channel = await self.conn.channel()
        exchange = await channel.declare_exchange(self.exchange, auto_delete=False)
        self.queue = await channel.declare_queue(exclusive=True)
        await self.queue.bind(exchange, routing_key="due")
        self.channel = channel

    async def read(self) -> list[Received]:
        out = []
        while (message := await self.queue.get(no_ack=True, fail=False)) is not None:
            headers = {k: str(v) for k, v in (message.headers or {}).items()}
            headers["message_id"] = str(message.message_id)
            out.append(Received(_json.loads(message.body), headers))
        return out

    async def close(self) -> None:
        await self.channel.exchange_delete(self.exchange)
        await self.conn.close()


class NatsConsumer(Consumer):
    kind = "nats"

    def __init__(self) -> None:
        self.name = f"duetime_test_{uuid.uuid4().hex}"
        self.subject = f"duetime.test.{uuid.uuid4().hex}"
        self.target = {"type": "nats", "connection": "b", "subject": self.subject}
        self.nc: Any = None

    async def open(self, duplicate_window: float = 120.0) -> None:
        import nats
        from nats.js.api import StreamConfig

        self.nc = await nats.connect(NATS_URL)
        self.js = self.nc.jetstream()
        await self.js.add_stream(
            StreamConfig(name=self.name, subjects=[self.subject], duplicate_window=duplicate_window)
        )

    async def read(self) -> list[Received]:
        info = await self.js.stream_info(self.name)
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            if not info.state.messages:
                break
            msg = await self.js.get_msg(self.name, seq)
            out.append(Received(_json.loads(msg.data), dict(msg.headers or {})))
        return out

    async def close(self) -> None:
        await self.js.delete_stream(self.name)
        await self.nc.close()


async def consumer(kind: str) -> Consumer:
    need(kind)
    if kind == "redis":
        return RedisConsumer()
    made: RabbitConsumer | NatsConsumer = RabbitConsumer() if kind == "rabbitmq" else NatsConsumer()
    await made.open()
    return made


@pytest.fixture(params=["redis", "rabbitmq", "nats"])
async def broker(request: pytest.FixtureRequest) -> AsyncIterator[Consumer]:
    made = await consumer(request.param)
    try:
        yield made
    finally:
        await made.close()


only_redis = pytest.mark.parametrize("broker", ["redis"], indirect=True)
"""The :func:`broker` fixture on Redis alone (a :class:`RedisConsumer`)."""


async def dead_messages(app: Any, count: int = 1) -> list[int]:
    """``count`` broker runs of ``app``'s tenant, succeeded with their messages, which a relay
    then found refused for good: their outbox ids (no broker involved)."""
    from duetime._outbox import OutboxClaimParams, broker_task
    from duetime._types import AttemptOutcome, RunState
    from duetime.store.base import RunCompletion, RunsClaimParams, RunsCompleteParams
    from duetime.targets.brokers.message import build_message
    from duetime.targets.context import RunContext

    target = {"type": "rabbitmq", "connection": "b", "exchange": "gone", "routing_key": ""}
    for i in range(count):
        await app.schedule(f"dead-{i}", target=target, cron="0 0 1 1 *", allow_unregistered=True)
        await app.trigger(f"dead-{i}")
    claimed = await app.store.runs_claim(
        RunsClaimParams(
            worker_id="w", tasks=[broker_task("b")], limit=count, lease_ttl=30.0, lookahead=0.0
        )
    )
    completions = []
    for c in claimed:
        run = c.run
        ctx = RunContext(
            run_id=run.id,
            job_id=run.job_id,
            job_name=run.job_name,
            tenant=run.tenant,
            task=run.task,
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            max_attempts=run.max_attempts,
            token=run.token,
            worker_id="w",
            payload=run.payload,
        )
        completions.append(
            RunCompletion(
                run_id=run.id,
                token=run.token,
                worker_id="w",
                attempt=run.attempt,
                claimed_at=run.claimed_at,
                started_at=run.claimed_at,
                outcome=AttemptOutcome.SUCCEEDED,
                next_state=RunState.SUCCEEDED,
                outbox=build_message(ctx, target),
            )
        )
    assert all(await app.store.runs_complete(RunsCompleteParams(completions)))
    rows = await app.store.outbox_claim(OutboxClaimParams(["b"]))
    await app.store.outbox_dead([(r.id, "NOT_FOUND - no exchange 'gone'") for r in rows])
    return [r.id for r in rows]
