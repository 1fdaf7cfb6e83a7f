"""``/api/v1/calendars`` (a tenant's exclusion calendars) and ``/api/v1/jobs/{id}/backfill``
(materialize a past range of a job; its progress)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from duetime._types import StoredCalendar
from duetime.api.auth import Admin, Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import JobId, job_key
from duetime.api.schemas import utc

CalendarName = Annotated[
    str, Path(min_length=1, max_length=64, description="The calendar's name in the tenant.")
]


class CalendarIn(BaseModel):
    """A calendar's rules (the whole list) and description."""

    model_config = ConfigDict(extra="forbid")

    rules: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=1000,
        description='Each one of: `{"date": "2026-12-25"}`, `{"from": "2026-12-24", "to": '
        '"2027-01-01"}` (days included), `{"weekdays": ["sat", "sun"]}`, `{"cron": "* 0-5 * * '
        '*"}` (the wall-clock minutes it matches), `{"holidays": "US", "subdiv": "CA"}` '
        "(public holidays, from the `holidays` package). Read on the job's zone.",
    )
    description: str = Field("", max_length=500)


class CalendarOut(BaseModel):
    tenant: str
    name: str
    rules: list[dict[str, Any]]
    description: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, calendar: StoredCalendar) -> CalendarOut:
        return cls(
            tenant=calendar.tenant,
            name=calendar.name,
            rules=calendar.rules,
            description=calendar.description,
            created_at=calendar.created_at,
            updated_at=calendar.updated_at,
        )


class ListCalendars(Endpoint):
    """List calendars
    The tenant's exclusion calendars, by name."""

    method, path, tag = "GET", "/calendars", "calendars"

    async def handle(self, caller: Viewer) -> list[CalendarOut]:
        return [CalendarOut.of(c) for c in await caller.app.calendars.find()]


class GetCalendar(Endpoint):
    """Get a calendar"""

    method, path, tag = "GET", "/calendars/{name}", "calendars"
    errors = (404, 422)

    async def handle(self, name: CalendarName, caller: Viewer) -> CalendarOut:
        return CalendarOut.of(await caller.app.calendars.get(name))


class PutCalendar(Endpoint):
    """Create or replace a calendar
    Idempotent. A bad rule is 422 naming it (`rules[1].weekdays`); jobs that name the calendar
    follow the new rules from the scheduler's next tick."""

    method, path, tag = "PUT", "/calendars/{name}", "calendars"
    errors = (422,)

    async def handle(self, name: CalendarName, body: CalendarIn, caller: Admin) -> CalendarOut:
        return CalendarOut.of(
            await caller.app.calendars.set(name, body.rules, description=body.description)
        )


class DeleteCalendar(Endpoint):
    """Delete a calendar
    409 while a job names it (the jobs are named)."""

    method, path, tag, status_code = "DELETE", "/calendars/{name}", "calendars", 204
    errors = (404, 409, 422)

    async def handle(self, name: CalendarName, caller: Admin) -> None:
        await caller.app.calendars.delete(name)


class BackfillIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: datetime = Field(alias="from", description="First instant of the range (with offset).")
    end: datetime = Field(alias="to", description="Last instant (included, not in the future).")
    dry_run: bool = Field(False, description="Create nothing; list what would run.")
    yes: bool = Field(False, description="Confirm a range longer than a year.")


class BackfillOccurrenceOut(BaseModel):
    scheduled_for: datetime
    available_at: datetime | None = Field(description="When it runs (a shift may move it).")
    skipped_by: str | None = Field(description="The calendar that excludes it (null: runs).")


class BackfillOut(BaseModel):
    job_id: uuid.UUID
    job: str
    start: datetime = Field(serialization_alias="from")
    end: datetime = Field(serialization_alias="to")
    dry_run: bool
    occurrences: int = Field(description="Occurrences in the range.")
    created: int = Field(description="Runs created (dry run: that would be).")
    existing: int = Field(description="Occurrences that already had a run (left alone).")
    skipped: int = Field(description="Occurrences the job's calendars exclude.")
    runs: list[BackfillOccurrenceOut] = Field(description="Dry run: what would run (≤ 1000).")
    skips: list[BackfillOccurrenceOut] = Field(description="Dry run: what calendars skip.")
    warning: str | None = Field(
        default=None, description="Set when the job's overlap policy will skip some runs."
    )


class BackfillProgressOut(BaseModel):
    job_id: uuid.UUID
    job: str
    states: dict[str, int] = Field(description="The job's backfilled runs by state.")
    total: int
    finished: int = Field(description="Those no longer scheduled or running.")


def _occurrence(o: Any) -> BackfillOccurrenceOut:
    return BackfillOccurrenceOut(
        scheduled_for=o.scheduled_for, available_at=o.available_at, skipped_by=o.skipped_by
    )


class BackfillJob(Endpoint):
    """Backfill a job
    Creates a run (origin `backfill`, never misfired) for every occurrence of the past range
    `from`…`to` that has none, through the job's calendars, released at
    `DUETIME_BACKFILL_RATE` runs per second: the same request twice creates nothing new. A
    range longer than a year needs `"yes": true` (422 otherwise); over the tenant's
    `max_backfill_runs` is 422 and creates nothing. `GET` on the same path follows progress."""

    method, path, tag = "POST", "/jobs/{job_id}/backfill", "jobs"
    errors = (404, 422)

    async def handle(self, job_id: JobId, body: BackfillIn, caller: Operator) -> BackfillOut:
        result = await caller.app.jobs.backfill(
            job_key(job_id),
            utc(body.start, "from"),
            utc(body.end, "to"),
            dry_run=body.dry_run,
            yes=body.yes,
        )
        return BackfillOut(
            job_id=result.job_id,
            job=result.job,
            start=result.since,
            end=result.until,
            dry_run=result.dry_run,
            occurrences=result.occurrences,
            created=result.created,
            existing=result.existing,
            skipped=result.skipped,
            runs=[_occurrence(o) for o in result.runs],
            skips=[_occurrence(o) for o in result.skips],
            warning=result.warning,
        )


class BackfillProgressOf(Endpoint):
    """A job's backfill progress
    Its backfilled runs by state (as long as history keeps them)."""

    method, path, tag = "GET", "/jobs/{job_id}/backfill", "jobs"
    errors = (404,)

    async def handle(self, job_id: JobId, caller: Viewer) -> BackfillProgressOut:
        progress = await caller.app.jobs.backfill_progress(job_key(job_id))
        return BackfillProgressOut(
            job_id=progress.job_id,
            job=progress.job,
            states=progress.states,
            total=progress.total,
            finished=progress.finished,
        )


TAG = {"name": "calendars", "description": "Exclusion calendars jobs name (issue 24)."}

ENDPOINTS: tuple[type[Endpoint], ...] = (
    ListCalendars,
    GetCalendar,
    PutCalendar,
    DeleteCalendar,
    BackfillJob,
    BackfillProgressOf,
)
