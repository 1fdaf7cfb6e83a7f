"""``explain``: why a job did or did not fire — its recent occurrences, each with what happened
and why, and its next fire instants (local and UTC, with DST notes).

:func:`explain` is pure: :meth:`duetime.app.Monitoring.explain` gathers the job, its recent runs
(with the attempts of those that were retried or died), its skip records, the live workers and
its next fire instants, and this module turns them into an :class:`Explanation` that the CLI
(``duetime explain JOB``) and the REST API (``GET /api/v1/jobs/{id}/explain``) render.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from duetime._types import (
    Attempt,
    AttemptOutcome,
    Job,
    JobStatus,
    Occurrence,
    Run,
    RunState,
    RunTrigger,
    ScheduleKind,
)
from duetime.schedules import load_zone


@dataclass(frozen=True, slots=True)
class OccurrenceReport:
    """One past (or pending) occurrence of the job and what became of it."""

    instant: datetime
    """The scheduled instant (UTC); for a skip range, its first occurrence."""
    local: datetime
    """The same instant in the job's zone."""
    what: str
    """``fired``, ``retried``, ``retrying``, ``running``, ``claimed``, ``waiting``,
    ``waiting_for_worker``, ``skipped``, ``paused``, ``cancelled`` or ``dead``."""
    why: str
    """A sentence saying what happened and why."""
    run_id: uuid.UUID | None = None
    state: RunState | None = None
    trigger: RunTrigger = RunTrigger.SCHEDULE
    attempts: int = 0
    reason: str | None = None
    error: str | None = None
    count: int = 1
    """Occurrences this line stands for (a skip range of a misfire counts several)."""
    last: datetime | None = None
    """The last occurrence of a skip range."""


NextFire = Occurrence
"""A next fire instant (UTC, local, DST note): the schedule preview's own value type."""


@dataclass(frozen=True, slots=True)
class Explanation:
    job_id: uuid.UUID
    name: str
    tenant: str
    status: JobStatus
    schedule: str
    """The schedule in words (``cron '0 9 * * *' in Europe/Paris``)."""
    tz: str
    now: datetime
    summary: str
    """The headline: is it going to fire, and if the last occurrence went wrong, why."""
    next_fire_at: datetime | None
    """The job's ``next_fire_at``: where the scheduler goes on writing runs (it writes them
    ahead of their instant, so earlier occurrences may be waiting as runs)."""
    last: list[OccurrenceReport]
    """Newest first."""
    next: list[NextFire]
    notes: list[str] = field(default_factory=list)
    next_occurrence_at: datetime | None = None
    """The earliest occurrence not fired yet (``Job.next_occurrence_at``): "next fire"."""


def describe_schedule(job: Job) -> str:
    s = job.schedule
    if s.kind is ScheduleKind.CRON:
        return f"cron {s.cron!r} in {s.tz}"
    if s.kind is ScheduleKind.EVERY:
        anchor = "" if s.anchor is None else f" from {_iso(s.anchor)}"
        if s.every_calendar is not None:  # stepped on the zone's calendar: its wall time kept
            return f"every {s.every_calendar} in {s.tz}{anchor}"
        assert s.every is not None
        return f"every {_seconds(s.every.total_seconds())}{anchor}"
    if s.kind is ScheduleKind.AT:
        return f"once at {_iso(s.at)}"
    return f"once, now (registered {_iso(s.at)})"


def _iso(at: datetime | None) -> str:
    return "—" if at is None else at.isoformat().replace("+00:00", "Z")


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.3g} s"
    if value < 7200:
        return f"{value / 60:.3g} min"
    if value < 172800:
        return f"{value / 3600:.3g} h"
    days = value / 86400
    if days < 100:
        return f"{days:.3g} days"
    if days < 730:
        return f"{days:,.0f} days"  # never 2.52e+03 (what .3g prints from 1000 on)
    return f"{days / 365.25:,.1f} years"


def _ago(now: datetime, at: datetime) -> str:
    delta = (now - at).total_seconds()
    if delta >= 0:
        return f"{_seconds(delta)} ago"
    return f"in {_seconds(-delta)}"


def _error(cls: str | None, message: str | None) -> str | None:
    parts = [p for p in (cls, message) if p]
    return ": ".join(parts) if parts else None


