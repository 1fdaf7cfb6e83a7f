"""History retention: finished runs (with their attempts) and skip records older than the
retention period are deleted in batches, leader only, off the hot path. On PostgreSQL the
attempts live in weekly partitions: each pass first creates the weeks ahead and drops the
weeks past retention whole (``Store.attempts_partitions``). Dead letters (runs in
state ``dead``) are kept however old: replaying one (it leaves ``dead``) or deleting its job
is what ends it.

Pace: a pass deletes at most ``batch * max_batches`` of each kind. When some delete took its
whole cap (a backlog), the next pass follows after a short pause, long enough that retention
is busy at most ``Settings.retention_duty`` of the time; otherwise it waits the interval
(:meth:`RetentionPruner.pause_after`; decision 0015, "Retiring history beside the hot
path")."""

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

RETENTION_INTERVAL = 60.0
"""Seconds between two passes that found no backlog."""
FOLLOW_UP_PAUSE = 1.0
"""The shortest pause before a follow-up pass (a backlog), however short the pass was."""


class RetentionPruner:
    def __init__(
        self, store: Store, settings: Settings, *, batch: int = 1000, max_batches: int = 20
    ) -> None:
        self.store = store
        self.settings = settings
        self.batch = batch
        self.max_batches = max_batches
        self.backlog = False
        """Whether the last pass stopped at a cap (runs, audit records or broker messages),
        more possibly left; False after a pass that failed."""

    async def run_once(self, fence: LeaderFence | None = None) -> int:
        """Delete up to ``batch * max_batches`` expired runs (and as many audit records and
        sent broker messages); returns how many runs. Sets :attr:`backlog`."""
        self.backlog = False
        backlog = False
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
        else:
            backlog = True
        if deleted:
            log.info("retention: deleted %d runs finished before %s", deleted, before)
        for _ in range(self.max_batches):  # the audit trail: the same cut, its only delete
            params = AuditPruneParams(before=before, limit=self.batch, leader=fence)
            if await self.store.audit_prune(params) < self.batch:
                break
        else:
            backlog = True
        for _ in range(self.max_batches):  # broker messages sent before the cut (never dead)
            if await self.store.outbox_prune(before, limit=self.batch) < self.batch:
                break
        else:
            backlog = True
        self.backlog = backlog
        return deleted

    def pause_after(self, busy: float) -> float:
        """Seconds to wait after a pass that took ``busy`` seconds before the next one. Without
        a backlog: :data:`RETENTION_INTERVAL`. With one: :data:`FOLLOW_UP_PAUSE`, longer when
        the pass was long. Either way at least ``busy * (1 - duty) / duty`` (``duty``:
        ``Settings.retention_duty``), so that ``busy / (busy + pause) <= duty``: retention is
        busy at most that fraction of the time, however slow the database."""
        duty = self.settings.retention_duty
        floor = FOLLOW_UP_PAUSE if self.backlog else RETENTION_INTERVAL
        return max(floor, busy * (1.0 - duty) / duty)
