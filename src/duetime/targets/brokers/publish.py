"""What a publisher tells the relay about each row, and opening the publisher of a connection.

A publisher publishes a batch pipelined (Redis: one pipeline; RabbitMQ: every publish awaits
its confirm concurrently; NATS: every JetStream publish awaits its ack concurrently) and
answers one :class:`Result` per row, in order: ``SENT`` (the broker has it), ``RETRY`` (the
broker or the network failed for now) or ``DEAD`` (the broker refused this message for good:
unknown stream or exchange, unroutable, too large). An exception from :meth:`Publisher.publish`
means every row of the batch is retried; the publisher reconnects on its next batch.

A batch has a ``deadline`` (event loop time, ``loop.time()``; the relay's is its lease's end
minus a margin, decision 0040): connecting, setting up, sending and waiting for the broker's
answers are all bounded by it. Rows the broker has not answered by then are ``RETRY`` (a
Redis pipeline, all or nothing, raises ``TimeoutError``), and the connection is dropped
(closed in the background, :class:`Dropped`: a broker that does not answer would hold a polite
close for seconds); the next batch connects again."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection

log = logging.getLogger("duetime.relay")


class Verdict(enum.Enum):
    SENT = "sent"
    RETRY = "retry"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class Result:
    verdict: Verdict
    error: str = ""


SENT = Result(Verdict.SENT)

Resolve = Callable[[Any], Any]
"""Replaces the secret references in a connection's value by the secrets' text
(``targets/secrets.py``)."""


class Publisher(Protocol):
    async def publish(
        self, rows: Sequence[OutboxRow], deadline: float | None = None
    ) -> list[Result]: ...

    async def close(self) -> None: ...


def open_publisher(connection: BrokerConnection, resolve: Resolve) -> Publisher:
    """The publisher of ``connection`` (it connects on its first batch)."""
    if connection.type == "redis":
        from duetime.targets.brokers._redis import RedisPublisher

        return RedisPublisher(connection, resolve)
    if connection.type == "rabbitmq":
        from duetime.targets.brokers._rabbitmq import RabbitPublisher

        return RabbitPublisher(connection, resolve)
    from duetime.targets.brokers._nats import NatsPublisher

    return NatsPublisher(connection, resolve)


def describe(exc: BaseException) -> str:
    """An error as one line for ``last_error`` (class and message, bounded)."""
    text = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {text}"[:1000]


def until(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (loop time; none left: 0), or None: no deadline."""
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())


class Dropped:
    """The closes of a publisher's dropped connections, running in the background; the
    publisher's ``close`` waits for them."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, close: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(_quietly(close))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks)


async def _quietly(close: Coroutine[Any, Any, Any]) -> None:
    try:
        await close
    except Exception as exc:  # closing a broken connection
        log.debug("closing a dropped broker connection: %s", exc)
