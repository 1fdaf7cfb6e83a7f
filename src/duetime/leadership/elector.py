"""Leader election: one row with an expiry set from the database clock.

Any node may call :meth:`Elector.run_once`: it takes the leadership when it is free or expired
and renews it while held (every ``ttl / 3``). The term increases on every change of leader and
fences leader-only writes (see ``LeaderFence``). On a clean stop the leader resigns — its row
expires at once — so another node takes over at its next attempt instead of after the TTL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from duetime._aio import wait_or_stop
from duetime._types import Leadership
from duetime.leadership.renewals import RenewalGaps
from duetime.metrics import Metrics, metrics
from duetime.store.base import LeaderElectParams, LeaderFence, Store

log = logging.getLogger("duetime.leadership")


class Elector:
    def __init__(
        self,
        store: Store,
        node_id: str,
        *,
        ttl: float,
        metrics_to: Metrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``metrics_to`` (default: the process's) gets
        ``duetime_lease_renewal_gap_seconds{lease="leader"}``: the gaps between successive
        elections won while leading, on ``monotonic`` (a test passes a frozen clock's)."""
        self.store = store
        self.node_id = node_id
        self.ttl = ttl
        self.leadership: Leadership | None = None
        self.changed = asyncio.Event()
        """Set whenever this node gains or loses the leadership."""
        chosen = metrics_to if metrics_to is not None else metrics()
        self.gaps = RenewalGaps("leader", ttl, chosen, monotonic)

    @property
    def fence(self) -> LeaderFence | None:
        """Our term while we lead (as last confirmed), else None."""
        lead = self.leadership
        return None if lead is None else LeaderFence(lead.node_id, lead.term)

    @property
    def is_leader(self) -> bool:
        return self.leadership is not None

    async def run_once(self) -> Leadership | None:
        """Elect or renew. A failed attempt (database down) counts as not leading."""
        try:
            won = await self.store.leader_elect(LeaderElectParams(self.node_id, self.ttl))
        except Exception:
            log.exception("leader election failed; acting as a follower until it works")
            won = None
        was = self.leadership
        self.leadership = won
        if won is None or (was is not None and was.term != won.term):
            self.gaps.forget()  # not leading, or a new term: no renewal gap to measure
        if won is not None:
            self.gaps.renewed()
        if (was is None) != (won is None) or (was and won and was.term != won.term):
            if won is not None:
                log.info("node %s is the leader (term %d)", self.node_id, won.term)
            else:
                log.info("node %s is no longer the leader", self.node_id)
            self.changed.set()
        return won

    async def resign(self) -> None:
        fence = self.fence
        self.leadership = None
        self.gaps.forget()
        if fence is not None:
            try:
                await self.store.leader_resign(fence)
                log.info("node %s resigned the leadership (term %d)", self.node_id, fence.term)
            except Exception:
                log.exception("resigning failed; the leadership lapses after its TTL")

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.run_once()
            await wait_or_stop(stop, self.ttl / 3)
        await self.resign()
