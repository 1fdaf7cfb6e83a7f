"""Helpers for the store conformance suite: params builders, test planners, and short paths to
a job, a scheduled run, a running run. Real stores only; time moves by passing ``now=``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime import _json
from duetime._types import (
    JSON,
    AttemptOutcome,
    DeliveryMode,
    Job,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    Run,
    RunState,
    Schedule,
    ScheduleKind,
)
from duetime.registration import upsert_job
from duetime.scheduler.materializer import MaterializeResult, Planner
from duetime.scheduler.materializer import materialize as materialize_batch
from duetime.store import Store
from duetime.store.base import (
    ClaimedRun,
    JobPlan,
    JobRef,
    JobUpsertParams,
    PlannedRun,
    PlannedSkip,
    RunCompletion,
    RunListParams,
    RunsClaimParams,
    RunsCompleteParams,
)

TENANT = "acme"
OTHER_TENANT = "globex"
TASK = "reports.build"
WORKER = "worker-1"
LEASE = 30.0
_DEFAULT: Any = object()


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def every_schedule(t0: datetime, seconds: float = 1.0) -> Schedule:
    return Schedule(kind=ScheduleKind.EVERY, every=s(seconds), anchor=t0)


def job_params(
    name: str = "job",
    *,
    next_fire_at: datetime | None,
    tenant: str = TENANT,
    task: str = TASK,
    schedule: Schedule | None = None,
    payload: JSON = _DEFAULT,
    priority: int = 0,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,
    delivery: DeliveryMode = DeliveryMode.AT_LEAST_ONCE,
    queue: str = "default",
    tags: Sequence[str] = (),
    metadata: dict[str, JSON] | None = None,
    partition: int = 0,
    create_only: bool = False,
    job_id: uuid.UUID | None = None,
    misfire_policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE,
    misfire_grace: float = 60.0,
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW,
) -> JobUpsertParams:
    """Upsert params; the schedule defaults to ``every 1 s`` anchored at ``next_fire_at`` and
    re-declaring it keeps a stored schedule only when equal."""
    if schedule is None:
        anchor = next_fire_at or datetime(2024, 1, 1, tzinfo=UTC)
        schedule = every_schedule(anchor)
    sched = schedule
    return JobUpsertParams(
        tenant=tenant,
        name=name,
        task=task,
        payload=_json.dumps({"job": name} if payload is _DEFAULT else payload),
        schedule=sched,
        next_fire_at=next_fire_at,
        priority=priority,
        retry=retry or RetryPolicy(),
        timeout=timeout,
        misfire_policy=misfire_policy,
        misfire_grace=misfire_grace,
        overlap_policy=overlap_policy,
        delivery=delivery,
        queue=queue,
        tags=tuple(tags),
        metadata={} if metadata is None else metadata,
        partition=partition,
        create_only=create_only,
        **({} if job_id is None else {"job_id": job_id}),
    )


async def make_job(store: Store, name: str = "job", **kwargs: Any) -> Job:
    job, created = await upsert(store, job_params(name, **kwargs))
    assert created
    return job


# --- planners ------------------------------------------------------------------------------


def one_run_planner(job: Job, now: datetime, until: datetime) -> JobPlan:
    """One run at the job's ``next_fire_at``; the next one 1 s later (None for a one-shot)."""
    assert job.next_fire_at is not None
    at = job.next_fire_at
    return JobPlan(
        runs=[PlannedRun(scheduled_for=at, available_at=at)],
        skips=[],
        next_fire_at=None if job.schedule.one_shot else at + s(1),
    )


def fill_planner(step: float = 1.0) -> Planner:
    """Every instant ``next_fire_at + k*step`` up to the horizon end; the next after it."""

    def plan(job: Job, now: datetime, until: datetime) -> JobPlan:
        assert job.next_fire_at is not None
        runs: list[PlannedRun] = []
        at = job.next_fire_at
        while at <= until:
            runs.append(PlannedRun(scheduled_for=at, available_at=at))
            at += s(step)
        return JobPlan(runs=runs, skips=[], next_fire_at=at)

    return plan


def stuck_planner(job: Job, now: datetime, until: datetime) -> JobPlan:
    """Plans the run at ``next_fire_at`` but never advances it: every call plans it again, so
    only the database's uniqueness stops duplicates."""
    assert job.next_fire_at is not None
    at = job.next_fire_at
    return JobPlan([PlannedRun(at, at)], [], at)


def skip_planner(skips: Sequence[PlannedSkip], next_fire_at: datetime | None) -> Planner:
    def plan(job: Job, now: datetime, until: datetime) -> JobPlan:
        return JobPlan(runs=[], skips=list(skips), next_fire_at=next_fire_at)

    return plan


async def materialize(
    store: Store,
    now: datetime,
    *,
    planner: Planner = one_run_planner,
    horizon: float = 0.0,
    limit: int = 500,
    partitions: tuple[int, int] | None = None,
    owner: str | None = None,
) -> MaterializeResult:
    return await materialize_batch(
        store,
        planner,
        horizon=horizon,
        limit=limit,
        now=now,
        partitions=partitions,
        owner=owner,
    )


async def upsert(store: Store, params: JobUpsertParams) -> tuple[Job, bool]:
    """Create or update a job as registration does (one store transaction)."""
    return await upsert_job(store, params)


# --- runs ----------------------------------------------------------------------------------


async def list_runs(
    store: Store,
    *,
    tenant: str = TENANT,
    job_id: uuid.UUID | None = None,
    state: RunState | None = None,
) -> list[Run]:
    """Every run (all pages), newest scheduled_for first."""
    runs: list[Run] = []
    before = None
    while True:
        page = await store.runs_list(
            RunListParams(tenant=tenant, job_id=job_id, state=state, limit=100, before=before)
        )
        runs.extend(page.items)
        if page.next_cursor is None:
            return runs
        before = (page.items[-1].scheduled_for, page.items[-1].id)


