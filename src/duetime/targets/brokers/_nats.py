"""NATS JetStream: each message published to its subject with ``Nats-Msg-Id`` = its message
id (JetStream drops a duplicate within the stream's ``duplicate_window``). A batch is published
as JetStream's asynchronous publish does it: one reply inbox subscription for the batch, each
message sent with its own reply subject under it, then every ack awaited at once (``nats-py``'s
``js.publish`` makes a future, a task and a timer per message: most of a relay's CPU). A
subject no stream captures (no responders), or a message the stream refuses (400: too large
…), is dead; a message unanswered within :data:`ACK_TIMEOUT` or by the batch's deadline
(``publish.py``), an error ack other than 400 and connection failures are retried. The
deadline bounds the connect and the sends too; a batch cut short by it drops the connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
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
)

log = logging.getLogger("duetime.relay")

ACK_TIMEOUT = 10.0
"""Seconds a batch waits for its acks; the unanswered messages are retried."""


async def _quiet(exc: Exception) -> None:
    log.debug("nats: %s", exc)


async def connect(url: str) -> Any:
    """A NATS client connection that tries twice more, half a second apart, then closes (the
    relay opens a new one on its next batch, after its backoff); errors go to the debug log,
    not stderr. A connect that fails or is cancelled (a deadline) closes its socket."""
    from nats.aio.client import Client

    options: dict[str, Any] = {
        "connect_timeout": 5,
        "max_reconnect_attempts": 2,  # then closed: the relay's own backoff takes over
        "reconnect_time_wait": 0.5,  # (nats-py annotates it int; it sleeps for a float)
        "error_cb": _quiet,
    }
    nc = Client()
    try:
        await nc.connect(url, **options)
    except BaseException:
        with contextlib.suppress(Exception):
            await nc.close()
        raise
    return nc


class NatsPublisher:
    def __init__(self, connection: BrokerConnection, resolve: Resolve) -> None:
        self._connection = connection
        self._resolve = resolve
        self._nc: Any = None
        self._js: Any = None
        self._dropped = Dropped()

    async def _open(self) -> Any:
        if self._nc is None or self._nc.is_closed:
            self._drop()
            self._nc = await asyncio.wait_for(connect(self._resolve(self._connection.url)), 15)
            self._js = self._nc.jetstream(timeout=10)
        return self._js

    async def publish(
        self, rows: Sequence[OutboxRow], deadline: float | None = None
    ) -> list[Result]:
        try:
            async with asyncio.timeout_at(deadline):
                await self._open()
        except BaseException:
            self._drop()
            raise
        nc = self._nc
        answers: list[Result | None] = [None] * len(rows)
        waiting = [len(rows)]
        all_heard = asyncio.get_running_loop().create_future()

        async def heard(msg: Any) -> None:
            i = int(msg.subject.rsplit(".", 1)[1])
            if 0 <= i < len(answers) and answers[i] is None:
                answers[i] = _verdict(msg)
                waiting[0] -= 1
                if not waiting[0] and not all_heard.done():
                    all_heard.set_result(None)

        inbox = nc.new_inbox()
        late = False
        try:
            async with asyncio.timeout_at(deadline):
                sub = await nc.subscribe(f"{inbox}.*", cb=heard)
                try:
                    for i, row in enumerate(rows):
                        await nc.publish(
                            str(row.target["subject"]),
                            row.body.encode(),
                            reply=f"{inbox}.{i}",
                            headers={**row.headers, "Nats-Msg-Id": row.message_id},
                        )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(all_heard, ACK_TIMEOUT)
                finally:
                    with contextlib.suppress(Exception):
                        await sub.unsubscribe()
        except TimeoutError:  # the batch's deadline
            late = True
            self._drop()
        except BaseException:
            self._drop()
            raise
        why = "by the batch's deadline" if late else f"in {ACK_TIMEOUT:g} s"
        unanswered = Result(Verdict.RETRY, f"TimeoutError: no JetStream ack {why}")
        return [a if a is not None else unanswered for a in answers]

    def _drop(self) -> None:
        """Forget the connection; it closes in the background."""
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None and not nc.is_closed:
            self._dropped.add(nc.close())

    async def close(self) -> None:
        self._drop()
        await self._dropped.wait()


def _verdict(msg: Any) -> Result:
    """A publish's answer: JetStream's ack, its error, or the server's "no responders"."""
    from nats.js.errors import APIError, BadRequestError, NoStreamResponseError

    if msg.headers and msg.headers.get("Status") == "503":  # no stream captures the subject
        return Result(Verdict.DEAD, describe(NoStreamResponseError()))
    try:
        answer = json.loads(msg.data)
    except ValueError as exc:
        return Result(Verdict.RETRY, describe(exc))
    if "error" not in answer:
        return SENT
    try:
        APIError.from_error(answer["error"])
    except BadRequestError as exc:
        return Result(Verdict.DEAD, describe(exc))
    except APIError as exc:
        return Result(Verdict.RETRY, describe(exc))
    return Result(Verdict.RETRY, str(answer["error"]))
