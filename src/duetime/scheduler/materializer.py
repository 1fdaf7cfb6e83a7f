"""The scheduler loop: materialize due occurrences into runs, tick after tick.

Safe with any number of schedulers at once: the store locks due jobs with SKIP LOCKED and the
database refuses a second run for the same (job, instant). Each batch is one store transaction
(:func:`materialize`): lock the due jobs, ask the planner (pure) what each owes, insert the
runs, record the skips, advance the jobs — the scheduler decides, the store stores. Plain
one-shot jobs, whose plan is a function of their row, take the set path first
(:func:`materialize_plain`, docs/decisions/0038): the database makes their runs in one
statement per batch, no job read into Python.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime._aio import wait_or_stop
from duetime._config import Settings
from duetime._types import Job
from duetime.metrics import Metrics, metrics
from duetime.scheduler.calendar_plan import apply_calendars, calendars_of
from duetime.scheduler.planner import plan_job
from duetime.schedules import tzdb
from duetime.store.base import JobPlan, JobsDueParams, Store, StoreTx

log = logging.getLogger("duetime.scheduler")


PACE_AHEAD = 2.0
"""Ticks ahead of now beyond which a batch's occurrences are paced (see ``run_once``)."""


def paced(ahead: float, spent: float, tick: float) -> bool:
    """Whether ``run_once`` pauses after a full batch whose earliest occurrence is ``ahead``
    seconds away, the tick having spent ``spent`` seconds so far: only while the occurrences
    are at least :data:`PACE_AHEAD` ticks away and the lead left is more than twice what the
    tick has spent. A burst whose batches have taken that much already is a big one: paced to
    the end, 100,000 jobs due at one instant were still being materialized 14 s after it."""
    return ahead >= PACE_AHEAD * tick + 2 * spent


Planner = Callable[[Job, datetime, datetime], JobPlan]
"""``planner(job, now, horizon_end)``: pure, no I/O (``scheduler/planner.py`` ``plan_job``)."""


@dataclass(frozen=True, slots=True)
class MaterializeResult:
    jobs: int
    runs_created: int
    skips: int
    now: datetime
    plans: tuple[tuple[Job, JobPlan], ...] = ()
    """What the committed transaction decided for each job (calendars applied)."""


async def materialize(
    store: Store,
    planner: Planner,
    *,
    horizon: float,
    limit: int = 500,
    now: datetime | None = None,
    partitions: tuple[int, int] | None = None,
    owner: str | None = None,
) -> MaterializeResult:
    """One batch, in one transaction: lock up to ``limit`` active jobs with ``next_fire_at <=
    now + horizon`` (skipping jobs another scheduler holds; ``partitions``: the inclusive range
    of partition keys served, None = all; ``owner``: a node serving leased partitions, which
    locks only jobs of the partitions whose lease it holds — ``leadership/partitions.py``), ask
    ``planner`` what to do with each, insert the runs (existing occurrences are left alone),
    record the skips and advance ``next_fire_at``. Four statements per batch, whatever its
    size, and a fifth when the batch has bounded jobs: their runs counted against ``max_runs``
    and those past their bounds completed (the job rows stay locked throughout, so concurrent
    schedulers never exceed ``max_runs``)."""
    async with store.transaction() as tx:
        at = await tx.now(now)
        until = at + timedelta(seconds=horizon)
        jobs = await tx.jobs_lock_due(JobsDueParams(until, limit, partitions, owner))
        plans = [(job, planner(job, at, until)) for job in jobs]
        if any(job.calendars for job in jobs):  # one more statement, only then
            plans = await _through_calendars(tx, plans, until)
        planned = [(job, run) for job, plan in plans for run in plan.runs]
        bounded = [(job, plan) for job, plan in plans if plan.complete or job.max_runs]
        if bounded:  # their runs counted against max_runs, under the same row locks
            counted = await tx.runs_insert_counted(planned)
            created = sum(counted.values())
        else:
            created = await tx.runs_insert_planned(planned)
        skips = await tx.skips_insert([(job.id, s) for job, plan in plans for s in plan.skips])
        await tx.jobs_advance(
            [(job.id, plan.next_fire_at) for job, plan in plans], tzdb.current().version
        )
        if bounded:
            await tx.jobs_count_runs(
                [
                    (job.id, counted.get(job.id, 0) if job.max_runs else 0, plan.complete)
                    for job, plan in bounded
                ]
            )
    return MaterializeResult(
        jobs=len(jobs), runs_created=created, skips=skips, now=at, plans=tuple(plans)
    )


