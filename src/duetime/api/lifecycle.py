"""A job's lifecycle over REST (decision 0023): ``GET /jobs/{id}/history``, ``PUT
/jobs/{id}/pause-on-failure`` and ``POST /jobs/sync`` (declared jobs kept in sync: a dry run
unless ``dry_run`` is false)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

from duetime._types import JobEvent
from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.jobs import _arguments, _default_retry
from duetime.api.params import JobId, Limit, job_key
from duetime.api.schemas import JobCreate, JobOut
from duetime.app import SyncPlan
from duetime.registration import JobSpec


class JobEventOut(BaseModel):
    id: int
    kind: str = Field(
        description="paused, pause_changed, resumed, auto_resumed, paused_on_failure, "
        "retired, redeclared, cancelled."
    )
    actor: str = Field(description="Who made the change (`duetime`: duetime by itself).")
    at: datetime
    detail: dict[str, Any] = Field(description="A pause's `by`, `note` and `until`.")

    @classmethod
    def of(cls, event: JobEvent) -> JobEventOut:
        return cls(
            id=event.id, kind=event.kind, actor=event.actor, at=event.at, detail=event.detail
        )


class JobHistory(BaseModel):
    items: list[JobEventOut]


class GetJobHistory(Endpoint):
    """A job's lifecycle history
    Newest first: pauses with their notes, resumes, pauses on failure, retirements by a sync.
    `before` (an event id) pages back."""

    method, path, tag = "GET", "/jobs/{job_id}/history", "jobs"
    errors = (404, 422)

    async def handle(
        self,
        job_id: JobId,
        caller: Viewer,
        limit: Limit = 50,
        before: Annotated[int | None, Query(ge=1)] = None,
    ) -> JobHistory:
        events = await caller.reads.job_history(job_key(job_id), limit=limit, before=before)
        return JobHistory(items=[JobEventOut.of(e) for e in events])


class PauseOnFailureIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    after: int | None = Field(
        description="Pause the job after this many consecutive dead runs; null: never.",
        ge=1,
        le=1000,
        strict=True,
    )


class SetPauseOnFailure(Endpoint):
    """Set a job's pause on failure
    After `after` consecutive dead runs the leader pauses the job (by `duetime`, with a note)
    and raises a `job_paused_on_failure` alert; resuming it starts the count again."""

    method, path, tag = "PUT", "/jobs/{job_id}/pause-on-failure", "jobs"
    errors = (404, 422)

    async def handle(self, job_id: JobId, body: PauseOnFailureIn, caller: Operator) -> JobOut:
        return JobOut.of(await caller.app.pause_on_failure(job_key(job_id), body.after))


class SyncIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[JobCreate] = Field(max_length=10_000, description="Every job the program declares.")
    source: str = Field(
        "default",
        min_length=1,
        max_length=200,
        description="The declaring program: only its own jobs are ever retired.",
    )
    retire: Literal["pause", "delete"] = Field(
        "pause", description="What becomes of this source's jobs no longer declared."
    )
    dry_run: bool = Field(True, strict=True, description="Only return the plan (the default).")


class SyncOut(BaseModel):
    source: str
    create: list[str]
    update: list[str]
    adopt: list[str] = Field(description="Existing jobs that become this source's.")
    retire: list[str]
    retire_by: Literal["pause", "delete"]
    dry_run: bool

    @classmethod
    def of(cls, plan: SyncPlan) -> SyncOut:
        return cls(
            source=plan.source,
            create=plan.create,
            update=plan.update,
            adopt=plan.adopt,
            retire=plan.retire,
            retire_by=plan.retire_by,
            dry_run=plan.dry_run,
        )


class SyncDeclaredJobs(Endpoint):
    """Keep declared jobs in sync
    Creates or updates each declared job and retires (pauses or deletes) this `source`'s jobs
    no longer declared; jobs made any other way are never touched. A dry run (the default)
    writes nothing and returns the plan."""

    method, path, tag = "POST", "/jobs/sync", "jobs"
    errors = (409, 422)

    async def handle(self, body: SyncIn, caller: Operator) -> SyncOut:
        app = caller.app
        now, retry = app.clock.now(), _default_retry(app)
        specs = [
            JobSpec(name=job.name, **_arguments(job, job.model_fields_set, now=now, retry=retry))
            for job in body.jobs
        ]
        allow = any(job.allow_unregistered for job in body.jobs)
        plan = await app.sync(
            specs,
            source=body.source,
            retire=body.retire,
            dry_run=body.dry_run,
            allow_unregistered=allow,
        )
        return SyncOut.of(plan)


ENDPOINTS: tuple[type[Endpoint], ...] = (GetJobHistory, SetPauseOnFailure, SyncDeclaredJobs)
