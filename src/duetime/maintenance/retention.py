"""History retention: finished runs (with their attempts) and skip records older than the
retention period are deleted in batches, leader only, off the hot path. On PostgreSQL the
attempts live in weekly partitions: each pass first creates the weeks ahead and drops the
weeks past retention whole (``Store.attempts_partitions``). Dead letters (runs in
state ``dead``) are kept however old: replaying one (it leaves ``dead``) or deleting its job
is what ends it."""

from __future__ import annotations

import logging
from datetime import timedelta

from duetime._config import Settings
from duetime.store.base import (
    AttemptPartitionsParams,
    AuditPruneParams,
    HistoryPruneParams,
    LeaderFence,
    Store,
)

log = logging.getLogger("duetime.retention")


class RetentionPruner:
    def __init__(
        self, store: Store, settings: Settings, *, batch: int = 1000, max_batches: int = 20
    ) -> None:
        self.store = store
        self.settings = settings
        self.batch = batch
        self.max_batches = max_batches

    async def run_once(self, fence: LeaderFence | None = None) -> int:
        """Delete up to ``batch * max_batches`` expired runs; returns how many."""
        before = await self.store.db_now() - timedelta(days=self.settings.retention_days)
        await self.store.attempts_partitions(AttemptPartitionsParams(before=before, leader=fence))
        deleted = 0
        for _ in range(self.max_batches):
            count = await self.store.history_prune(
                HistoryPruneParams(before=before, limit=self.batch, leader=fence)
            )
            deleted += count
            if count < self.batch:
                break
        if deleted:
            log.info("retention: deleted %d runs finished before %s", deleted, before)
        for _ in range(self.max_batches):  # the audit trail: the same cut, its only delete
            params = AuditPruneParams(before=before, limit=self.batch, leader=fence)
            if await self.store.audit_prune(params) < self.batch:
                break
        for _ in range(self.max_batches):  # broker messages sent before the cut (never dead)
            if await self.store.outbox_prune(before, limit=self.batch) < self.batch:
                break
        return deleted
