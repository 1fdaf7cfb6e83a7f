"""A job's lifecycle beyond pause/resume (decision 0023): its history, pause on failure, and
declared jobs kept in sync (``app.sync``); and the leader's lifecycle pass, which ends pauses
whose ``until`` has come and pauses jobs after their N-th consecutive dead run.

``sync`` touches only jobs its ``source`` declared (``jobs.declared_source``): jobs created
by ``app.schedule``, the CLI, the REST API or another source are never retired by it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from duetime._types import Job, JobEvent, JobPause, JobStatus
from duetime.app._service import (
    Scope,
    Service,
    check_task,
    check_workflow,
    job_ref,
)
from duetime.app.audit import audited
from duetime.app.bulk import spec_from_mapping
from duetime.app.jobs import Jobs
from duetime.app.reads import Reads
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.registration import JobSpec, build_upsert
from duetime.store.base import JobSetStatusParams, LeaderFence, Store

__all__ = ["FAILURE_ACTOR", "Lifecycle", "LifecyclePass", "SyncPlan"]

log = logging.getLogger("duetime.lifecycle")

FAILURE_ACTOR = "duetime"
"""Who the history and the pause note name for what duetime did by itself."""
PASS_BATCH = 100
LIFECYCLE_INTERVAL = 5.0
"""Seconds between the leader's lifecycle passes: how late a pause may end, or a job
pause after its N-th dead run (decision 0023)."""


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What :meth:`Lifecycle.sync` does (or, in a dry run, would do), names sorted."""

    source: str
    create: list[str] = field(default_factory=list)
    """Declared, no such job yet."""
    update: list[str] = field(default_factory=list)
    """Declared and already declared by this source (written again: unchanged ones keep
    their schedule and status; a job this sync had retired by pausing is resumed)."""
    adopt: list[str] = field(default_factory=list)
    """Declared, and a job of that name exists that this source did not declare: it becomes
    this source's."""
    retire: list[str] = field(default_factory=list)
    """This source's jobs no longer declared: paused (``retire="pause"``) or deleted."""
    retire_by: Literal["pause", "delete"] = "pause"
    dry_run: bool = True


def _sync_actor(source: str) -> str:
    return f"sync:{source}"


