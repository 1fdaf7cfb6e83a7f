"""``duetime doctor``'s look at the broker connections of ``DUETIME_BROKERS``: each answers,
and — for NATS — no JetStream stream dedupes over a window shorter than the connection's
``duplicate_window`` (the longest relay outage the deployment means to ride through without
a consumer seeing a re-published message twice; docs/brokers.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import Resolve, describe

TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class BrokerCheck:
    connection: str
    level: str
    """``ok`` or ``warn`` (a broker down holds messages in the outbox: nothing is lost)."""
    detail: str
    fix: str | None = None


async def check_connections(
    connections: Mapping[str, BrokerConnection], resolve: Resolve
) -> list[BrokerCheck]:
    return [await _check(c, resolve) for c in connections.values()]


async def _check(connection: BrokerConnection, resolve: Resolve) -> BrokerCheck:
    name = connection.name
    try:
        url = resolve(connection.url)
        if connection.type == "redis":
            detail = await asyncio.wait_for(_redis(url), TIMEOUT)
        elif connection.type == "rabbitmq":
            detail = await asyncio.wait_for(_rabbitmq(url), TIMEOUT)
        else:
            short = await asyncio.wait_for(_nats_short(url, connection.duplicate_window), TIMEOUT)
            if short:
                return BrokerCheck(
                    name,
                    "warn",
                    f"JetStream streams dedupe over less than duplicate_window "
                    f"({connection.duplicate_window:g}s): {', '.join(short)}",
                    "raise the streams' duplicate_window (nats stream edit NAME "
                    "--dupe-window …): a message re-published after a relay crash within the "
                    "configured window would otherwise reach consumers twice",
                )
            detail = "NATS JetStream answers"
    except Exception as exc:
        return BrokerCheck(
            name,
            "warn",
            f"{connection.type} connection {name!r} does not answer: {describe(exc)}",
            "start the broker or fix the connection's url; meanwhile its messages wait in "
            "the outbox (nothing is lost)",
        )
    return BrokerCheck(name, "ok", detail)


async def _redis(url: str) -> str:
    import redis.asyncio as aioredis

    client = aioredis.from_url(url, socket_connect_timeout=TIMEOUT)
    try:
        await client.ping()
    finally:
        await client.aclose()
    return "Redis answers"


async def _rabbitmq(url: str) -> str:
    import aio_pika

    conn = await aio_pika.connect(url, timeout=TIMEOUT)
    await conn.close()
    return "RabbitMQ answers"


async def _nats_short(url: str, window: float | None) -> list[str]:
    """The streams whose duplicate window is shorter than ``window`` (as ``name (Ns)``)."""
    from duetime.targets.brokers._nats import connect

    nc = await connect(url)
    try:
        if window is None:
            await nc.jetstream().account_info()
            return []
        streams = await nc.jetstream().streams_info()
        return [
            f"{s.config.name} ({s.config.duplicate_window or 0:g}s)"
            for s in streams
            if (s.config.duplicate_window or 0) < window
        ]
    finally:
        await nc.close()