@dataclass(frozen=True, slots=True)
class PlainResult:
    """A committed set-path batch: the jobs taken, the runs made, the transaction's instant,
    and the runs counted by (tenant, task, scheduled_for, count)."""

    jobs: int
    runs: int
    now: datetime
    made: tuple[tuple[str, str, datetime, int], ...] = ()


PLAIN_BATCH = 5_000
"""Plain one-shot jobs per set-path transaction (:func:`materialize_plain`): its cost is the
database's alone, a few milliseconds per thousand."""


async def materialize_plain(
    store: Store,
    *,
    horizon: float,
    limit: int = PLAIN_BATCH,
    now: datetime | None = None,
    partitions: tuple[int, int] | None = None,
    owner: str | None = None,
) -> PlainResult:
    """One batch of the set path, in one transaction: the runs of up to ``limit`` *plain*
    one-shot jobs due within the horizon, made and the jobs advanced by the database without
    reading them (``StoreTx.runs_materialize_plain``; docs/decisions/0038). A plain one-shot
    is one the planner would give exactly one run at its instant and nothing else, so the two
    paths agree; the rest (recurring, calendars, jitter, bounds, missed, workflows,
    ``replace``) is left to :func:`materialize`. Locks, fencing and uniqueness as there."""
    async with store.transaction() as tx:
        at = await tx.now(now)
        until = at + timedelta(seconds=horizon)
        batch = await tx.runs_materialize_plain(
            JobsDueParams(until, limit, partitions, owner), tzdb.current().version
        )
    return PlainResult(jobs=batch.jobs, runs=batch.runs, now=at, made=batch.made)


async def _through_calendars(
    tx: StoreTx, plans: list[tuple[Job, JobPlan]], until: datetime
) -> list[tuple[Job, JobPlan]]:
    """The plans of jobs that name calendars with their excluded occurrences skipped or moved
    (``scheduler/calendar_plan.py``); the calendars read in one statement."""
    keys = sorted({(job.tenant, name) for job, _ in plans for name in job.calendars})
    stored = await tx.calendars_for(keys)
    return [
        (job, apply_calendars(job, plan, calendars_of(job, stored), until))
        if job.calendars
        else (job, plan)
        for job, plan in plans
    ]


@dataclass(frozen=True, slots=True)
class TickResult:
    jobs: int
    runs_created: int
    skips: int


class _RecordingPlanner:
    """``plan_job``, remembering each plan, so what a committed transaction decided can be
    counted (a failed transaction's plans are dropped)."""

    def __init__(self) -> None:
        self.planned: list[tuple[Job, datetime, JobPlan]] = []

    def __call__(self, job: Job, now: datetime, until: datetime) -> JobPlan:
        plan = plan_job(job, now, until)
        self.planned.append((job, now, plan))
        return plan