async def scheduled_run(store: Store, at: datetime, name: str = "job", **job_kwargs: Any) -> Run:
    """A job whose one run (scheduled, due at ``at``) has been materialized."""
    job = await make_job(store, name, next_fire_at=at, **job_kwargs)

    def only_this_job(due: Job, now: datetime, until: datetime) -> JobPlan:
        if due.id != job.id:  # other due jobs of the test are left as they are
            return JobPlan([], [], due.next_fire_at)
        return one_run_planner(due, now, until)

    result = await materialize(store, at, planner=only_this_job)
    assert result.runs_created == 1
    runs = await list_runs(store, job_id=job.id, tenant=job.tenant)
    assert len(runs) == 1
    return runs[0]


async def claim(
    store: Store,
    now: datetime,
    *,
    worker: str = WORKER,
    tasks: Sequence[str] = (TASK,),
    limit: int = 10,
    lease_ttl: float = LEASE,
    lookahead: float = 0.0,
) -> list[ClaimedRun]:
    return await store.runs_claim(
        RunsClaimParams(
            worker_id=worker,
            tasks=tasks,
            limit=limit,
            lease_ttl=lease_ttl,
            lookahead=lookahead,
            now=now,
        )
    )


async def claim_one(store: Store, now: datetime, **kwargs: Any) -> ClaimedRun:
    claimed = await claim(store, now, **kwargs)
    assert len(claimed) == 1, claimed
    return claimed[0]


async def running_run(
    store: Store, at: datetime, name: str = "job", *, worker: str = WORKER, **job_kwargs: Any
) -> ClaimedRun:
    """A run due at ``at``, claimed (and so started) at ``at`` by ``worker``."""
    run = await scheduled_run(store, at, name, **job_kwargs)
    claimed = await claim_one(store, at, worker=worker)
    assert claimed.run.id == run.id
    return claimed


async def dead_run(
    store: Store, at: datetime, name: str, *, tenant: str = TENANT, attempts: int = 1
) -> ClaimedRun:
    """A run that failed permanently on its ``attempts``-th attempt (one attempt record each)."""
    claimed = await running_run(
        store, at, name, tenant=tenant, retry=RetryPolicy(max_attempts=attempts)
    )
    for n in range(1, attempts):
        retry = completion(
            claimed,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.SCHEDULED,
            available_at=at + s(n),
        )
        assert await complete(store, at + s(n), retry) == [True]
        claimed = await claim_one(store, at + s(n))
    last = completion(
        claimed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD, reason="failed"
    )
    assert await complete(store, at + s(attempts), last) == [True]
    return claimed


def completion(
    claimed: ClaimedRun | Run,
    *,
    outcome: AttemptOutcome = AttemptOutcome.SUCCEEDED,
    next_state: RunState = RunState.SUCCEEDED,
    worker: str | None = None,
    token: int | None = None,
    **kwargs: Any,
) -> RunCompletion:
    run = claimed.run if isinstance(claimed, ClaimedRun) else claimed
    assert run.claimed_at is not None
    return RunCompletion(
        run_id=run.id,
        token=run.token if token is None else token,
        worker_id=worker or run.lease_owner or WORKER,
        attempt=run.attempt,
        claimed_at=run.claimed_at,
        started_at=run.started_at,
        outcome=outcome,
        next_state=next_state,
        **kwargs,
    )


def failed_attempt(
    claimed: ClaimedRun | Run,
    retry_at: datetime,
    error_class: str,
    error_message: str,
    **kwargs: Any,
) -> RunCompletion:
    """:func:`completion` of a failed attempt (``error_class``: ``error_message``) whose run is
    scheduled again, due at ``retry_at``."""
    return completion(
        claimed,
        outcome=AttemptOutcome.FAILED,
        next_state=RunState.SCHEDULED,
        available_at=retry_at,
        error_class=error_class,
        error_message=error_message,
        **kwargs,
    )


async def complete(store: Store, now: datetime, *completions: RunCompletion) -> list[bool]:
    return await store.runs_complete(RunsCompleteParams(completions=completions, now=now))


async def get_run(store: Store, run_id: uuid.UUID, tenant: str = TENANT) -> Run:
    return await store.run_get(tenant, run_id)


async def get_job(store: Store, job_id: uuid.UUID, tenant: str = TENANT) -> Job:
    return await store.job_get(JobRef(tenant=tenant, id=job_id))


def ref(job: Job) -> JobRef:
    return JobRef(tenant=job.tenant, id=job.id)


def is_utc(at: datetime | None) -> bool:
    return at is not None and at.utcoffset() == timedelta(0)


def without(run: Run, *fields: str) -> Run:
    """``run`` with ``fields`` blanked, to compare the rest."""
    return replace(run, **dict.fromkeys(fields))


async def job_with_runs(
    store: Store, t0: datetime, name: str, count: int, **overrides: object
) -> Job:
    """A job with ``count`` runs due at t0, t0+1 s, …"""
    params = replace(job_params(name, next_fire_at=t0), **overrides)  # type: ignore[arg-type]
    job, _ = await upsert(store, params)

    def only(due: Job, now: datetime, until: datetime):  # type: ignore[no-untyped-def]
        plan = fill_planner(1)(due, now, until)
        return plan if due.id == job.id else replace(plan, runs=[], next_fire_at=None)

    await materialize(store, t0, planner=only, horizon=count - 1)
    return job
