"""The lease reaper: runs whose worker stopped heartbeating go back to the queue (or die).

A leader-only duty (see ``manager.py``); the store's conditional updates (and SKIP LOCKED on
PostgreSQL) would make concurrent reapers safe anyway: each expired lease is reaped once.
"""

from __future__ import annotations

import asyncio
import logging

from duetime._aio import wait_or_stop
from duetime._config import Settings
from duetime.metrics import metrics
from duetime.store.base import LeaderFence, LeasesReapParams, ReapResult, Store

log = logging.getLogger("duetime.reaper")


class LeaseReaper:
    def __init__(self, store: Store, settings: Settings, *, batch: int = 1000) -> None:
        self.store = store
        self.settings = settings
        self.batch = batch

    async def run_once(self, fence: LeaderFence | None = None) -> ReapResult:
        """Reap every expired lease, in batches (only while ``fence`` leads, if given)."""
        rescheduled = dead = 0
        while True:
            result = await self.store.leases_reap(LeasesReapParams(limit=self.batch, leader=fence))
            rescheduled += result.rescheduled
            dead += result.dead
            for tenant, task, state in result.reaped:
                metrics().attempt_ended(tenant, task, "lost")
                if state == "dead":
                    metrics().run_ended(tenant, task, "dead", "lease_expired")
            if result.rescheduled + result.dead < self.batch:
                break
        if rescheduled or dead:
            log.warning("reaped expired leases: %d runs rescheduled, %d dead", rescheduled, dead)
        return ReapResult(rescheduled, dead)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception:
                log.exception("lease reaper failed; retrying")
            await wait_or_stop(stop, self.settings.reaper_interval)
