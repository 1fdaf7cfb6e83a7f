"""Per-tenant request rate limit: a token bucket per tenant, in this process.

Each API process keeps its own buckets, so N processes behind a load balancer allow up to N
times the rate (docs/api.md says so). The bucket holds one second's worth of requests
(at least one) and refills continuously.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

_MAX_TENANTS = 10_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        """``rate`` requests per second per tenant; 0 allows everything."""
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, tenant: str) -> int | None:
        """Take one request's token: None if allowed, else the whole seconds to wait."""
        if self.rate <= 0:
            return None
        now = self._clock()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            if len(self._buckets) >= _MAX_TENANTS:
                self._forget_full(now)
            bucket = self._buckets[tenant] = _Bucket(self.capacity, now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - bucket.tokens) / self.rate))

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled (they hold no state worth keeping)."""
        for tenant, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.updated) * self.rate >= self.capacity:
                del self._buckets[tenant]
