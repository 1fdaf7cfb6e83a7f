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
confirmed, as before; a connection lost with publishes queued fails their confirms. The
batch's deadline bounds the connect, the exchange checks and the confirms (``publish.py``):
publishes unconfirmed by then are retried and the connection dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import (
    SENT,
    Dropped,
    Resolve,
    Result,
    Verdict,
    describe,
    until,
)

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
        self._dropped = Dropped()

    async def _open(self) -> Any:
        import aio_pika

        if self._conn is None or self._conn.is_closed:
            self._drop()
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

    async def publish(
        self, rows: Sequence[OutboxRow], deadline: float | None = None
    ) -> list[Result]:
        from aio_pika.exceptions import DeliveryError
        from aiormq import spec

        try:
            async with asyncio.timeout_at(deadline):
                channel = await (await self._open()).get_underlay_channel()
                missing = await self._missing({str(r.target["exchange"]) for r in rows})
        except Exception:
            self._drop()
            raise
        calls: list[asyncio.Future[Any]] = []
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
                asyncio.ensure_future(
                    channel.basic_publish(
                        row.body.encode(),
                        exchange=exchange,
                        routing_key=str(row.target.get("routing_key", "")),
                        properties=properties,
                        mandatory=True,
                        wait=False,
                    )
                )
            )
        pending: set[asyncio.Future[Any]] = set()
        if calls:
            try:
                _, pending = await asyncio.wait(calls, timeout=until(deadline))
            except BaseException:  # cancelled: the publishes and the connection with it
                pending = set(calls)
                self._drop()
                raise
            finally:
                for call in pending:
                    call.cancel()
                    call.add_done_callback(_ignore)
        answers = iter(calls)
        out: list[Result] = []
        failed = False
        for row in rows:
            exchange = str(row.target["exchange"])
            if exchange in missing:
                out.append(Result(Verdict.DEAD, missing[exchange]))
                continue
            call = next(answers)
            if call in pending:
                answer: BaseException | None = TimeoutError("no confirm by the batch's deadline")
            elif call.cancelled():  # the channel's closing cancelled it
                answer = asyncio.CancelledError("publish cancelled")
            else:
                answer = call.exception()
            if answer is None:
                out.append(SENT)
            elif isinstance(answer, DeliveryError):
                out.append(Result(Verdict.DEAD, describe(answer)))
            else:
                failed = True
                out.append(Result(Verdict.RETRY, describe(answer)))
        if failed:
            self._drop()
        return out

    def _drop(self) -> None:
        """Forget the connection; it closes in the background."""
        conn, self._conn, self._channel = self._conn, None, None
        self._exchanges = set()
        if conn is not None and not conn.is_closed:
            self._dropped.add(conn.close())

    async def close(self) -> None:
        self._drop()
        await self._dropped.wait()


def _ignore(call: asyncio.Future[Any]) -> None:
    """A publish given up on: its late end, whatever it is, is of no interest."""
    if not call.cancelled():
        call.exception()
