"""The outbox's publish rate per broker with two relays (docs/brokers.md, issue 19).

    python -m bench.outbox                      # 20,000 messages per broker, 2 relays, 3 rounds
    python -m bench.outbox --messages 5000 --brokers nats,redis --relays 1

For each broker (Redis stream, RabbitMQ exchange with publisher confirms, NATS JetStream
subject), a fresh PostgreSQL database gets ``--messages`` pending outbox rows (written with
one SQL statement: the rows a broker run's completion inserts), then ``--relays`` processes
each run a :class:`~duetime.worker.relay.Relay`'s loop as a worker runs it (batches of
``--batch``, claimed with ``FOR UPDATE SKIP LOCKED``) until the outbox is empty. The figure
is messages per second from the relays' start to the last row marked sent, beside the
relays' CPU time per message (from their start until the outbox is empty: the figure that
says most on a loaded machine); the broker-side count is checked. Brokers on loopback as the
tests use them (``DUETIME_TEST_REDIS_URL`` …).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
import uuid
from typing import Any

import psycopg

from bench._common import (
    Spread,
    base_parser,
    create_database,
    drop_database,
    guarded_main,
    report,
)
from duetime import AsyncApp, _json
from duetime.store import create_store
from duetime.targets.brokers.config import parse_brokers
from duetime.worker.relay import Relay

URLS = {
    "redis": os.environ.get("DUETIME_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "rabbitmq": os.environ.get("DUETIME_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    "nats": os.environ.get("DUETIME_TEST_NATS_URL", "nats://127.0.0.1:4222"),
}

FILL = """
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT r.id::text || ':1', 'default', r.id, 1, 'b', %(target)s::jsonb, '{"n": 1}',
       jsonb_build_object('duetime-run-id', r.id::text, 'duetime-attempt', '1',
                          'duetime-message-id', r.id::text || ':1'),
       clock_timestamp(), clock_timestamp()
FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, %(n)s)) r
"""


def _relay_process(
    url: str, setting: str, batch: int, ready: Any, go: Any, drained: Any, cpu: Any
) -> None:
    async def run() -> None:
        store = create_store(url)
        await store.open()
        relay = Relay(store, parse_brokers(setting), batch=batch)
        stop = asyncio.Event()

        async def until_drained() -> None:
            await asyncio.to_thread(drained.wait)
            stop.set()

        try:
            ready.release()
            go.wait()
            began = time.process_time()
            watcher = asyncio.create_task(until_drained())
            await relay.run(stop)  # as a worker runs it: marks beside the next pass
            await watcher
            cpu.put(time.process_time() - began)
        finally:
            await relay.close()
            await store.close()

    asyncio.run(run())


class Destination:
    """The broker-side destination of one round, made before and removed after it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"duetime_bench_{uuid.uuid4().hex[:8]}"
        self.target: dict[str, str] = {"type": kind, "connection": "b"}
        if kind == "redis":
            self.target["stream"] = self.name
        elif kind == "rabbitmq":
            self.target |= {"exchange": self.name, "routing_key": "due"}
        else:
            self.target["subject"] = f"bench.{self.name}"

    async def __aenter__(self) -> Destination:
        if self.kind == "rabbitmq":
            import aio_pika

            self._conn = await aio_pika.connect(URLS["rabbitmq"])
            channel = await self._conn.channel()
            exchange = await channel.declare_exchange(self.name)
            self._queue = await channel.declare_queue(self.name)
            await self._queue.bind(exchange, routing_key="due")
        elif self.kind == "nats":
            import nats

            self._nc = await nats.connect(URLS["nats"])
            await self._nc.jetstream().add_stream(name=self.name, subjects=[self.target["subject"]])
        return self

    async def count(self) -> int:
        if self.kind == "redis":
            import redis.asyncio as aioredis

            client = aioredis.from_url(URLS["redis"])
            try:
                return int(await client.xlen(self.name))
            finally:
                await client.aclose()
        if self.kind == "rabbitmq":
            declared = await self._queue.declare()
            return int(declared.message_count or 0)
        info = await self._nc.jetstream().stream_info(self.name)
        return int(info.state.messages)

    async def __aexit__(self, *exc: object) -> None:
        if self.kind == "redis":
            import redis.asyncio as aioredis

            client = aioredis.from_url(URLS["redis"])
            await client.delete(self.name)
            await client.aclose()
        elif self.kind == "rabbitmq":
            await self._queue.delete(if_unused=False, if_empty=False)
            channel = await self._conn.channel()
            await channel.exchange_delete(self.name)
            await self._conn.close()
        else:
            await self._nc.jetstream().delete_stream(self.name)
            await self._nc.close()


async def one_round(kind: str, messages: int, relays: int, batch: int) -> tuple[float, int, float]:
    """Messages per second, the broker's count, and the relays' CPU µs per message."""
    url = create_database("outbox")
    try:
        async with AsyncApp(url, migrate=True):
            pass
        async with Destination(kind) as destination:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(FILL, {"target": _json.dumps(destination.target), "n": messages})
            setting = _json.dumps({"b": {"type": kind, "url": URLS[kind]}})
            ctx = multiprocessing.get_context("spawn")
            ready, go, drained, cpu = ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Queue()
            procs = [
                ctx.Process(
                    target=_relay_process, args=(url, setting, batch, ready, go, drained, cpu)
                )
                for _ in range(relays)
            ]
            for p in procs:
                p.start()
            for _ in procs:
                ready.acquire()
            store = create_store(url)
            await store.open()
            try:
                start = time.perf_counter()
                go.set()
                # the relays are other processes: their progress is read from the database
                while (await store.outbox_depth()).pending:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
                elapsed = time.perf_counter() - start
            finally:
                drained.set()
                await store.close()
            spent = sum(cpu.get(timeout=60) for _ in procs)
            for p in procs:
                p.join(30)
            received = await destination.count()
        return messages / elapsed, received, spent / messages * 1e6
    finally:
        drop_database(url)


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--relays", type=int, default=2)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--brokers", default="redis,rabbitmq,nats")
    args = parser.parse_args()
    kinds = args.brokers.split(",")
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpus: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):  # interleaved: each round visits every broker once
        for kind in kinds:
            rate, received, cpu = asyncio.run(
                one_round(kind, args.messages, args.relays, args.batch)
            )
            if received < args.messages:
                raise SystemExit(f"{kind}: the broker holds {received:,} of {args.messages:,}")
            print(f"  {kind} {rate:,.0f} messages/s, relays' CPU {cpu:.1f} µs/message", flush=True)
            rates[kind].append(rate)
            cpus[kind].append(cpu)
    lines = [
        f"{kind:9} {Spread.of(rates[kind]).show()} messages/s, relays' CPU "
        f"{Spread.of(cpus[kind]).show('.1f')} µs/message  (median (min–max) of "
        f"{args.rounds} interleaved rounds; {args.messages:,} messages, {args.relays} relays, "
        f"batch {args.batch}; every message reached the broker)"
        for kind in kinds
    ]
    report("Outbox publish rate per broker", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
