"""Per-job jitter: a stable offset per (job, occurrence) that spreads when runs become available.

Jitter moves only ``available_at``; the occurrence (``scheduled_for``) stays where the schedule
puts it, so any number of schedulers agree on which runs exist. The offset is drawn from
``sha256(job id U+001F occurrence in UTC microseconds)`` — never Python's salted ``hash()`` —
so every scheduler, and every release, computes the same one.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

__all__ = ["jitter_offset"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCALE = 1 << 64


def jitter_offset(job_key: str, occurrence: datetime, window: float) -> timedelta:
    """An offset in ``[0, window)`` seconds (microsecond resolution) for this occurrence."""
    if window <= 0:
        return timedelta(0)
    micros = (occurrence - _EPOCH) // timedelta(microseconds=1)
    digest = hashlib.sha256(f"{job_key}\x1f{micros}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / _SCALE
    return timedelta(microseconds=int(fraction * window * 1_000_000))
