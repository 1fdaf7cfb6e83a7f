"""What a publisher tells the relay about each row, and opening the publisher of a connection.

A publisher publishes a batch pipelined (Redis: one pipeline; RabbitMQ: every publish awaits
its confirm concurrently; NATS: every JetStream publish awaits its ack concurrently) and
answers one :class:`Result` per row, in order: ``SENT`` (the broker has it), ``RETRY`` (the
broker or the network failed for now) or ``DEAD`` (the broker refused this message for good:
unknown stream or exchange, unroutable, too large). An exception from :meth:`Publisher.publish`
means every row of the batch is retried; the publisher reconnects on its next batch."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection


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
    async def publish(self, rows: Sequence[OutboxRow]) -> list[Result]: ...

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
