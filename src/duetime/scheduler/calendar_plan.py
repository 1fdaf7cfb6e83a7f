"""A due job's plan through its exclusion calendars, and a backfill's occurrences: pure, no I/O.

:func:`apply_calendars` takes the planner's plan (``scheduler/planner.py``) of a job that
names calendars and, for each run whose occurrence a calendar excludes (``schedules/
calendars.py``):

- without a shift, drops the run and records a skip, reason ``calendar:<name>`` (consecutive
  excluded occurrences of one calendar are one record: first, last, count);
- with ``next_business_day`` / ``previous_business_day``, keeps the run — its
  ``scheduled_for`` stays the occurrence, the run's identity, so the moved occurrence is never
  a second run — and makes it available at the moved instant (plus the job's jitter). Its
  misfire deadline counts from the moved instant (``store/_values.py``). When no business
  day is found within a year the occurrence is skipped.

A ``previous_business_day`` shift moves an occurrence *earlier*: the plan then looks past the
horizon, occurrence by occurrence, while each one is excluded and its moved instant falls
within the horizon, so the run exists before it is due (unbounded jobs only; a bounded job's
excluded occurrence past the horizon moves no earlier than the tick that plans it).

:func:`backfill_occurrences` lists a past range's occurrences with the same verdicts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from duetime._types import Job, Occurrence, StoredCalendar
from duetime.errors import ValidationError
from duetime.scheduler.bounds import Bounds, is_bounded
from duetime.schedules import jitter_offset, load_zone, next_fire_after
from duetime.schedules.calendars import (
    Calendar,
    CalendarShift,
    exclusion,
    parse_rules,
    shift_occurrence,
)
from duetime.store.base import JobPlan, PlannedRun, PlannedSkip

log = logging.getLogger("duetime.scheduler")

MAX_LOOKAHEAD = 10_000
"""Occurrences a ``previous_business_day`` plan examines past the horizon, at most."""


def calendars_of(job: Job, stored: Sequence[StoredCalendar]) -> list[Calendar]:
    """The job's calendars in the order it names them. One that is missing, or whose stored
    rules no longer parse (a country the installed ``holidays`` package dropped), excludes
    nothing — logged: a calendar must never stop the scheduler's transaction."""
    by_name = {c.name: c for c in stored if c.tenant == job.tenant}
    found: list[Calendar] = []
    for name in job.calendars:
        if name not in by_name:
            continue
        try:
            found.append(
                Calendar(name, parse_rules(by_name[name].rules), by_name[name].description)
            )
        except ValidationError as exc:
            log.error(
                "calendar %r of tenant %r is ignored (job %r): %s", name, job.tenant, job.name, exc
            )
    return found


def apply_calendars(
    job: Job, plan: JobPlan, calendars: Sequence[Calendar], until: datetime
) -> JobPlan:
    """``plan`` with the occurrences ``calendars`` exclude skipped or moved (module docstring)."""
    if not calendars:
        return plan
    zone = load_zone(job.schedule.tz)
    shift = CalendarShift(job.calendar_shift) if job.calendar_shift else None
    runs: list[PlannedRun] = []
    skips = list(plan.skips)
    for run in plan.runs:
        kept = _through(job, run, zone, calendars, shift)
        if isinstance(kept, PlannedRun):
            runs.append(kept)
        else:
            _add_skip(skips, run.scheduled_for, kept)
    next_fire_at = plan.next_fire_at
    if shift is CalendarShift.PREVIOUS_BUSINESS_DAY and not is_bounded(job):
        next_fire_at = _look_ahead(job, next_fire_at, zone, calendars, until, runs)
    return replace(plan, runs=runs, skips=skips, next_fire_at=next_fire_at)


def _through(
    job: Job,
    run: PlannedRun,
    zone: ZoneInfo,
    calendars: Sequence[Calendar],
    shift: CalendarShift | None,
) -> PlannedRun | str:
    """The run as the calendars leave it, or the name of the calendar that skips it."""
    excluded = exclusion(run.scheduled_for, zone, calendars)
    if excluded is None:
        return run
    moved = None if shift is None else shift_occurrence(run.scheduled_for, zone, calendars, shift)
    if moved is None:
        return excluded.calendar
    offset = run.available_at - run.scheduled_for
    return replace(
        run, available_at=moved + offset + _in_order(run.scheduled_for, moved), shifted=True
    )


