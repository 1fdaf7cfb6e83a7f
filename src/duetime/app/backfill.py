"""On-demand backfill: materialize every occurrence of a past range of a job as runs.

Contracts:

- **Idempotent.** A run is unique per (job, ``scheduled_for``) (``runs_job_occurrence``): an
  occurrence that already has a run — from the scheduler, an earlier backfill, or one still
  kept by retention — is left alone, so the same backfill twice creates nothing new.
- **Calendars.** Occurrences the job's calendars exclude are not created (listed as skipped,
  with the calendar); with a business-day shift they run, available at the moved instant.
- **Rate.** New runs are released ``1 / Settings.backfill_rate`` seconds apart (their
  ``available_at``), so a long backfill never floods the workers; they are written in
  transactions of :data:`CHUNK` runs, each locking the job (a concurrent pause or cancel
  waits, and a backfill of a job that is no longer active stops).
- **Overlap** is the job's own: backfilled runs are claimed and started like any other run of
  it (overlap key, tenant quotas).
- **Misfire-exempt.** Backfilled runs carry ``origin = "backfill"`` and no misfire deadline:
  a run released late is never skipped as missed.
- **Caps.** The tenant's ``max_backfill_runs`` (``TenantLimits``) bounds the runs one backfill
  may create: a backfill that would create more is refused before it writes anything. A
  range longer than :data:`CONFIRM_SPAN` needs ``yes=True``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from duetime._types import Job, JobStatus, OverlapPolicy
from duetime.errors import BackfillCapReached, ValidationError
from duetime.scheduler.calendar_plan import BackfillOccurrence, backfill_occurrences, calendars_of
from duetime.schedules.zones import to_utc
from duetime.store.base import JobRef, PlannedRun, Store

CHUNK = 500
"""Runs written per transaction."""
CONFIRM_SPAN = timedelta(days=366)
"""A backfill of a longer range needs ``yes``."""
MAX_OCCURRENCES = 1_000_000
"""Occurrences one backfill examines at most (a longer range is refused: split it)."""
ORIGIN = "backfill"
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
"""No backfill reaches before this instant."""

Progress = Callable[[int, int], None]
"""``progress(done, total)``: occurrences written so far of those to create."""


@dataclass(frozen=True, slots=True)
class BackfillResult:
    """What a backfill did (or, with ``dry_run``, would do)."""

    job_id: uuid.UUID
    job: str
    since: datetime
    until: datetime
    dry_run: bool
    occurrences: int
    """Occurrences of the range (before calendars)."""
    created: int
    """Runs created (with ``dry_run``: that would be created)."""
    existing: int
    """Occurrences that already had a run: left alone."""
    skipped: int
    """Occurrences the job's calendars exclude."""
    runs: list[BackfillOccurrence] = field(default_factory=list)
    """With ``dry_run``: the occurrences that would run (at most ``list_limit``)."""
    skips: list[BackfillOccurrence] = field(default_factory=list)
    """With ``dry_run``: those its calendars skip (at most ``list_limit``)."""
    warning: str | None = None
    """Set when the job's overlap policy will skip some of the runs (``skip``, ``replace``,
    ``buffer_one``: runs are released ``1 / backfill_rate`` seconds apart)."""


@dataclass(frozen=True, slots=True)
class BackfillProgress:
    """The job's backfilled runs by state (``origin = "backfill"``, while history keeps them)."""

    job_id: uuid.UUID
    job: str
    states: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.states.values())

    @property
    def finished(self) -> int:
        return sum(n for s, n in self.states.items() if s not in ("scheduled", "running"))


def check_range(since: datetime, until: datetime, now: datetime, *, yes: bool) -> None:
    """``ValidationError`` naming ``from``/``to`` for a range that is empty, in the future,
    (without ``yes``) longer than :data:`CONFIRM_SPAN`, or reaching before :data:`EARLIEST`."""
    if until < since:
        raise ValidationError("to", f"must not be before 'from' ({since.isoformat()})")
    if until > now:
        raise ValidationError(
            "to", f"a backfill covers the past: must not be after now ({now.isoformat()})"
        )
    if until - since > CONFIRM_SPAN and not yes:
        days = (until - since).days
        raise ValidationError(
            "to",
            f"the range spans {days} days (more than {CONFIRM_SPAN.days}): confirm with "
            '--yes (REST: "yes": true, Python: yes=True)',
        )
    if since < EARLIEST:
        raise ValidationError("from", f"must not be before {EARLIEST.isoformat()}")


