"""Clocks. Production reads the host clock; tests freeze or step it.

The database clock is the authority for due checks and leases on PostgreSQL; the store
measures this process's offset to it (see ``Store.clock_offset``).
"""

from __future__ import annotations

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

    def advance(self, delta: timedelta | float) -> datetime:
        self._now += delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        return self._now

    def set(self, at: datetime) -> None:
        self._now = at.astimezone(UTC)
