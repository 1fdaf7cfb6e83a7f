"""Token buckets in this process: the per-tenant request rate, and failed authentications per
client address.

Each API process keeps its own buckets, so N processes behind a load balancer allow up to N
times the rate (docs/api.md says so). A tenant's bucket holds one second's worth of requests
(at least one) and refills continuously; the failed-authentication bucket of an address holds
a minute's worth.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

_MAX_KEYS = 10_000
_EPSILON = 1e-9
"""Slack for float sums: a bucket refilled for exactly the wait announced has its token."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(
        self,
        rate: float,
        *,
        capacity: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``rate`` tokens per second per key (tenant, address); 0 allows everything. A bucket
        holds ``capacity`` tokens (default: one second's worth, at least one)."""
        self.rate = rate
        self.capacity = max(1.0, rate) if capacity is None else max(1.0, capacity)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, key: str) -> int | None:
        """Take one token: None if there was one, else the whole seconds to wait."""
        if self.rate <= 0:
            return None
        bucket = self._bucket(key)
        if bucket.tokens >= 1.0 - _EPSILON:
            bucket.tokens = max(0.0, bucket.tokens - 1.0)
            return None
        return self._wait(bucket)

    def blocked(self, key: str) -> int | None:
        """Without taking a token: None if one is there, else the whole seconds to wait."""
        if self.rate <= 0 or key not in self._buckets:
            return None
        bucket = self._bucket(key)
        return None if bucket.tokens >= 1.0 - _EPSILON else self._wait(bucket)

    def _wait(self, bucket: _Bucket) -> int:
        return max(1, math.ceil((1.0 - bucket.tokens) / self.rate - _EPSILON))

    def _bucket(self, key: str) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= _MAX_KEYS:
                self._forget(now)
            bucket = self._buckets[key] = _Bucket(self.capacity, now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
        return bucket

    def _forget(self, now: float) -> None:
        """Drop the buckets that have refilled (they hold no state worth keeping) — and, if
        that is not enough, the oldest half, so that the table stays bounded."""
        for key, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.updated) * self.rate >= self.capacity:
                del self._buckets[key]
        if len(self._buckets) >= _MAX_KEYS:
            for key in list(self._buckets)[: _MAX_KEYS // 2]:
                del self._buckets[key]


def failure_limiter(per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> RateLimiter:
    """Failed authentications: ``per_minute`` per client address (a bucket holding a minute's
    worth); 0 allows everything."""
    return RateLimiter(per_minute / 60.0, capacity=float(per_minute), clock=clock)


def client_key(host: str | None) -> str:
    """The address a client is counted by: its IP, or its /64 for IPv6 (one host usually has
    a whole /64)."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)