class Materializer:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        partitions: tuple[int, int] | None = None,
        owner: str | None = None,
    ) -> None:
        """``owner``: this node's id when it serves leased partitions (the lease is the fence
        of every batch); None serves ``partitions`` (all by default) unfenced."""
        self.store = store
        self.settings = settings
        self.partitions = partitions
        self.owner = owner
        self.metrics: Metrics = metrics()

    async def run_once(
        self, *, pace: bool = False, stop: asyncio.Event | None = None
    ) -> TickResult:
        """Materialize every job due within the horizon, batch after batch, until none is left:
        the plain one-shots first by the set path (:func:`materialize_plain`, never paced),
        then the rest through the planner (:func:`materialize`).

        ``pace``: after a full batch whose earliest occurrence was still at least
        :data:`PACE_AHEAD` ticks away, wait as long as the batch took before the next, so a
        burst of future occurrences takes half of a core rather than all of it (and of the
        database's) — on a small machine the workers firing runs right now need it. Overdue
        and imminent occurrences are never paced, nor a burst so big that pacing it would
        make it late (:func:`paced`); ``stop`` set ends a pause and the tick (what is left
        waits for the next one)."""
        jobs = created = 0
        while True:  # the plain one-shots first, set-based (not paced: the database's work)
            plain = await materialize_plain(
                self.store,
                horizon=self.settings.scheduler_horizon,
                partitions=self.partitions,
                owner=self.owner,
            )
            self._observe_plain(plain)
            jobs += plain.jobs
            created += plain.runs
            if plain.jobs < PLAIN_BATCH or (stop is not None and stop.is_set()):
                break
        skips = 0
        loop = asyncio.get_running_loop()
        tick_began = loop.time()
        while True:
            began = loop.time()
            planner = _RecordingPlanner()
            result = await materialize(
                self.store,
                planner,
                horizon=self.settings.scheduler_horizon,
                limit=self.settings.scheduler_batch,
                partitions=self.partitions,
                owner=self.owner,
            )
            self._observe([(job, result.now, plan) for job, plan in result.plans])
            jobs += result.jobs
            created += result.runs_created
            skips += result.skips
            if result.jobs < self.settings.scheduler_batch:
                return TickResult(jobs, created, skips)
            if pace and self._far_ahead(planner.planned, loop.time() - tick_began):
                pause = loop.time() - began
                if stop is None:
                    await asyncio.sleep(pause)
                elif await wait_or_stop(stop, pause):
                    return TickResult(jobs, created, skips)

    def _far_ahead(self, planned: list[tuple[Job, datetime, JobPlan]], spent: float) -> bool:
        """Whether a batch's occurrences were all far enough ahead to pace (:func:`paced`)."""
        dues = [job.next_fire_at for job, _, _ in planned if job.next_fire_at is not None]
        if not dues or not planned:
            return False
        ahead = (min(dues) - planned[0][1]).total_seconds()
        return paced(ahead, spent, self.settings.scheduler_tick)

    def _observe_plain(self, plain: PlainResult) -> None:
        """Count the runs a committed set-path transaction made."""
        for tenant, task, scheduled_for, count in plain.made:
            self.metrics.materialized(tenant, task, scheduled_for, plain.now, count)

    def _observe(self, planned: list[tuple[Job, datetime, JobPlan]]) -> None:
        """Count what a committed materialize transaction decided (runs, skips)."""
        for job, now, plan in planned:
            for run in plan.runs:
                self.metrics.materialized(job.tenant, job.task, run.scheduled_for, now)
            for skip in plan.skips:
                self.metrics.skipped(job.tenant, job.task, skip.reason, skip.count)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick every ``scheduler_tick`` seconds until ``stop`` is set. A failed tick (database
        down) is logged and retried with backoff; it never ends the loop."""
        failures = 0
        while not stop.is_set():
            try:
                result = await self.run_once(pace=True, stop=stop)
                failures = 0
                if result.runs_created or result.skips:
                    log.debug(
                        "materialized %d runs (%d skips) for %d jobs",
                        result.runs_created,
                        result.skips,
                        result.jobs,
                    )
                delay = self.settings.scheduler_tick
            except Exception:
                failures += 1
                delay = min(30.0, self.settings.scheduler_tick * 2**failures)
                log.exception(
                    "scheduler tick failed (%d in a row); retrying in %.1fs", failures, delay
                )
            await wait_or_stop(stop, delay)
