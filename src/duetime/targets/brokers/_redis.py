"""Redis streams: ``XADD <stream> * payload <json> duetime-run-id … duetime-message-id …``,
one pipeline per batch (``redis.asyncio``). A command the server refuses for the message's
sake (``WRONGTYPE``: the key is no stream) is dead; one it refuses for now (``OOM``,
``LOADING``, ``READONLY``, ``BUSY`` …) and every connection error are retried. The batch's
deadline (``publish.py``) bounds the pipeline: a pipeline unanswered by then is retried whole,
its client closed (closing a Redis connection waits for nothing from the server)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from duetime._outbox import OutboxRow
from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import SENT, Resolve, Result, Verdict, describe

_TRANSIENT = ("OOM", "LOADING", "READONLY", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN")


class RedisPublisher:
    def __init__(self, connection: BrokerConnection, resolve: Resolve) -> None:
        self._connection = connection
        self._resolve = resolve
        self._client: Any = None
        maxlen = connection.options.get("maxlen")
        self._maxlen = None if maxlen is None else int(maxlen)

    async def _open(self) -> Any:
        if self._client is None:
            import redis.asyncio as aioredis

            self._client = aioredis.from_url(
                self._resolve(self._connection.url),
                socket_connect_timeout=5,
                socket_timeout=10,
            )
        return self._client

    async def publish(
        self, rows: Sequence[OutboxRow], deadline: float | None = None
    ) -> list[Result]:
        from redis.exceptions import ResponseError

        client = await self._open()
        pipe = client.pipeline(transaction=False)
        for row in rows:
            fields = {"payload": row.body, **row.headers}
            pipe.xadd(row.target["stream"], fields, maxlen=self._maxlen, approximate=True)
        try:
            async with asyncio.timeout_at(deadline):
                answers = await pipe.execute(raise_on_error=False)
        except BaseException:
            await self.close()  # reconnect on the next batch
            raise
        out: list[Result] = []
        for answer in answers:
            if isinstance(answer, ResponseError):
                transient = str(answer).startswith(_TRANSIENT)
                out.append(Result(Verdict.RETRY if transient else Verdict.DEAD, describe(answer)))
            elif isinstance(answer, BaseException):
                out.append(Result(Verdict.RETRY, describe(answer)))
            else:
                out.append(SENT)
        return out

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
