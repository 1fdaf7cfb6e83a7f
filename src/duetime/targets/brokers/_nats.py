"""NATS JetStream: each message published to its subject with ``Nats-Msg-Id`` = its message
id (JetStream drops a duplicate within the stream's ``duplicate_window``); every publish of a
batch awaits its ack at once (``nats-py``). A subject no stream captures, or a message the
stream refuses (400: too large …), is dead; timeouts and connection failures are retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import SENT, Resolve, Result, Verdict, describe

log = logging.getLogger("duetime.relay")


async def _quiet(exc: Exception) -> None:
    log.debug("nats: %s", exc)


async def connect(url: str) -> Any:
    """A NATS client connection that tries twice more, half a second apart, then closes (the
    relay opens a new one on its next batch, after its backoff); errors go to the debug log,
    not stderr."""
    import nats

    return await nats.connect(
        url,
        connect_timeout=5,
        max_reconnect_attempts=2,  # then closed: the relay's own backoff takes over
        reconnect_time_wait=0.5,
        error_cb=_quiet,
    )


class NatsPublisher:
    def __init__(self, connection: BrokerConnection, resolve: Resolve) -> None:
        self._connection = connection
        self._resolve = resolve
        self._nc: Any = None
        self._js: Any = None

    async def _open(self) -> Any:
        if self._nc is None or self._nc.is_closed:
            await self.close()
            self._nc = await asyncio.wait_for(connect(self._resolve(self._connection.url)), 15)
            self._js = self._nc.jetstream(timeout=10)
        return self._js

    async def publish(self, rows: Sequence[OutboxRow]) -> list[Result]:
        from nats.js.errors import BadRequestError, NoStreamResponseError

        try:
            js = await self._open()
        except BaseException:
            await self.close()
            raise
        answers = await asyncio.gather(
            *(
                js.publish(
                    str(row.target["subject"]),
                    row.body.encode(),
                    headers={**row.headers, "Nats-Msg-Id": row.message_id},
                )
                for row in rows
            ),
            return_exceptions=True,
        )
        out: list[Result] = []
        for answer in answers:
            if isinstance(answer, NoStreamResponseError | BadRequestError):
                out.append(Result(Verdict.DEAD, describe(answer)))
            elif isinstance(answer, BaseException):
                out.append(Result(Verdict.RETRY, describe(answer)))
            else:
                out.append(SENT)
        return out

    async def close(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None and not nc.is_closed:
            try:
                await nc.close()
            except Exception as exc:  # already gone
                log.debug("nats close: %s", exc)
