"""The partition keeper: a scheduler's share of the 256 job partitions, held through leases.

Every ``ttl / 3`` seconds (:meth:`PartitionKeeper.run_once`) the node renews its membership,
reads the live members, computes its :func:`~duetime._partitions.fair_share`, releases the
leases it holds outside that share and renews or takes the leases inside it that are its own,
free or expired. So:

- a dead node's members row and leases expire ``ttl`` after its last renewal, and the others
  take its partitions over at their next renewal: within ``ttl + ttl / 3``;
- a joining node becomes a member; the owners release what is no longer theirs at their next
  renewal and it takes them at its next one;
- a clean stop releases everything at once (:meth:`PartitionKeeper.leave`).

What keeps a handover from missing or doubling an occurrence is not this loop but the fence:
the materializer locks only jobs of partitions whose lease it holds at its transaction's
instant, with the lease rows locked until it commits (``jobs_due_leased``), so a release or a
takeover waits for an in-flight batch, and the new owner reads the ``next_fire_at`` the old
one advanced. The runs' unique (job_id, scheduled_for) refuses a double besides. An occurrence
that came due while a partition had no owner fires late (never later than the takeover), under
the job's misfire policy like any late occurrence.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from duetime._aio import wait_or_stop
from duetime._partitions import PartitionClaimParams, fair_share, spans
from duetime.leadership.renewals import RenewalGaps
from duetime.metrics import Metrics, metrics
from duetime.store.base import Store

log = logging.getLogger("duetime.partitions")


class PartitionKeeper:
    def __init__(
        self,
        store: Store,
        node_id: str,
        *,
        ttl: float,
        on_change: Callable[[str], None] | None = None,
        metrics_to: Metrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_change``: told the partitions held (as ``0-127``) whenever they change.
        ``metrics_to`` (default: the process's) gets ``duetime_partitions_held{node}`` and
        ``duetime_lease_renewal_gap_seconds{lease="partitions"}``, the gaps measured on
        ``monotonic`` (a test passes a frozen clock's)."""
        self.store = store
        self.on_change = on_change
        self.node_id = node_id
        self.ttl = ttl
        self.held: frozenset[int] = frozenset()
        """The partitions whose lease this node held at its last renewal."""
        self.ready = asyncio.Event()
        """Set after the first attempt (the materializer starts then, not empty-handed)."""
        chosen = metrics_to if metrics_to is not None else metrics()
        self._held_gauge = chosen.partitions_held.labels(node_id)
        self.gaps = RenewalGaps("partitions", ttl, chosen, monotonic)
        """The gaps between successful renewals (event-loop lag shows there: a gap near
        ``ttl`` means the leases nearly lapsed)."""

    @property
    def max_gap(self) -> float:
        """The longest time between two successful renewals, in seconds."""
        return self.gaps.max_gap

    @property
    def interval(self) -> float:
        return self.ttl / 3

    async def run_once(self) -> frozenset[int]:
        """Renew membership and leases once; the partitions held afterwards."""
        members = await self.store.partition_members_beat(self.node_id, self.ttl)
        want = fair_share(members, self.node_id)
        leases = await self.store.partition_leases_claim(
            PartitionClaimParams(self.node_id, want, self.ttl)
        )
        held = frozenset(lease.partition for lease in leases)
        if held != self.held:
            log.info(
                "node %s holds partitions %s (%d members; its share %s)",
                self.node_id,
                spans(held),
                len(members),
                spans(want),
            )
            if self.on_change is not None:
                self.on_change(spans(held))
        self.held = held
        self._held_gauge.set(len(held))
        self.gaps.renewed()
        return held

    async def leave(self) -> None:
        """Release every lease and end the membership (a clean stop)."""
        self.held = frozenset()
        self._held_gauge.set(0)
        self.gaps.forget()
        try:
            await self.store.partition_leases_leave(self.node_id)
            log.info("node %s released its partitions", self.node_id)
        except Exception:
            log.exception("releasing partitions failed; they lapse after %.1fs", self.ttl)

    async def run(self, stop: asyncio.Event) -> None:
        """Renew every ``ttl / 3`` until ``stop``, then leave. A failed renewal (database down)
        is logged and retried at the next interval: the leases lapse on their own, and the
        fence keeps this node from materializing partitions it no longer holds."""
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception:
                log.exception("renewing partition leases failed; retrying")
            self.ready.set()
            await wait_or_stop(stop, self.interval)
        self.ready.set()
        await self.leave()