def _add_skip(skips: list[PlannedSkip], occurrence: datetime, calendar: str) -> None:
    reason = f"calendar:{calendar}"
    last = skips[-1] if skips else None
    if last is not None and last.reason == reason and last.last < occurrence:
        skips[-1] = replace(last, last=occurrence, count=last.count + 1)
    else:
        skips.append(PlannedSkip(first=occurrence, last=occurrence, count=1, reason=reason))


def _look_ahead(
    job: Job,
    occurrence: datetime | None,
    zone: ZoneInfo,
    calendars: Sequence[Calendar],
    until: datetime,
    runs: list[PlannedRun],
) -> datetime | None:
    """Append the runs of excluded occurrences past the horizon whose previous business day
    is within it; returns the first occurrence left for a later tick."""
    for _ in range(MAX_LOOKAHEAD):
        if occurrence is None or exclusion(occurrence, zone, calendars) is None:
            return occurrence
        moved = shift_occurrence(
            occurrence,
            zone,
            calendars,
            CalendarShift.PREVIOUS_BUSINESS_DAY,
        )
        if moved is None or moved > until:
            return occurrence
        available = moved + _jitter(job, occurrence) + _in_order(occurrence, moved)
        runs.append(PlannedRun(occurrence, available, shifted=True))
        occurrence = next_fire_after(job.schedule, occurrence)
    return occurrence


def _in_order(occurrence: datetime, moved: datetime) -> timedelta:
    """One microsecond per day an occurrence was moved, signed: runs a shift lands on one
    instant (Saturday's and Sunday's on Monday's) become available in their occurrences'
    order, which is the order a claim takes them in."""
    return timedelta(microseconds=round((occurrence - moved) / timedelta(days=1)))


def _jitter(job: Job, occurrence: datetime) -> timedelta:
    return jitter_offset(str(job.id), occurrence, job.jitter) if job.jitter else timedelta(0)


def annotate(
    job: Job, calendars: Sequence[Calendar], occurrences: Sequence[Occurrence]
) -> list[Occurrence]:
    """Previews of ``job`` with a ``calendar_note`` on each occurrence its calendars exclude:
    skipped (and by which calendar, why), or where a shift moves it."""
    if not calendars:
        return list(occurrences)
    zone = load_zone(job.schedule.tz)
    shift = CalendarShift(job.calendar_shift) if job.calendar_shift else None
    out: list[Occurrence] = []
    for o in occurrences:
        excluded = exclusion(o.instant, zone, calendars)
        if excluded is None:
            out.append(o)
            continue
        cause = f"calendar {excluded.calendar!r}: {excluded.why}"
        moved = None if shift is None else shift_occurrence(o.instant, zone, calendars, shift)
        note = (
            f"skipped: {cause}"
            if moved is None
            else f"runs at {moved.isoformat().replace('+00:00', 'Z')} ({shift}; {cause})"
        )
        out.append(replace(o, calendar_note=note))
    return out


# --- backfill ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BackfillOccurrence:
    """One occurrence of a backfill's range: its instant, when its run would be available,
    and the calendar that skips it (None: it runs)."""

    scheduled_for: datetime
    available_at: datetime | None
    skipped_by: str | None = None


def backfill_occurrences(
    job: Job, calendars: Sequence[Calendar], since: datetime, until: datetime, limit: int
) -> Iterator[BackfillOccurrence]:
    """The job's occurrences from ``since`` to ``until`` (both included), within its bounds
    (``start_at``/``end_at``; ``max_runs`` does not limit a backfill), through its calendars;
    at most ``limit``. A moved occurrence is available at its moved instant (it may lie
    outside the range); the caller decides release times."""
    zone = load_zone(job.schedule.tz)
    shift = CalendarShift(job.calendar_shift) if job.calendar_shift else None
    bounds = Bounds(start_at=job.start_at)
    start = since if job.start_at is None else max(since, job.start_at)
    end = until if job.end_at is None else min(until, job.end_at)
    occurrence = next_fire_after(job.schedule, start - timedelta(microseconds=1))
    if occurrence is not None and job.start_at is not None:
        occurrence = bounds.next_occurrence(job.schedule, occurrence)
    count = 0
    while occurrence is not None and occurrence <= end and count < limit:
        count += 1
        run = PlannedRun(occurrence, occurrence)
        kept = _through(job, run, zone, calendars, shift)
        if isinstance(kept, PlannedRun):
            yield BackfillOccurrence(occurrence, kept.available_at)
        else:
            yield BackfillOccurrence(occurrence, None, kept)
        occurrence = next_fire_after(job.schedule, occurrence)
