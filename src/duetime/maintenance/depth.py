"""Queue-depth history, leader only: every :data:`DEPTH_SAMPLE_INTERVAL` the leader records
each tenant's due, running and dead runs (``queue_depth_samples``), and prunes samples older
than :data:`DEPTH_RETENTION` — so the dashboard's depth chart has a history whether or not a
page was open, and every API process reads the same one."""

from __future__ import annotations

import logging
from datetime import timedelta

from duetime.store.base import LeaderFence, Store

log = logging.getLogger("duetime.maintenance")

DEPTH_SAMPLE_INTERVAL = 10.0
"""Seconds between two samples."""
DEPTH_RETENTION = timedelta(hours=24)
"""How long samples are kept (the longest window the overview reads)."""


class DepthSampler:
    """Records one sample per run and prunes expired ones; not fenced by the term (a sample
    written by a leader that just lost its lease is still a true reading)."""

    def __init__(self, store: Store, *, retention: timedelta = DEPTH_RETENTION) -> None:
        self.store = store
        self.retention = retention

    async def run_once(self, fence: LeaderFence | None = None) -> int:
        """Record the queue depth now and prune samples older than the retention; returns
        the rows written."""
        now = await self.store.db_now()
        written = await self.store.depth_samples_record(now)
        pruned = await self.store.depth_samples_prune(now - self.retention)
        if pruned:
            log.debug("queue depth: pruned %d samples older than %s", pruned, self.retention)
        return written