class Lifecycle(Service):
    """History, pause on failure and declared-jobs sync, for the scope's tenant."""

    __slots__ = ("_jobs",)

    def __init__(self, scope: Scope, jobs: Jobs) -> None:
        super().__init__(scope)
        self._jobs = jobs

    async def history(
        self, job: str | uuid.UUID, *, limit: int = 50, before: int | None = None
    ) -> list[JobEvent]:
        """The job's lifecycle events, newest first (pauses with their notes, resumes —
        ``auto_resumed`` when its pause ended —, ``paused_on_failure``, ``retired``, …);
        ``before`` an event id pages back. NotFound for an unknown job."""
        return await Reads(self.store, self.tenant).job_history(job, limit=limit, before=before)

    async def pause_on_failure(self, job: str | uuid.UUID, after: int | None) -> Job:
        """Pause the job by itself after ``after`` consecutive dead runs (None: never): when
        its latest ``after`` finished runs (by occurrence) are all dead and finished since
        this call and its last resume, the leader's pass pauses it (note ``"paused after N
        consecutive dead runs"``, by ``duetime``) and a ``job_paused_on_failure`` alert stays
        open until it is resumed; a resume starts the count again."""
        if after is not None and (
            isinstance(after, bool) or not isinstance(after, int) or not 1 <= after <= 1000
        ):
            raise ValidationError("after", f"must be a whole number from 1 to 1000, got {after!r}")
        change = {"after": {"pause_after_dead": after}}
        with audited(self, "pause_on_failure_set", "job", name=job, change=change):
            return await self.store.job_pause_on_failure_set(job_ref(self.tenant, job), after)

    async def sync(
        self,
        jobs: Sequence[JobSpec | Mapping[str, Any]],
        *,
        source: str = "default",
        retire: Literal["pause", "delete"] = "pause",
        dry_run: bool = True,
        allow_unregistered: bool = False,
    ) -> SyncPlan:
        """Keep the jobs a program declares in sync: create or update each of ``jobs``
        (:class:`~duetime.registration.JobSpec` objects or mappings of their fields), mark
        them as declared by ``source``, and retire this source's jobs it no longer declares —
        paused (``retire="pause"``, note ``"no longer declared by <source>"``; resumed when
        declared again) or deleted. Every spec is validated before anything is written (a
        ValidationError names it: ``jobs[2].cron: …``); a dry run (the default) then returns
        the plan and writes nothing. Jobs not declared by ``source`` are never retired."""
        if not isinstance(source, str) or not source.strip() or len(source) > 200:
            raise ValidationError("source", f"must name the declaring program, got {source!r}")
        if retire not in ("pause", "delete"):
            raise ValidationError("retire", f"{retire!r} is not one of: pause, delete")
        specs = [j if isinstance(j, JobSpec) else spec_from_mapping(j) for j in jobs]
        names = [spec.name for spec in specs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValidationError("jobs", f"declared more than once: {', '.join(duplicates)}")
        for index, spec in enumerate(specs):
            await self._check(index, spec, allow_unregistered)
        plan = await self._plan(names, source, retire, dry_run)
        if dry_run:
            return plan
        for spec in specs:
            await self._jobs.schedule_spec(spec, allow_unregistered=allow_unregistered)
        change = {"after": {"source": source, "declared": len(names), "retire": plan.retire}}
        with audited(self, "synced", "jobs", name=source, change=change):
            await self.store.jobs_declare(self.tenant, source, names)
        for name in plan.update:
            await self._resume_retired(name, source)
        for name in plan.retire:
            await self._retire(name, source, retire)
        return plan

    async def _check(self, index: int, spec: JobSpec, allow_unregistered: bool) -> None:
        """Validate ``spec`` as registering it would, naming it by its place."""
        try:
            params = build_upsert(
                spec, tenant=self.tenant, settings=self.settings, now=self.clock.now()
            )
            await check_task(self._scope, params.task, allow_unregistered)
            await check_workflow(self._scope, params.target)
        except ValidationError as exc:
            raise ValidationError(f"jobs[{index}].{exc.field}", exc.reason) from None

    async def _plan(
        self, names: list[str], source: str, retire: Literal["pause", "delete"], dry_run: bool
    ) -> SyncPlan:
        declared = {j.name: j for j in await self.store.jobs_declared(self.tenant, source)}
        create, update, adopt = [], [], []
        for name in sorted(names):
            if name in declared:
                update.append(name)
                continue
            try:
                await self.store.job_get(job_ref(self.tenant, name))
            except NotFound:
                create.append(name)
            else:
                adopt.append(name)
        wanted = set(names)
        gone = [
            name
            for name, job in sorted(declared.items())
            if name not in wanted and (retire == "delete" or job.status is JobStatus.ACTIVE)
        ]
        return SyncPlan(source, create, update, adopt, gone, retire, dry_run)

    async def _retire(self, name: str, source: str, how: str) -> None:
        if how == "delete":
            await self._jobs.delete(name)
            return
        await self._jobs._set_status(
            name,
            JobStatus.PAUSED,
            pause=JobPause(by=_sync_actor(source), note=f"no longer declared by {source}"),
            actor=_sync_actor(source),
            event="retired",
        )

    async def _resume_retired(self, name: str, source: str) -> None:
        job = await self.store.job_get(job_ref(self.tenant, name))
        if job.pause is not None and job.pause.by == _sync_actor(source):
            await self._jobs._set_status(
                name, JobStatus.ACTIVE, actor=_sync_actor(source), event="redeclared"
            )


class LifecyclePass:
    """The leader's lifecycle duty (``run_once``, every few seconds, like River's
    maintenance services): resume jobs whose pause ended, pause jobs past their dead-run
    limit. Both go through the jobs service of the job's tenant (``jobs_for``), so a resume
    computes its next occurrence as an operator's would; both are guarded in the store (the
    pause's ``until`` unchanged; an active job), so two leaders in turn never double them."""

    def __init__(self, store: Store, jobs_for: Callable[[str], Jobs]) -> None:
        self.store = store
        self.jobs_for = jobs_for

    async def run_once(self, fence: LeaderFence | None = None) -> tuple[int, int]:
        """(jobs resumed, jobs paused on failure)."""
        resumed = paused = 0
        for job in await self.store.jobs_pause_due(limit=PASS_BATCH):
            done = await self.jobs_for(job.tenant)._resume_paused(job)
            resumed += done.status is not JobStatus.PAUSED
        for job, dead in await self.store.jobs_failing(limit=PASS_BATCH):
            note = f"paused after {dead} consecutive dead runs"
            try:
                changed = await self.store.job_set_status(
                    JobSetStatusParams(
                        job=job_ref(job.tenant, job.id),
                        status=JobStatus.PAUSED,
                        pause=JobPause(by=FAILURE_ACTOR, note=note),
                        actor=FAILURE_ACTOR,
                        event="paused_on_failure",
                    )
                )
            except (NotFound, Conflict):
                continue  # deleted or cancelled meanwhile
            if changed.pause is None or changed.pause.by != FAILURE_ACTOR:
                continue  # an operator paused it meanwhile: their note stays
            paused += 1
            log.warning(
                "job %r (tenant %s) %s",
                job.name,
                job.tenant,
                note,
                extra={"job_id": str(job.id), "tenant": job.tenant},
            )
        return resumed, paused
