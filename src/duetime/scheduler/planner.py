"""What to do with one due job: pure, no I/O (the store calls it inside its transaction).

For a job whose ``next_fire_at`` is within the horizon, every occurrence up to the horizon's
end becomes a run, except those the misfire policy says to drop. An occurrence is *missed*
when it is older than ``now - misfire_grace`` (nothing ran while it was due):

- ``skip``: no missed occurrence runs; all are recorded as one skip (first, last, count).
- ``fire_once``: the latest missed occurrence runs; the others are recorded as a skip.
- ``backfill``: the latest ``max_backfill`` missed occurrences run, released at
  ``BACKFILL_RATE`` per second so a catch-up never floods the workers; older ones are skipped.

A one-shot job registered for an instant already past is not a miss: it fires.

A recurring job's bounds (``scheduler/bounds.py``) cut the occurrences: none before
``start_at`` (the plan starts at the first one at or after it), none after ``end_at``, and no
more runs than ``max_runs`` still allows (the earliest kept, missed ones included; missed ones
past the cut are recorded as a skip, reason ``max_runs``). A plan that
reaches past ``end_at`` says so (``complete``); the store completes a job whose count reaches
``max_runs`` itself, in the same transaction (``jobs_count_runs``).

A job with ``jitter`` makes each run available up to that many seconds after its instant, by a
stable hash of (job, occurrence) (``schedules.jitter_offset``): ``scheduled_for`` — what makes a
run unique — never moves, so schedulers still agree.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

from duetime._types import Job, MisfirePolicy
from duetime.scheduler.bounds import Bounds, is_bounded
from duetime.schedules import jitter_offset, next_fire_after
from duetime.store.base import JobPlan, PlannedRun, PlannedSkip

BACKFILL_RATE = 10.0
"""Missed occurrences a backfill releases per second, per job."""
MAX_OCCURRENCES_PER_PLAN = 1_000_000


def plan_job(job: Job, now: datetime, until: datetime) -> JobPlan:
    missed_before = now - timedelta(seconds=job.misfire_grace)
    bounded = is_bounded(job)
    end_at = job.end_at if bounded else None
    occurrence = job.next_fire_at
    if bounded:
        occurrence = Bounds(start_at=job.start_at).next_occurrence(job.schedule, occurrence)
    missed_count = 0
    first_missed: datetime | None = None
    keep = _kept_missed(job)
    recent_missed: deque[datetime] = deque(maxlen=keep + 1)
    due: list[datetime] = []
    examined = 0
    while (
        occurrence is not None
        and occurrence <= until
        and (end_at is None or occurrence <= end_at)
        and examined < MAX_OCCURRENCES_PER_PLAN
    ):
        examined += 1
        is_miss = occurrence < missed_before and not (
            job.schedule.one_shot and job.created_at >= occurrence
        )
        if is_miss:
            missed_count += 1
            first_missed = first_missed or occurrence
            recent_missed.append(occurrence)
        else:
            due.append(occurrence)
        occurrence = None if job.schedule.one_shot else next_fire_after(job.schedule, occurrence)

    fired_missed = list(recent_missed)[-keep:] if keep else []
    skips: list[PlannedSkip] = []
    skipped = missed_count - len(fired_missed)
    if skipped > 0:
        assert first_missed is not None
        # the deque is full here: its oldest entry is the newest occurrence that does not run
        skips.append(
            PlannedSkip(
                first=first_missed,
                last=recent_missed[0],
                count=skipped,
                reason=f"misfire_{job.misfire_policy}",
            )
        )
    runs = [
        PlannedRun(scheduled_for=t, available_at=_release_at(job, i, t, now))
        for i, t in enumerate(fired_missed)
    ]
    runs += [PlannedRun(scheduled_for=t, available_at=t + _jitter(job, t)) for t in due]
    if not bounded:
        return JobPlan(runs=runs, skips=skips, next_fire_at=occurrence)
    left = job.runs_left
    if left is not None and len(runs) > left:
        skips += _cut_missed(fired_missed[left:])
        runs = runs[:left]  # the job completes with them (jobs_count_runs)
        if runs:
            occurrence = next_fire_after(job.schedule, runs[-1].scheduled_for)
    past_end = occurrence is None or (end_at is not None and occurrence > end_at)
    return JobPlan(
        runs=runs, skips=skips, next_fire_at=None if past_end else occurrence, complete=past_end
    )


def _cut_missed(missed: list[datetime]) -> list[PlannedSkip]:
    """The skip record (reason ``max_runs``) of missed occurrences that would have caught up
    but are past the job's ``max_runs``; none when there are none. Occurrences still to
    come that the cut drops are not recorded: the job completes before them."""
    if not missed:
        return []
    return [PlannedSkip(first=missed[0], last=missed[-1], count=len(missed), reason="max_runs")]


def _kept_missed(job: Job) -> int:
    if job.misfire_policy is MisfirePolicy.SKIP:
        return 0
    if job.misfire_policy is MisfirePolicy.FIRE_ONCE:
        return 1
    return job.max_backfill


def _release_at(job: Job, index: int, occurrence: datetime, now: datetime) -> datetime:
    """When a missed occurrence that will run becomes available: at once for ``fire_once``,
    spaced by ``1 / BACKFILL_RATE`` for ``backfill``."""
    base = occurrence + _jitter(job, occurrence)
    if job.misfire_policy is not MisfirePolicy.BACKFILL:
        return base
    return max(base, now + timedelta(seconds=index / BACKFILL_RATE))


def _jitter(job: Job, occurrence: datetime) -> timedelta:
    return jitter_offset(str(job.id), occurrence, job.jitter) if job.jitter else timedelta(0)
