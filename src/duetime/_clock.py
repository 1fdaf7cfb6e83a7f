"""Clocks. Production reads the host clock; tests freeze or step it.

The database clock is the authority for due checks and leases on PostgreSQL; the store
measures this process's offset to it (:func:`offset_to`: the worker, ``duetime doctor``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock that only moves when told to (``advance``/``set``)."""

    def __init__(self, at: datetime) -> None:
        self._now = at.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(
        self,
        delta: timedelta | float = 0,
        *,
        days: float = 0,
        hours: float = 0,
        minutes: float = 0,
        seconds: float = 0,
    ) -> datetime:
        """Move forward by ``delta`` (a timedelta, or seconds) plus the keyword units
        (``advance(hours=1)``); the new instant. A negative step moves it back."""
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        step += timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
        self._now += step
        return self._now

    def set(self, at: datetime) -> datetime:
        """Jump to ``at`` (timezone-aware); the new instant."""
        self._now = at.astimezone(UTC)
        return self._now


async def offset_to(
    read: Callable[[], Awaitable[datetime]], clock: Clock
) -> tuple[timedelta, float]:
    """How far another clock (``read``: the database's) is ahead of ``clock``, its reading
    taken as of the middle of the read's round trip; and that round trip, in seconds."""
    before = time.perf_counter()
    other = await read()
    round_trip = time.perf_counter() - before
    return other - (clock.now() - timedelta(seconds=round_trip / 2)), round_trip
