"""Renewal gaps: the time between two successive successful renewals of one of a node's leases
(its partition leases, or its leadership while it leads), recorded in
``duetime_lease_renewal_gap_seconds{lease}`` and logged when it nears the lease's end.

A lease is renewed every third of its TTL, so a gap of ``ttl / 3`` is the norm; a gap past two
thirds of the TTL (a blocked event loop, a slow database) leaves under a third before the lease
would have lapsed: the log warns, and ``deploy/prometheus-alerts.yml`` alerts on it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from duetime.metrics import Metrics

log = logging.getLogger("duetime.leadership")

WARN_FRACTION = 2 / 3
"""A gap past this fraction of the TTL is logged as a warning."""


class RenewalGaps:
    def __init__(
        self,
        lease: str,
        ttl: float,
        metrics: Metrics,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``lease``: the label (``leader`` or ``partitions``); ``monotonic``: seconds from
        any origin (a test passes a frozen clock's)."""
        self.lease = lease
        self.ttl = ttl
        self.max_gap = 0.0
        """The longest gap seen, in seconds."""
        self._histogram = metrics.lease_renewal_gap.labels(lease)
        self._monotonic = monotonic
        self._last: float | None = None

    def renewed(self) -> float | None:
        """Note a successful renewal; the gap since the previous one (None for the first
        since :meth:`forget`), observed in the histogram."""
        now = self._monotonic()
        last, self._last = self._last, now
        if last is None:
            return None
        gap = now - last
        self.max_gap = max(self.max_gap, gap)
        self._histogram.observe(gap)
        if gap > self.ttl * WARN_FRACTION:
            log.warning(
                "%s lease renewed %.1fs after the previous renewal (lease %.1fs): "
                "is the event loop blocked?",
                self.lease,
                gap,
                self.ttl,
            )
        return gap

    def forget(self) -> None:
        """The lease is no longer held: the next renewal starts a new series."""
        self._last = None
