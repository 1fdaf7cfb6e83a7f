"""RabbitMQ: each message published to its exchange with its routing key, ``mandatory`` and
with publisher confirms (``aio-pika``): every publish of a batch awaits its confirm at once.
An exchange not yet seen on this connection is checked first (a passive declare on a channel
of its own, since a missing exchange closes the channel that touches it): a missing one makes
its messages dead. A message the broker returns (unroutable) or nacks is dead; connection and
channel failures are retried."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import SENT, Resolve, Result, Verdict, describe


class RabbitPublisher:
    def __init__(self, connection: BrokerConnection, resolve: Resolve) -> None:
        self._connection = connection
        self._resolve = resolve
        self._conn: Any = None
        self._channel: Any = None
        self._exchanges: dict[str, Any] = {}

    async def _open(self) -> Any:
        import aio_pika

        if self._conn is None or self._conn.is_closed:
            await self.close()
            self._conn = await aio_pika.connect(self._resolve(self._connection.url), timeout=10)
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._conn.channel(publisher_confirms=True, on_return_raises=True)
            self._exchanges = {"": self._channel.default_exchange}
        return self._channel

    async def _missing(self, names: set[str]) -> dict[str, str]:
        """The exchanges of ``names`` that do not exist, with the broker's word."""
        from aio_pika.exceptions import ChannelNotFoundEntity

        missing: dict[str, str] = {}
        for name in sorted(names - self._exchanges.keys()):
            probe = await self._conn.channel(publisher_confirms=False)
            try:
                await probe.declare_exchange(name, passive=True)
            except ChannelNotFoundEntity as exc:
                missing[name] = describe(exc)
                continue
            finally:
                await probe.close()  # closed by the broker already: waits for its callbacks
            self._exchanges[name] = await self._channel.get_exchange(name, ensure=False)
        return missing

    async def publish(self, rows: Sequence[OutboxRow]) -> list[Result]:
        import aio_pika
        from aio_pika.exceptions import DeliveryError

        try:
            await self._open()
            missing = await self._missing({str(r.target["exchange"]) for r in rows})
        except Exception:
            await self.close()
            raise
        calls: list[Any] = []
        for row in rows:
            exchange = str(row.target["exchange"])
            if exchange in missing:
                continue
            message = aio_pika.Message(
                row.body.encode(),
                headers=dict(row.headers),
                message_id=row.message_id,
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            )
            calls.append(
                self._exchanges[exchange].publish(
                    message, routing_key=str(row.target.get("routing_key", "")), mandatory=True
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
        self._exchanges = {}
        if conn is not None and not conn.is_closed:
            await conn.close()