async def backfill(
    store: Store,
    ref: JobRef,
    since: datetime,
    until: datetime,
    *,
    now: datetime,
    rate: float,
    dry_run: bool = False,
    yes: bool = False,
    list_limit: int = 1000,
    progress: Progress | None = None,
) -> BackfillResult:
    """Backfill ``ref``'s occurrences from ``since`` to ``until`` (both included; see the
    module docstring). Raises NotFound, ValidationError (bad range, a job that is not active,
    a one-shot job), BackfillCapReached (the tenant's ``max_backfill_runs``)."""
    since, until = to_utc(since, "from"), to_utc(until, "to")
    check_range(since, until, now, yes=yes)
    job = await store.job_get(ref)
    if job.schedule.one_shot:
        raise ValidationError("job", f"{job.name!r} is a one-shot job: it has no range to backfill")
    if job.status is not JobStatus.ACTIVE:
        raise ValidationError(
            "job", f"{job.name!r} is {job.status}: only an active job is backfilled"
        )
    calendars = calendars_of(
        job, await store.calendars_by_key([(job.tenant, n) for n in job.calendars])
    )
    # pure, but up to a million occurrences: off the event loop (an API server keeps serving)
    found = await asyncio.to_thread(
        lambda: list(backfill_occurrences(job, calendars, since, until, MAX_OCCURRENCES + 1))
    )
    if len(found) > MAX_OCCURRENCES:
        raise ValidationError(
            "to", f"the range has more than {MAX_OCCURRENCES} occurrences: split it"
        )
    taken = await store.runs_occurrences(job.id, since, until)
    todo = [o for o in found if o.skipped_by is None and o.scheduled_for not in taken]
    skips = [o for o in found if o.skipped_by is not None]
    existing = sum(1 for o in found if o.skipped_by is None and o.scheduled_for in taken)
    limits = await store.tenant_limits_get(job.tenant)
    cap = limits.max_backfill_runs
    if cap is not None and len(todo) > cap:
        raise BackfillCapReached(job.tenant, job.name, len(todo), cap)
    result = BackfillResult(
        job_id=job.id,
        job=job.name,
        since=since,
        until=until,
        dry_run=dry_run,
        occurrences=len(found),
        created=len(todo),
        existing=existing,
        skipped=len(skips),
        warning=_overlap_warning(job) if len(todo) > 1 else None,
    )
    if dry_run:
        return replace(result, runs=todo[:list_limit], skips=skips[:list_limit])
    created = await _write(store, job, todo, now, rate, progress)
    # a concurrent scheduler or backfill may have taken some occurrences meanwhile
    return replace(result, created=created, existing=existing + len(todo) - created)


def _overlap_warning(job: Job) -> str | None:
    """What the job's overlap policy will do to runs released close together."""
    if job.overlap_policy in (OverlapPolicy.SERIALIZE, OverlapPolicy.ALLOW):
        return None
    return (
        f"{job.name!r} has overlap {job.overlap_policy!s}: runs released while an earlier one "
        "is running are skipped or superseded (use overlap 'serialize' to run each in turn)"
    )


async def _write(
    store: Store,
    job: Job,
    todo: list[BackfillOccurrence],
    now: datetime,
    rate: float,
    progress: Progress | None,
) -> int:
    """Insert the runs in chunks, each in a transaction that locks the job; returns how many
    were new (a concurrent scheduler or backfill may have taken some meanwhile)."""
    step = timedelta(seconds=1 / rate)
    created = 0
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start : start + CHUNK]
        async with store.transaction() as tx:
            locked = await tx.job_lock(JobRef(tenant=job.tenant, id=job.id))
            if locked is None or locked.status is not JobStatus.ACTIVE:
                break
            planned = [
                (
                    locked,
                    PlannedRun(
                        scheduled_for=o.scheduled_for,
                        available_at=max(
                            o.available_at or o.scheduled_for, now + step * (start + i)
                        ),
                        origin=ORIGIN,
                    ),
                )
                for i, o in enumerate(chunk)
            ]
            created += await tx.runs_insert_planned(planned)
        if progress is not None:
            progress(start + len(chunk), len(todo))
    return created
