"""Reading a job's runs and asserting on them, with messages that say what was expected and
list what was found."""

from __future__ import annotations

import uuid
from datetime import datetime

from duetime._types import Job, Run
from duetime.app import App, AsyncApp

JobRef = Job | str | uuid.UUID
"""A job by value, name or id."""


def _key(job: JobRef) -> str | uuid.UUID:
    return job.id if isinstance(job, Job) else job


async def runs_of(app: AsyncApp, job: JobRef) -> list[Run]:
    """Every run of ``job`` (of ``app``'s tenant), oldest scheduled instant first (ties: the
    order they were created)."""
    found: list[Run] = []
    cursor: str | None = None
    while True:
        page = await app.runs.find(_key(job), limit=500, cursor=cursor)
        found.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    return sorted(found, key=lambda r: (r.scheduled_for, r.created_at, str(r.id)))


def describe_runs(runs: list[Run]) -> str:
    """One line per run: instant, state (with its reason or last error), attempts, id."""
    if not runs:
        return "  (no runs)"
    lines = []
    for run in runs:
        why = run.reason or (
            f"{run.last_error_class}: {run.last_error_message}" if run.last_error_class else None
        )
        lines.append(
            f"  - {run.scheduled_for.isoformat()} {run.state.value}"
            f"{f' ({why})' if why else ''}, attempt {run.attempt}/{run.max_attempts},"
            f" {run.trigger.value}, id {run.id}"
        )
    return "\n".join(lines)


async def assert_triggered(app: AsyncApp, job: JobRef, count: int | None = None) -> list[Run]:
    """Assert that ``job`` has runs — exactly ``count`` of them when given (a run is counted
    once however many attempts it took; scheduled, manual and retrying runs alike); its runs,
    oldest first."""
    runs = await runs_of(app, job)
    name = _name(job)
    if count is None and not runs:
        raise AssertionError(f"expected job {name} to have been triggered; it has no runs")
    if count is not None and len(runs) != count:
        raise AssertionError(
            f"expected job {name} to have {count} run{'s' * (count != 1)}, found {len(runs)}:\n"
            + describe_runs(runs)
        )
    return runs


async def assert_scheduled(app: AsyncApp, job: JobRef, *, at: datetime) -> Job:
    """Assert that ``job`` next fires at ``at`` (timezone-aware): its earliest occurrence not
    fired yet (``Job.next_occurrence_at``, what "next fire" shows) is that instant; the job."""
    if at.tzinfo is None:
        raise ValueError(f"assert_scheduled needs a timezone-aware instant, got {at!r}")
    current = await app.get(_key(job))
    nxt = current.next_occurrence_at
    if nxt != at:
        fires = "fires no more" if nxt is None else f"next fires at {nxt.isoformat()}"
        raise AssertionError(
            f"expected job {current.name!r} to fire next at {at.isoformat()}; it {fires} "
            f"(status {current.status.value}). Its runs:\n"
            + describe_runs(await runs_of(app, current.id))
        )
    return current


# The *_sync forms run on App's private event-loop thread, which owns the store's connections.
def runs_of_sync(app: App, job: JobRef) -> list[Run]:
    """:func:`runs_of` for the blocking :class:`App`."""
    return app._call(lambda: runs_of(app.aio, job))


def assert_triggered_sync(app: App, job: JobRef, count: int | None = None) -> list[Run]:
    """:func:`assert_triggered` for the blocking :class:`App`."""
    return app._call(lambda: assert_triggered(app.aio, job, count))


def assert_scheduled_sync(app: App, job: JobRef, *, at: datetime) -> Job:
    """:func:`assert_scheduled` for the blocking :class:`App`."""
    return app._call(lambda: assert_scheduled(app.aio, job, at=at))


def _name(job: JobRef) -> str:
    return repr(job.name if isinstance(job, Job) else str(job))
