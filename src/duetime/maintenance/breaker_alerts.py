"""The ``breaker_open`` alert (issue 19; decision 0027): one incident per circuit breaker key
(``http:<host>:<port>``, ``command:<name>``) some live worker has reported open or half-open
for longer than ``alert_breaker_open_after``; resolved once no worker reports it so any more.
Installation-wide (no tenant: a host serves every tenant's jobs that use it). Its facts are the
store's ``breakers_list``; :func:`breaker_conditions` is pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime._monitoring import AlertCondition, AlertKind
from duetime._types import BreakerState

__all__ = ["RESOLUTION", "breaker_conditions"]

RESOLUTION = "the breaker closed (its target answers again) or its worker is gone"


def breaker_conditions(
    breakers: Sequence[BreakerState], now: datetime, open_after: float
) -> list[AlertCondition]:
    """A condition per key open longer than ``open_after`` seconds on any worker (the
    longest-open worker's breaker speaks for the key)."""
    oldest: dict[str, BreakerState] = {}
    workers: dict[str, list[str]] = {}
    for breaker in breakers:
        if (now - breaker.opened_at).total_seconds() < open_after:
            continue
        workers.setdefault(breaker.key, []).append(breaker.worker_id)
        known = oldest.get(breaker.key)
        if known is None or breaker.opened_at < known.opened_at:
            oldest[breaker.key] = breaker
    return [
        AlertCondition(
            AlertKind.BREAKER_OPEN,
            key,
            f"circuit breaker {key} has been open since {b.opened_at.isoformat()} "
            f"({b.failures} consecutive failures; {len(workers[key])} worker(s)): its runs wait",
            details={
                "key": key,
                "state": b.state,
                "failures": b.failures,
                "opened_at": b.opened_at.isoformat(),
                "workers": sorted(workers[key]),
            },
        )
        for key, b in sorted(oldest.items())
    ]
