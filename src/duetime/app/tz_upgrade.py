"""tzdata upgrades (SPEC §5, decision 0023): a stored UTC instant means what the zone rules of
the process that computed it said. Every process computes with the ``tzdata`` package's rules
(``schedules/tzdb.py``) and records their release with each job's next instant; a scheduler
that starts with a newer release than a zoned job's recomputes it here, once, before it
materializes anything:

- its scheduled runs not yet due and never started are withdrawn (the scheduler writes them
  again with the new rules), its ``next_fire_at`` becomes its first occurrence under the new
  rules at or after now — or after its old ``next_fire_at`` if that has passed, keeping a
  backlog for the misfire policy — within its bounds, and the release is recorded;
- the job's history gets a ``tzdata_recomputed`` event (old and new release and instant).

Each job is recomputed in a transaction of its own that checks its release is still the one
read, so schedulers starting together recompute it once. A job whose release is newer than
this process's is left alone (an older node must not undo an upgrade).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from duetime._clock import Clock
from duetime._types import Job
from duetime.scheduler.bounds import Bounds
from duetime.schedules import first_fire, tzdb
from duetime.store.base import JobTzRecomputeParams, Store

__all__ = ["TzdataUpgrade"]

log = logging.getLogger("duetime.tzdata")

PAGE = 500
_TICK = timedelta(microseconds=1)


class TzdataUpgrade:
    """Recompute the zoned jobs computed with an older tzdata release (``run_once``)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def run_once(self) -> int:
        """Jobs recomputed (0 when every zoned job is at this process's release or newer)."""
        version = tzdb.current().version
        recomputed = 0
        after = None
        while True:
            page = await self.store.jobs_tz_stale(version, after_id=after, limit=PAGE)
            for job in page:
                if tzdb.newer(version, job.tzdata_version) and await self._recompute(job, version):
                    recomputed += 1
            if len(page) < PAGE:
                break
            after = page[-1].id
        if recomputed:
            log.warning(
                "tzdata %s: recomputed the next instant of %d zoned job(s)", version, recomputed
            )
        return recomputed

    async def _recompute(self, job: Job, version: str) -> bool:
        now = self.clock.now()
        return await self.store.job_tz_recompute(
            JobTzRecomputeParams(
                tenant=job.tenant,
                job_id=job.id,
                expect_version=job.tzdata_version,
                version=version,
                next_fire_at=_next_occurrence(job, now),
            )
        )


def _next_occurrence(job: Job, now: datetime) -> datetime | None:
    """The job's first occurrence under this process's rules at or after ``now`` — or, for a
    job behind (its ``next_fire_at`` passed: the scheduler was down), at or after that
    instant, so the misfire policy still sees what was missed — within its bounds. Runs
    written ahead lie after ``now`` and are withdrawn, so none is lost."""
    pending = job.next_fire_at
    base = now if pending is None or pending > now else pending
    first = first_fire(job.schedule, base - _TICK)
    return Bounds.of(job).next_occurrence(job.schedule, first)
