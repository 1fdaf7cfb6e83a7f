"""Circuit breakers per target host (HTTP) or command: stop hammering what keeps failing.

One :class:`Breakers` per worker process (docs/decisions/0027: state per process, reported to
the database for the API, the dashboard and the alert). A breaker is keyed by the target's
``http:<host>:<port>`` or ``command:<name>`` (:func:`breaker_key`):

- **closed**: runs go through; ``threshold`` consecutive failures open it. A failure is a sign
  the other side is down: a retryable webhook failure (connection error, timeout, 408, 429,
  5xx) or a command's retryable exit or timeout. A permanent answer (a 4xx, a refused exit
  status) shows it is up and counts as a success; a cancelled attempt counts as neither.
- **open** for ``cooldown`` seconds: runs do not run; the worker hands each back to
  ``scheduled`` at the end of the cooldown *without counting an attempt* (reason
  ``circuit_open``, the attempt refunded as at a hand-back).
- **half-open** after the cooldown: one run (the probe) goes through; others keep waiting
  (handed back for :data:`PROBE_WAIT` seconds). The probe's success closes the breaker, its
  failure opens it for another cooldown. A probe that has not reported after a cooldown
  (a long command, or one lost before it ran) lets another probe through.

Not thread-safe: used from the worker's event loop. Time is ``time.monotonic`` (injectable).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from duetime._types import BreakerState
from duetime.targets.command import CommandFailed, CommandRejected, CommandTimeout
from duetime.targets.http import (
    WebhookFailed,
    WebhookRejected,
    WebhookRetryLater,
    WebhookTimeout,
)

T = TypeVar("T")

PROBE_WAIT = 1.0
"""Seconds a run waits while another run probes a half-open breaker."""
CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
STATE_VALUES = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}
"""The breaker gauge's values."""
_DOWN = (WebhookFailed, WebhookRetryLater, WebhookTimeout, CommandFailed, CommandTimeout)


def breaker_key(target: Mapping[str, Any] | None) -> str | None:
    """The breaker a target's runs go through; None for targets without one."""
    if not target:
        return None
    kind = target.get("type")
    if kind == "command":
        return f"command:{target.get('name')}"
    if kind == "http":
        try:
            parts = urlsplit(str(target.get("url")))
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError:
            return None
        host = parts.hostname or ""
        return f"http:{host}:{port}" if host else None
    return None


def counts_as_down(exc: BaseException) -> bool:
    """Whether a failed attempt says its target is down (see the module docstring)."""
    return isinstance(exc, _DOWN)


@dataclass(slots=True)
class _Breaker:
    state: str = CLOSED
    failures: int = 0
    opened_at: float = 0.0
    retry_at: float = 0.0
    probing: bool = False
    probe_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Ticket:
    """:meth:`Breakers.admit`'s answer: go (``wait`` None; ``probe`` if it is the half-open
    probe) or wait ``wait`` seconds."""

    key: str
    wait: float | None = None
    probe: bool = False


class CircuitOpen(Exception):
    """The run's target's breaker is open: handed back without counting an attempt."""


ChangeListener = Callable[[str, str], None]
"""Called with (key, new state) on every transition."""


class Breakers:
    """The breakers of one worker process."""

    def __init__(
        self,
        *,
        threshold: int = 5,
        cooldown: float = 30.0,
        clock: Callable[[], float] | None = None,
        on_change: ChangeListener | None = None,
    ) -> None:
        self.threshold = max(threshold, 1)
        self.cooldown = cooldown
        self.clock = clock or time.monotonic
        self.on_change = on_change
        self._breakers: dict[str, _Breaker] = {}
        self.version = 0
        """Grows with every transition (a reporter sends the states when it changed)."""

    def admit(self, key: str) -> Ticket:
        """May a run of ``key`` go now? An open breaker whose cooldown is over half-opens and
        admits this run as its probe."""
        breaker = self._breakers.get(key)
        if breaker is None or breaker.state == CLOSED:
            return Ticket(key)
        now = self.clock()
        if breaker.state == OPEN:
            if now < breaker.retry_at:
                return Ticket(key, wait=breaker.retry_at - now)
            self._move(key, breaker, HALF_OPEN)
        if breaker.probing and now - breaker.probe_at < self.cooldown:
            return Ticket(key, wait=PROBE_WAIT)
        breaker.probing = True  # a probe silent for a cooldown is presumed lost: another goes
        breaker.probe_at = now
        return Ticket(key, probe=True)

    def succeeded(self, ticket: Ticket) -> None:
        breaker = self._breakers.get(ticket.key)
        if breaker is None:
            return
        breaker.failures = 0
        if ticket.probe:
            breaker.probing = False
        if breaker.state == HALF_OPEN and ticket.probe:
            self._move(ticket.key, breaker, CLOSED)
            del self._breakers[ticket.key]
        elif breaker.state == CLOSED:
            del self._breakers[ticket.key]

    def failed(self, ticket: Ticket) -> None:
        breaker = self._breakers.setdefault(ticket.key, _Breaker())
        breaker.failures += 1
        if ticket.probe:
            breaker.probing = False
        if (ticket.probe and breaker.state == HALF_OPEN) or (
            breaker.state == CLOSED and breaker.failures >= self.threshold
        ):
            now = self.clock()
            breaker.opened_at = now if breaker.state == CLOSED else breaker.opened_at
            breaker.retry_at = now + self.cooldown
            self._move(ticket.key, breaker, OPEN)

    def released(self, ticket: Ticket) -> None:
        """The run ended with no verdict on its target (cancelled, a non-target error)."""
        breaker = self._breakers.get(ticket.key)
        if breaker is not None and ticket.probe:
            breaker.probing = False

    async def guard(self, ticket: Ticket, call: Awaitable[T]) -> T:
        """Await ``call``, recording what its outcome says about the target."""
        try:
            value = await call
        except Exception as exc:
            if counts_as_down(exc):
                self.failed(ticket)
            elif _answered(exc):
                self.succeeded(ticket)
            else:
                self.released(ticket)
            raise
        except BaseException:
            self.released(ticket)
            raise
        self.succeeded(ticket)
        return value

    def state(self, key: str) -> str:
        breaker = self._breakers.get(key)
        return CLOSED if breaker is None else breaker.state

    def snapshot(self, worker_id: str, now: datetime | None = None) -> list[BreakerState]:
        """The breakers that are not closed, as the store keeps them (wall-clock instants)."""
        wall = now or datetime.now(UTC)
        mono = self.clock()
        return [
            BreakerState(
                worker_id=worker_id,
                key=key,
                state=b.state,
                failures=b.failures,
                opened_at=wall - timedelta(seconds=mono - b.opened_at),
                retry_at=wall + timedelta(seconds=max(b.retry_at - mono, 0.0)),
            )
            for key, b in sorted(self._breakers.items())
            if b.state != CLOSED
        ]

    def _move(self, key: str, breaker: _Breaker, state: str) -> None:
        if breaker.state == state:
            return
        breaker.state = state
        self.version += 1
        if self.on_change is not None:
            self.on_change(key, state)


def _answered(exc: Exception) -> bool:
    """A permanent answer from the target (it is up): a refused request or exit status."""
    return isinstance(exc, WebhookRejected | CommandRejected) and (
        getattr(exc, "http_status", None) is not None or getattr(exc, "exit_code", None) is not None
    )


__all__ = [
    "CLOSED",
    "HALF_OPEN",
    "OPEN",
    "PROBE_WAIT",
    "STATE_VALUES",
    "Breakers",
    "CircuitOpen",
    "Ticket",
    "breaker_key",
    "counts_as_down",
]
