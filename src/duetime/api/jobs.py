"""``/api/v1/jobs``: create, list, read, change, delete, pause, resume, cancel, trigger."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, cast

from fastapi import Body, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from duetime._types import JobStatus, RetryPolicy, RunState
from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import Cursor, IdempotencyKey, JobId, Limit, job_key
from duetime.api.schemas import (
    NO_NUL,
    JobCreate,
    JobFields,
    JobOut,
    JobPage,
    JobPatch,
    RunOut,
    RunPage,
    TriggerIn,
    parse_at,
    parse_every,
    utc,
)
from duetime.app import AsyncApp
from duetime.registration import JobChanges

_NOT_PASSED = {"name", "allow_unregistered"}


def _default_retry(app: AsyncApp) -> RetryPolicy:
    s = app.settings
    return RetryPolicy(s.max_attempts, s.backoff_base, s.backoff_factor, s.backoff_cap)


def _arguments(
    body: JobFields, names: set[str], *, now: datetime, retry: RetryPolicy | None = None
) -> dict[str, Any]:
    """The given ``names`` of ``body`` as ``app.schedule`` arguments (a retry policy filled
    in from ``retry``), or ``app.update_job`` ones (no ``retry``: its given fields, merged
    onto the job's policy)."""
    out: dict[str, Any] = {}
    for name in names - _NOT_PASSED:
        value = getattr(body, name)
        if value is None:
            out[name] = False if name == "now" else None
        elif name == "at":
            out[name] = parse_at(value, now)
        elif name == "every":
            out[name] = parse_every(value)
        elif name in ("anchor", "start_at", "end_at"):
            out[name] = utc(value, name)
        elif name == "retry":
            out[name] = value.changes() if retry is None else value.policy(retry)
        elif name == "tags":
            out[name] = tuple(value)
        else:
            out[name] = value
    return out


class CreateJob(Endpoint):
    """Create a job
    The body mirrors `app.schedule`: `name`, `task` (or `target`), exactly one of `cron`, `at`,
    `every` or `now`, and optional policies. A name the tenant already uses is 409 (PATCH
    changes a job)."""

    method, path, tag, status_code = "POST", "/jobs", "jobs", 201
    errors = (409, 422)

    async def handle(self, body: JobCreate, caller: Operator) -> JobOut:
        app = caller.app
        arguments = _arguments(
            body, body.model_fields_set, now=app.clock.now(), retry=_default_retry(app)
        )
        job = await app.schedule(
            body.name,
            **arguments,
            allow_unregistered=body.allow_unregistered,
            create_only=True,
        )
        return JobOut.of(job)


class ListJobs(Endpoint):
    """List jobs
    By name, a page at a time (`next_cursor`); filter by status, name prefix or tag."""

    method, path, tag = "GET", "/jobs", "jobs"
    errors = (422,)

    async def handle(
        self,
        caller: Viewer,
        status: JobStatus | None = None,
        name_prefix: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
        tag: Annotated[str | None, Query(max_length=100, pattern=NO_NUL)] = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> JobPage:
        page = await caller.app.jobs.find(
            status=status, name_prefix=name_prefix, tag=tag, limit=limit, cursor=cursor
        )
        return JobPage.of(page, JobOut.of)


class GetJob(Endpoint):
    """Get a job"""

    method, path, tag = "GET", "/jobs/{job_id}", "jobs"
    errors = (404,)

    async def handle(self, job_id: JobId, caller: Viewer) -> JobOut:
        return JobOut.of(await caller.app.get(job_key(job_id)))


class UpdateJob(Endpoint):
    """Change a job
    Omitted fields keep their values; giving any of `cron`, `at`, `every` or `now` replaces
    the schedule (its not-yet-started runs are skipped). A partial `retry` is merged onto the
    job's policy. Atomic: the job is locked, merged, validated and written in one transaction,
    so concurrent changes of different fields all survive. The name cannot change."""

    method, path, tag = "PATCH", "/jobs/{job_id}", "jobs"
    errors = (404, 409, 422)

    async def handle(self, job_id: JobId, body: JobPatch, caller: Operator) -> JobOut:
        app = caller.app
        changes = _arguments(body, set(body.model_fields_set), now=app.clock.now())
        job = await app.update_job(
            job_key(job_id),
            allow_unregistered=body.allow_unregistered,
            **cast(JobChanges, changes),
        )
        return JobOut.of(job)


class DeleteJob(Endpoint):
    """Delete a job
    With its runs and their history."""

    method, path, tag, status_code = "DELETE", "/jobs/{job_id}", "jobs", 204
    errors = (404,)

    async def handle(self, job_id: JobId, caller: Operator) -> None:
        await caller.app.delete(job_key(job_id))


class PauseIn(BaseModel):
    """A pause's note (all optional): why, who, and when the job resumes by itself."""

    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(None, max_length=1000, description="Why it is paused.")
    by: str | None = Field(
        None, max_length=1000, description="Who paused it (default: the API key's actor)."
    )
    until: datetime | None = Field(
        None, description="Resume by itself at this instant (with a UTC offset, in the future)."
    )


class PauseJob(Endpoint):
    """Pause a job
    Its not-yet-started runs are skipped; manual triggers still run. A cancelled or completed
    job cannot be paused (409). The optional body notes why, who and until when (the leader
    resumes it then); pausing a paused job with a body replaces its note."""

    method, path, tag = "POST", "/jobs/{job_id}/pause", "jobs"
    errors = (404, 409, 422)

    async def handle(self, job_id: JobId, caller: Operator, body: PauseIn | None = None) -> JobOut:
        note = body or PauseIn(note=None, by=None, until=None)
        return JobOut.of(
            await caller.app.pause(job_key(job_id), note=note.note, by=note.by, until=note.until)
        )


class ResumeJob(Endpoint):
    """Resume a paused job
    It picks up at its next occurrence after now."""

    method, path, tag = "POST", "/jobs/{job_id}/resume", "jobs"
    errors = (404, 409)

    async def handle(self, job_id: JobId, caller: Operator) -> JobOut:
        return JobOut.of(await caller.app.resume(job_key(job_id)))


class CancelJob(Endpoint):
    """Cancel a job
    For good: its pending runs are cancelled and it never fires again."""

    method, path, tag = "POST", "/jobs/{job_id}/cancel", "jobs"
    errors = (404, 409)

    async def handle(self, job_id: JobId, caller: Operator) -> JobOut:
        return JobOut.of(await caller.app.cancel(job_key(job_id)))


class TriggerJob(Endpoint):
    """Trigger a run now
    Works on a paused job, not on a cancelled one (409). With `Idempotency-Key` the first call
    creates the run (201) and a repeat answers 200 with the same run; the same key with a
    different body is 409."""

    method, path, tag, status_code = "POST", "/jobs/{job_id}/trigger", "jobs", 201
    errors = (404, 409, 422)
    responses: ClassVar[dict[int | str, dict[str, Any]]] = {
        200: {"model": RunOut, "description": "The run an earlier call made."}
    }

    async def handle(
        self,
        job_id: JobId,
        caller: Operator,
        response: Response,
        idempotency_key: IdempotencyKey = None,
        body: Annotated[TriggerIn | None, Body()] = None,
    ) -> RunOut:
        run, created = await caller.app.trigger_run(
            job_key(job_id),
            idempotency_key=idempotency_key,
            payload=None if body is None else body.payload,
            priority=None if body is None else body.priority,
        )
        if not created:
            response.status_code = 200
        return RunOut.of(run)


class ListJobRuns(Endpoint):
    """List a job's runs
    Newest scheduled instant first."""

    method, path, tag = "GET", "/jobs/{job_id}/runs", "jobs"
    errors = (404, 422)

    async def handle(
        self,
        job_id: JobId,
        caller: Viewer,
        state: RunState | None = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> RunPage:
        page = await caller.reads.runs(job_key(job_id), state=state, limit=limit, cursor=cursor)
        return RunPage.of(page, RunOut.of)


ENDPOINTS: tuple[type[Endpoint], ...] = (
    CreateJob,
    ListJobs,
    GetJob,
    UpdateJob,
    DeleteJob,
    PauseJob,
    ResumeJob,
    CancelJob,
    TriggerJob,
    ListJobRuns,
)
