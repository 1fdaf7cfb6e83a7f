"""News of runs asked to stop, for the workers holding them (decision 0016).

A ``replace`` asks the key's running runs to stop (``cancel_requested``, ``replace_deadline``)
and announces their ids: PostgreSQL with ``NOTIFY duetime_cancels`` (delivered at commit to
every listening process, this one included), SQLite in this process only (workers of another
process sharing the file learn at their next heartbeat). A worker waits here and, when news
comes, asks the store which of its runs must stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import Iterable

CHANNEL = "duetime_cancels"
"""PostgreSQL's channel (payload: the run's id)."""

KEPT = 1024
"""Announcements remembered; a waiter further behind is told to check all its runs."""


class CancelNews:
    """A numbered log of announcements. :meth:`heard` adds one (``None``: some may have gone
    unheard, e.g. while the listener reconnected); :meth:`wait` returns those after a number.
    Any number of waiters, each with its own position."""

    def __init__(self) -> None:
        self.epoch = 0
        self._log: deque[tuple[int, frozenset[uuid.UUID] | None]] = deque(maxlen=KEPT)
        self._moved: asyncio.Event | None = None

    def heard(self, ids: Iterable[uuid.UUID] | None) -> None:
        self.epoch += 1
        self._log.append((self.epoch, None if ids is None else frozenset(ids)))
        if self._moved is not None:
            self._moved.set()
            self._moved = None

    def since(self, epoch: int) -> frozenset[uuid.UUID] | None:
        """The ids announced after ``epoch`` (None: check every run)."""
        if epoch >= self.epoch:
            return frozenset()
        if not self._log or self._log[0][0] > epoch + 1:
            return None
        ids: set[uuid.UUID] = set()
        for number, heard in self._log:
            if number <= epoch:
                continue
            if heard is None:
                return None
            ids |= heard
        return frozenset(ids)

    async def wait(self, epoch: int, timeout: float) -> tuple[int, frozenset[uuid.UUID] | None]:
        """Until something is announced after ``epoch`` or ``timeout`` passes: the current
        epoch and the ids announced since ``epoch`` (empty: nothing; None: check every run)."""
        if epoch >= self.epoch:
            if self._moved is None:
                self._moved = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait(), timeout)
        return self.epoch, self.since(epoch)