_SKIP_WHY = {
    "paused": "skipped: the job was paused",
    "schedule_changed": "skipped: the job's schedule changed before it ran",
    "overlap": "skipped by the overlap policy: a previous run of the job was still running",
    "superseded": "skipped by the overlap policy: a newer run due while the job was busy "
    "took its place in the queue (buffer_one, replace)",
    "queue_full": "skipped: max_waiting runs were already waiting for the busy job",
    "misfire_skip": "skipped by the misfire policy 'skip': it waited past its misfire grace "
    "while no worker could run it",
    "misfire_fire_once": "skipped by the misfire policy 'fire_once': a later missed "
    "occurrence ran instead",
    "max_runs": "skipped: missed while nothing ran, and past the job's max_runs when it caught up",
}


def _skip_why(reason: str, default: str | None = None) -> str:
    """Why a skip reason skipped: ``calendar:<name>`` names the job's calendar."""
    if reason.startswith("calendar:"):
        return f"skipped: excluded by the job's calendar {reason.removeprefix('calendar:')!r}"
    return _SKIP_WHY.get(reason, reason if default is None else default)


_CANCEL_WHY = {
    "job_cancelled": "cancelled: the job was cancelled",
    "cancelled": "cancelled by an operator",
    "replaced": "cancelled by the overlap policy 'replace': a newer run took its place "
    "(it was asked to stop; past the job's replace_timeout it was cancelled outright)",
}


def _report_run(
    run: Run,
    job: Job,
    zone: ZoneInfo,
    now: datetime,
    attempts: Sequence[Attempt],
    served: set[str],
) -> OccurrenceReport:
    failures = [
        a
        for a in attempts
        if a.outcome in (AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT, AttemptOutcome.LOST)
    ]
    last_failure = failures[-1] if failures else None
    failure_text = (
        None
        if last_failure is None
        else _error(last_failure.error_class, last_failure.error_message) or last_failure.outcome
    )
    error = _error(run.last_error_class, run.last_error_message) or failure_text
    manual = " (manual trigger)" if run.trigger is RunTrigger.MANUAL else ""
    if run.origin == "backfill":
        manual = " (backfill)"
    state = run.state
    if state is RunState.SUCCEEDED:
        took = ""
        if run.started_at is not None and run.finished_at is not None:
            took = f" in {_seconds((run.finished_at - run.started_at).total_seconds())}"
        if run.attempt <= 1:
            lag = ""
            if run.started_at is not None:
                late = max(0.0, (run.started_at - run.scheduled_for).total_seconds())
                lag = f", {_seconds(late)} after its instant"
            what, why = "fired", f"fired{manual}{lag} and succeeded{took}"
        else:
            what = "retried"
            why = (
                f"fired{manual}, failed {run.attempt - 1} time(s)"
                + (f" (last error: {failure_text})" if failure_text else "")
                + f", then succeeded at attempt {run.attempt}{took}"
            )
    elif state is RunState.DEAD:
        what = "dead"
        why = (
            f"dead after {run.attempt} attempt(s) ({run.reason or 'unknown reason'})"
            + (f": {error}" if error else "")
            + " — it is in the dead-letter queue; replay it to run it again"
        )
    elif state is RunState.SKIPPED:
        what = "paused" if run.reason == "paused" else "skipped"
        why = _skip_why(run.reason or "", f"skipped ({run.reason})")
    elif state is RunState.CANCELLED:
        what = "cancelled"
        why = _CANCEL_WHY.get(run.reason or "", f"cancelled ({run.reason})")
    elif state is RunState.RUNNING:
        if run.started_at is None:
            what, why = "claimed", f"claimed by worker {run.lease_owner} ahead of its instant"
        else:
            what = "running"
            why = (
                f"running on worker {run.lease_owner} since {_ago(now, run.started_at)} "
                f"(attempt {run.attempt} of {run.max_attempts})"
            )
    else:  # scheduled
        due = run.available_at <= now
        if run.attempt > 0 and not due:
            what = "retrying"
            why = (
                f"attempt {run.attempt} failed"
                + (f" ({error})" if error else "")
                + f"; retry {_ago(now, run.available_at)}"
            )
        elif not due:
            what, why = "waiting", f"materialized, fires {_ago(now, run.available_at)}"
        elif job.task not in served:
            what = "waiting_for_worker"
            why = (
                f"due since {_ago(now, run.available_at)}, but no live worker serves task "
                f"{job.task!r}: start one (duetime worker --app …)"
            )
        else:
            what = "waiting"
            why = f"due since {_ago(now, run.available_at)}, waiting for a free worker slot"
    # a run's fields passed by keyword, the same shape as worker/'s RunCompletion: no shared logic
    return OccurrenceReport(
        instant=run.scheduled_for,
        local=run.scheduled_for.astimezone(zone),
        what=what,
        why=why,
        run_id=run.id,
        state=run.state,
        trigger=run.trigger,
        attempts=run.attempt,
        reason=run.reason,
        error=error,
    )


