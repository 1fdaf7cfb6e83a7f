"""News of API key changes on PostgreSQL, for the verified-key cache of the front hall
(docs/decisions/0013-api-key-cache.md).

The statement that revokes a key announces it (``NOTIFY duetime_api_keys`` with the key's id,
delivered when its transaction commits: queries/api_keys.sql). A process that caches keys
listens on one connection of its own and counts what it hears in an *epoch*: a cached key is
trusted only while the epoch it was read under is still current.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from duetime.store.postgres._socket import has_unread_input

CHANNEL = "duetime_api_keys"
"""The channel every change of an API key is announced on (payload: the key's id)."""

CONNECT_TIMEOUT = 5
"""Seconds a connection attempt may take, per host of a multi-host URL, unless the URL says."""

log = logging.getLogger("duetime.store")


def connect_timeout(url: str) -> int | str:
    """The ``connect_timeout`` to connect to ``url`` with: the URL's own when it sets one (an
    operator's choice, a shorter one for a quicker failover, is kept), else
    :data:`CONNECT_TIMEOUT` (libpq's own default is to wait forever)."""
    try:
        own = conninfo_to_dict(url).get("connect_timeout")
    except psycopg.Error:
        return CONNECT_TIMEOUT  # the connection attempt says what is wrong with the URL
    return CONNECT_TIMEOUT if own is None else str(own)


class _Listening:
    """The listening connection and a zero-timeout probe of its socket."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    def pending(self) -> bool:
        """True if a notification (or anything else) may be waiting: the socket is readable,
        closed or failed, or the connection is gone. No round trip."""
        return has_unread_input(self.conn)


class KeyNews:
    """Whether any API key may have changed since an earlier look, as this process can tell.

    :meth:`epoch` is a number that moves whenever a key may have changed: a revocation made
    through this store (:meth:`changed`, after its commit), a notification from another
    process, the listening connection (re)connecting. It is None — "changes made elsewhere
    could go unheard now; read the key" — until the listener is connected, while it is
    reconnecting, and while input not yet read waits on its socket. The listener starts with
    the first :meth:`epoch`."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._epoch = 0
        self._listening: _Listening | None = None
        self._task: asyncio.Task[None] | None = None
        self._moved = asyncio.Event()
        """Set (and replaced) at each move of the epoch or of the listening state."""

    def epoch(self) -> int | None:
        """The current epoch, or None while changes made elsewhere could go unheard. Call it
        from the event loop: the first call starts the listener."""
        if self._task is None or self._task.done():
            if self._task is not None and not self._task.cancelled() and self._task.exception():
                log.warning("API key listener failed: %r", self._task.exception())
            self._task = asyncio.create_task(self._listen(), name="duetime-key-news")
        listening = self._listening
        if listening is None or listening.pending():
            return None
        return self._epoch

    @property
    def listener_pid(self) -> int | None:
        """The server process of the listening connection while it is connected."""
        listening = self._listening
        return None if listening is None else listening.conn.info.backend_pid

    def changed(self) -> None:
        """A key may have changed: a key read before now is never trusted again. A revocation
        made here calls it after its commit (a read racing the commit is distrusted)."""
        self._epoch += 1
        self._moved.set()
        self._moved = asyncio.Event()

    async def wait(self, *, past: int | None = None) -> int:
        """Wait until the listener is connected and (with ``past``) the epoch is no longer
        ``past``; the epoch then. Callers bound it with their own timeout."""
        while True:
            moved = self._moved
            current = self.epoch()
            if current is not None and current != past:
                return current
            await moved.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        backoff = 0.1
        while True:
            try:
                await self._listen_once()
                backoff = 0.1
            except (psycopg.Error, OSError) as exc:
                log.debug("API key listener lost (%s); reconnecting in %.1f s", exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _listen_once(self) -> None:
        """Listen until the connection fails; the epoch moves when listening starts (what
        changed before was not heard) and at each notification."""
        async with await psycopg.AsyncConnection.connect(
            self._url, autocommit=True, connect_timeout=connect_timeout(self._url)
        ) as conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            try:
                self._listening = _Listening(conn)
                self.changed()
                async for _ in conn.notifies():
                    self.changed()
            finally:
                self._listening = None
                self.changed()
