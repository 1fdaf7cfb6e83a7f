"""RabbitMQ: each message published to its exchange with its routing key, ``mandatory`` and
with publisher confirms (``aio-pika``'s connection and channel; the publishes themselves go
through its underlying ``aiormq`` channel): every publish of a batch awaits its confirm at once.
An exchange not yet seen on this connection is checked first (a passive declare on a channel
of its own, since a missing exchange closes the channel that touches it): a missing one makes
its messages dead. A message the broker returns (unroutable) or nacks is dead; connection and
channel failures are retried.

A publish is queued for the connection's writer without waiting for the socket to drain
(``basic_publish(wait=False)``): waiting made a batch's publishes take the channel's lock one
after another, each holding it across a write and a turn of the event loop (decision 0040).
Its confirm (or return) is still awaited, so what the relay marks sent is what the broker
confirmed, as before; a connection lost with publishes queued fails their confirms."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import SENT, Resolve, Result, Verdict, describe

PERSISTENT = 2
"""AMQP ``delivery_mode`` of a message the broker keeps on disk."""


class RabbitPublisher:
    def __init__(self, connection: BrokerConnection, resolve: Resolve) -> None:
        self._connection = connection
        self._resolve = resolve
        self._conn: Any = None
        self._channel: Any = None
        self._exchanges: set[str] = set()
        """Exchanges known to exist on this connection (the default one, ``""``, always)."""

    async def _open(self) -> Any:
        import aio_pika

        if self._conn is None or self._conn.is_closed:
            await self.close()
            self._conn = await aio_pika.connect(self._resolve(self._connection.url), timeout=10)
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._conn.channel(publisher_confirms=True, on_return_raises=True)
            self._exchanges = {""}
        return self._channel

    async def _missing(self, names: set[str]) -> dict[str, str]:
        """The exchanges of ``names`` that do not exist, with the broker's word."""
        from aio_pika.exceptions import ChannelNotFoundEntity

        missing: dict[str, str] = {}
        for name in sorted(names - self._exchanges):
            probe = await self._conn.channel(publisher_confirms=False)
            try:
                await probe.declare_exchange(name, passive=True)
            except ChannelNotFoundEntity as exc:
                missing[name] = describe(exc)
                continue
            finally:
                await probe.close()  # closed by the broker already: waits for its callbacks
            self._exchanges.add(name)
        return missing

    async def publish(self, rows: Sequence[OutboxRow]) -> list[Result]:
        from aio_pika.exceptions import DeliveryError
        from aiormq import spec

        try:
            channel = await (await self._open()).get_underlay_channel()
            missing = await self._missing({str(r.target["exchange"]) for r in rows})
        except Exception:
            await self.close()
            raise
        calls: list[Any] = []
        for row in rows:
            exchange = str(row.target["exchange"])
            if exchange in missing:
                continue
            properties = spec.Basic.Properties(
                content_type="application/json",
                delivery_mode=PERSISTENT,
                headers=dict(row.headers),
                message_id=row.message_id,
            )
            calls.append(
                channel.basic_publish(
                    row.body.encode(),
                    exchange=exchange,
                    routing_key=str(row.target.get("routing_key", "")),
                    properties=properties,
                    mandatory=True,
                    wait=False,
                )
            )
        answers = iter(await asyncio.gather(*calls, return_exceptions=True))
        out: list[Result] = []
        failed = False
        for row in rows:
            exchange = str(row.target["exchange"])
            if exchange in missing:
                out.append(Result(Verdict.DEAD, missing[exchange]))
                continue
            answer = next(answers)
            if isinstance(answer, DeliveryError):
                out.append(Result(Verdict.DEAD, describe(answer)))
            elif isinstance(answer, BaseException):
                failed = True
                out.append(Result(Verdict.RETRY, describe(answer)))
            else:
                out.append(SENT)
        if failed:
            await self.close()
        return out

    async def close(self) -> None:
        conn, self._conn, self._channel = self._conn, None, None
        self._exchanges = set()
        if conn is not None and not conn.is_closed:
            await conn.close()
