"""Runs the leader-only duties on their intervals while this node leads.

Duties: lease reaper, history retention, pruning of nodes that stopped heartbeating, alerts
(``alerts.py``: evaluated, recorded as incidents and delivered), queue-depth samples
(``depth.py``: the dashboard's depth history). Each is a
small service with ``run_once``; the manager calls them only while ``fence()`` returns a term,
and passes that term so their writes are refused if the leadership moved meanwhile. A duty
runs on its interval, except retention, which says itself when its next pass is due (sooner
while a backlog lasts: ``RetentionPruner.pause_after``); the manager wakes when the next duty
is due, at the latest after the shortest interval, at the earliest :data:`SHORTEST_WAIT` after
its last pass (a duty whose pass outlasted its interval is not run back to back).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from duetime._aio import wait_or_stop
from duetime._config import Settings
from duetime.maintenance.alerts import AlertEvaluator
from duetime.maintenance.depth import DEPTH_SAMPLE_INTERVAL, DepthSampler
from duetime.maintenance.reaper import LeaseReaper
from duetime.maintenance.retention import FOLLOW_UP_PAUSE, RETENTION_INTERVAL, RetentionPruner
from duetime.store.base import LeaderFence, Store

log = logging.getLogger("duetime.maintenance")

FenceProvider = Callable[[], LeaderFence | None]
SHORTEST_WAIT = FOLLOW_UP_PAUSE
"""The least the manager sleeps between two passes over its duties (or its shortest interval,
if shorter): a duty due again at once, its pass longer than its interval, waits this much."""


@dataclass
class _Duty:
    name: str
    interval: float
    run_once: Callable[[LeaderFence], Awaitable[object]]
    pause_after: Callable[[float], float] | None = None
    """Seconds from the end of a pass that took the given seconds to the next; None: the next
    pass is due ``interval`` after this one started."""
    due_at: float = 0.0


class MaintenanceManager:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        fence: FenceProvider,
        extra: Sequence[tuple[str, float, Callable[[LeaderFence], Awaitable[object]]]] = (),
        *,
        retention: RetentionPruner | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``extra``: duties of layers above (name, interval, run_once), e.g. the app's
        lifecycle pass (app/lifecycle.py). ``retention``: the history pruner (default: the
        product's pass size); ``clock``: monotonic seconds the duties are timed by."""
        self.store = store
        self.settings = settings
        self.fence = fence
        self.clock = clock
        reaper = LeaseReaper(store, settings)
        if retention is None:
            retention = RetentionPruner(store, settings)
        self.alerts = AlertEvaluator(store, settings)
        self.duties = [
            _Duty("lease reaper", settings.reaper_interval, reaper.run_once),
            # step runs ended by the reaper or an operator: their instances are planned here
            _Duty("workflow sweep", settings.reaper_interval, self._sweep_workflows),
            _Duty("retention", RETENTION_INTERVAL, retention.run_once, retention.pause_after),
            _Duty("node pruning", 30.0, self._prune_nodes),
            _Duty("alerts", settings.alert_interval, self.alerts.run_once),
            _Duty("queue depth", DEPTH_SAMPLE_INTERVAL, DepthSampler(store).run_once),
            *(_Duty(name, interval, run) for name, interval, run in extra),
        ]
        self.tick = min(d.interval for d in self.duties)
        self._leading = False

    async def _sweep_workflows(self, fence: LeaderFence) -> int:
        """Plan the instances whose step runs ended outside a completion (idempotent: any
        node may do it; the leader does it so one does)."""
        return await self.store.workflows_sweep()

    async def _prune_nodes(self, fence: LeaderFence) -> int:
        before = await self.store.db_now() - timedelta(seconds=self.settings.worker_stale_after)
        return await self.store.nodes_prune(before)

    async def run_once(self) -> list[str]:
        """Run every duty that is due, if we lead; returns the names of those that ran."""
        fence = self.fence()
        self._leading = fence is not None
        if fence is None:
            return []
        ran = []
        now = self.clock()
        for duty in self.duties:
            if now < duty.due_at:
                continue
            duty.due_at = now + duty.interval
            started = self.clock()
            try:
                await duty.run_once(fence)
                ran.append(duty.name)
            except Exception:
                log.exception("%s failed; retrying at its next interval", duty.name)
                continue
            if duty.pause_after is not None:
                ended = self.clock()
                duty.due_at = ended + duty.pause_after(ended - started)
        return ran

    def next_wait(self) -> float:
        """Seconds :meth:`run` sleeps after a :meth:`run_once`: until the next duty is due, at
        most the shortest interval (and that while not leading), at least
        :data:`SHORTEST_WAIT` or that interval if shorter (never 0: a pass that outlasted its
        interval is not followed at once by the next)."""
        if not self._leading:
            return self.tick
        soonest = min(d.due_at for d in self.duties) - self.clock()
        return min(self.tick, max(soonest, SHORTEST_WAIT))

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                await self.run_once()
                await wait_or_stop(stop, self.next_wait())
        finally:
            await self.alerts.close()