def explain(
    job: Job,
    *,
    now: datetime,
    runs: Sequence[Run],
    attempts: Mapping[uuid.UUID, Sequence[Attempt]],
    skips: Sequence[tuple[datetime, datetime, int, str]],
    next_fires: Sequence[Occurrence],
    served_tasks: set[str],
    limit: int = 10,
) -> Explanation:
    """Explain ``job`` from its newest ``runs``, its skip records (first, last, count, reason),
    the ``attempts`` of some runs, its ``next_fires`` and the tasks live workers serve."""
    zone = load_zone(job.schedule.tz)  # the tzdata package's rules, as the scheduler's
    reports = [_report_run(r, job, zone, now, attempts.get(r.id, ()), served_tasks) for r in runs]
    for first, last, count, reason in skips:
        reports.append(
            OccurrenceReport(
                instant=first,
                local=first.astimezone(zone),
                what="skipped",
                why=(
                    f"{count} occurrence(s) from {_iso(first)} to {_iso(last)} were never run: "
                    + _skip_why(reason)
                    + (
                        f" (misfire grace {_seconds(job.misfire_grace)}, policy "
                        f"{job.misfire_policy})"
                        if reason.startswith("misfire")
                        else ""
                    )
                ),
                reason=reason,
                count=count,
                last=last,
            )
        )
    reports.sort(key=lambda r: r.instant, reverse=True)
    reports = reports[:limit]
    nexts = list(next_fires)
    notes: list[str] = []
    if job.task not in served_tasks:
        notes.append(f"no live worker serves task {job.task!r}: due runs will wait for one")
    if job.status is JobStatus.ACTIVE and job.next_fire_at is not None and job.next_fire_at < now:
        notes.append(
            f"its next occurrence ({_iso(job.next_fire_at)}) has passed without being "
            "materialized: is a scheduler running (duetime scheduler / up)?"
        )
    for occurrence in nexts:
        if occurrence.dst_note:
            notes.append(f"DST: the occurrence at {_iso(occurrence.instant)} {occurrence.dst_note}")
    if job.sla is not None:
        notes.append(f"SLA: a run must succeed within {_seconds(job.sla)} of each occurrence")
    return Explanation(
        job_id=job.id,
        name=job.name,
        tenant=job.tenant,
        status=job.status,
        schedule=describe_schedule(job),
        tz=job.schedule.tz,
        now=now,
        summary=_summary(job, now, reports, nexts),
        next_fire_at=job.next_fire_at,
        last=reports,
        next=nexts,
        notes=notes,
        next_occurrence_at=job.next_occurrence_at,
    )


def _bounds_note(job: Job) -> str:
    """Why a recurring job completed: its end passed, or its runs were used up."""
    if job.max_runs is not None and job.runs_created >= job.max_runs:
        return f" (max_runs {job.max_runs} used up)."
    if job.end_at is not None:
        return f" (end_at {_iso(job.end_at)})."
    return "."


def _summary(
    job: Job, now: datetime, reports: Sequence[OccurrenceReport], nexts: Sequence[NextFire]
) -> str:
    if job.status is JobStatus.CANCELLED:
        head = "The job is cancelled: it never fires again (manual triggers are refused)."
    elif job.status is JobStatus.COMPLETED and not job.schedule.one_shot:
        head = "The job completed: no occurrence is left within its bounds" + _bounds_note(job)
    elif job.status is JobStatus.COMPLETED:
        head = "The one-shot job completed: its run has ended."
    elif job.status is JobStatus.PAUSED:
        head = (
            f"The job is paused (since {_iso(job.updated_at)}): its occurrences are skipped "
            "until it is resumed; manual triggers still run."
        )
    elif not nexts:
        head = "The job is active but has no further occurrence."
    else:
        first = nexts[0].instant
        head = f"The job is active; it next fires at {_iso(first)} ({_ago(now, first)})."
    if not reports:
        return head + " It has not fired yet."
    latest = reports[0]
    return f"{head} Latest occurrence {_iso(latest.instant)}: {latest.why}."
