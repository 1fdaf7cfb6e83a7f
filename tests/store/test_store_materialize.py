"""runs_materialize: due jobs, horizon, partitions, limit, skips, and no duplicate occurrence —
even with several schedulers at once."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime

from storekit import (
    OTHER_TENANT,
    TASK,
    TENANT,
    claim_one,
    fill_planner,
    get_job,
    is_utc,
    list_runs,
    make_job,
    materialize,
    one_run_planner,
    ref,
    s,
    skip_planner,
    stuck_planner,
)

from duetime._types import (
    DeliveryMode,
    Job,
    JobStatus,
    RetryPolicy,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
)
from duetime.errors import NotFound
from duetime.store import Store
from duetime.store.base import (
    JobPlan,
    JobSetStatusParams,
    PlannedRun,
    PlannedSkip,
)


async def test_creates_each_due_run_once(store: Store, t0: datetime) -> None:
    job = await make_job(
        store,
        "j",
        next_fire_at=t0,
        payload={"p": 1},
        priority=4,
        queue="q1",
        retry=RetryPolicy(max_attempts=4),
        timeout=9.0,
    )
    result = await materialize(store, t0)

    assert (result.jobs, result.runs_created, result.skips) == (1, 1, 0)
    assert result.now == t0
    (run,) = await list_runs(store, job_id=job.id)
    assert run.job_id == job.id
    assert (run.tenant, run.job_name, run.task, run.queue) == (TENANT, "j", TASK, "q1")
    assert run.payload == {"p": 1}
    assert run.scheduled_for == t0
    assert run.available_at == t0
    assert is_utc(run.scheduled_for)
    assert is_utc(run.available_at)
    assert is_utc(run.created_at)
    assert run.state is RunState.SCHEDULED
    assert run.priority == 4
    assert (run.attempt, run.max_attempts, run.replays) == (0, 4, 0)
    assert run.trigger is RunTrigger.SCHEDULE
    assert run.lease_owner is None
    assert run.lease_expires_at is None
    assert run.started_at is None
    assert run.finished_at is None
    assert (await get_job(store, job.id)).next_fire_at == t0 + s(1)

    again = await materialize(store, t0)  # next_fire_at moved past the horizon
    assert (again.jobs, again.runs_created) == (0, 0)
    assert len(await list_runs(store, job_id=job.id)) == 1


async def test_existing_occurrences_are_left_alone(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    first = await materialize(store, t0, planner=stuck_planner)
    assert first.runs_created == 1
    claimed = await claim_one(store, t0)

    for _ in range(3):
        result = await materialize(store, t0, planner=stuck_planner)
        assert result.jobs == 1
        assert result.runs_created == 0
    (run,) = await list_runs(store, job_id=job.id)
    assert run.id == claimed.run.id
    assert run.state is RunState.RUNNING
    assert run.token == claimed.run.token
    assert run.lease_owner == claimed.run.lease_owner


async def test_horizon_is_inclusive_and_respected(store: Store, t0: datetime) -> None:
    inside = await make_job(store, "inside", next_fire_at=t0 + s(10))
    edge = await make_job(store, "edge", next_fire_at=t0 + s(10))
    outside = await make_job(store, "outside", next_fire_at=t0 + s(10.000001))
    seen: list[tuple[str, datetime, datetime]] = []

    def planner(job: Job, now: datetime, until: datetime) -> JobPlan:
        seen.append((job.name, now, until))
        return one_run_planner(job, now, until)

    result = await materialize(store, t0, planner=planner, horizon=10)

    assert result.jobs == 2
    assert result.runs_created == 2
    assert sorted(name for name, _, _ in seen) == ["edge", "inside"]
    assert all(now == t0 and until == t0 + s(10) for _, now, until in seen)
    assert len(await list_runs(store, job_id=inside.id)) == 1
    assert len(await list_runs(store, job_id=edge.id)) == 1
    assert await list_runs(store, job_id=outside.id) == []


async def test_horizon_fills_every_instant(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    result = await materialize(store, t0, planner=fill_planner(2), horizon=9)
    assert result.runs_created == 5  # t0, +2, +4, +6, +8
    runs = await list_runs(store, job_id=job.id)
    assert sorted(r.scheduled_for for r in runs) == [t0 + s(k) for k in (0, 2, 4, 6, 8)]
    assert (await get_job(store, job.id)).next_fire_at == t0 + s(10)


async def test_only_active_jobs_with_a_next_fire_at_are_materialized(
    store: Store, t0: datetime
) -> None:
    active = await make_job(store, "active", next_fire_at=t0)
    paused = await make_job(store, "paused", next_fire_at=t0)
    cancelled = await make_job(store, "cancelled", next_fire_at=t0)
    idle = await make_job(store, "idle", next_fire_at=None)
    await store.job_set_status(JobSetStatusParams(ref(paused), JobStatus.PAUSED, now=t0))
    await store.job_set_status(JobSetStatusParams(ref(cancelled), JobStatus.CANCELLED, now=t0))
    seen: list[str] = []

    def planner(job: Job, now: datetime, until: datetime) -> JobPlan:
        seen.append(job.name)
        return one_run_planner(job, now, until)

    result = await materialize(store, t0 + s(5), planner=planner, horizon=60)

    assert seen == ["active"]
    assert result.jobs == 1
    for job in (paused, cancelled, idle):
        assert await list_runs(store, job_id=job.id) == []
    assert len(await list_runs(store, job_id=active.id)) == 1


async def test_partitions_are_an_inclusive_range(store: Store, t0: datetime) -> None:
    jobs = {
        p: await make_job(store, f"p{p}", next_fire_at=t0, partition=p)
        for p in (0, 4, 5, 9, 10, 11, 255)
    }
    result = await materialize(store, t0, partitions=(5, 10))
    assert result.jobs == 3
    with_runs = {p for p, job in jobs.items() if await list_runs(store, job_id=job.id)}
    assert with_runs == {5, 9, 10}

    rest = await materialize(store, t0)  # None = every partition
    assert rest.jobs == 4
    for job in jobs.values():
        assert len(await list_runs(store, job_id=job.id)) == 1


async def test_limit_caps_the_jobs_per_call(store: Store, t0: datetime) -> None:
    for i in range(5):
        await make_job(store, f"j{i}", next_fire_at=t0 + s(i))

    def once(job: Job, now: datetime, until: datetime) -> JobPlan:
        assert job.next_fire_at is not None
        return JobPlan([PlannedRun(job.next_fire_at, job.next_fire_at)], [], None)

    counts = [(await materialize(store, t0 + s(10), planner=once, limit=2)).jobs for _ in range(4)]
    assert counts == [2, 2, 1, 0]
    assert len(await list_runs(store)) == 5


async def test_next_fire_at_none_ends_the_schedule(store: Store, t0: datetime) -> None:
    at = t0 + s(3)
    job = await make_job(
        store, "once", next_fire_at=at, schedule=Schedule(kind=ScheduleKind.AT, at=at)
    )
    result = await materialize(store, t0, horizon=5)
    assert result.runs_created == 1
    assert (await get_job(store, job.id)).next_fire_at is None
    assert (await materialize(store, t0 + s(3600), horizon=5)).jobs == 0
    (run,) = await list_runs(store, job_id=job.id)
    assert run.scheduled_for == at


async def test_skips_are_recorded_and_listed(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0 - s(3600))
    skips = [
        PlannedSkip(first=t0 - s(600), last=t0 - s(60), count=10, reason="misfire"),
        PlannedSkip(first=t0 - s(3600), last=t0 - s(3600), count=1, reason="overlap"),
    ]
    result = await materialize(store, t0, planner=skip_planner(skips, t0 + s(60)))

    assert (result.jobs, result.runs_created, result.skips) == (1, 0, 2)
    listed = await store.skips_list(TENANT, job.id)
    assert listed == sorted(skips, key=lambda k: k.first)
    assert all(is_utc(k.first) and is_utc(k.last) for k in listed)
    assert (await get_job(store, job.id)).next_fire_at == t0 + s(60)
    assert await list_runs(store, job_id=job.id) == []


async def test_skips_are_per_job_and_per_tenant(store: Store, t0: datetime) -> None:
    a = await make_job(store, "a", next_fire_at=t0)
    b = await make_job(store, "b", next_fire_at=t0, tenant=OTHER_TENANT)
    skip = PlannedSkip(first=t0, last=t0, count=1, reason="misfire")
    await materialize(store, t0, planner=skip_planner([skip], None))
    assert await store.skips_list(TENANT, a.id) == [skip]
    assert await store.skips_list(OTHER_TENANT, b.id) == [skip]
    try:  # not another tenant's: an empty list, or NotFound
        foreign = await store.skips_list(OTHER_TENANT, a.id)
    except NotFound:
        foreign = []
    assert foreign == []


async def test_runs_and_skips_in_one_plan(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0 - s(10))

    def planner(job: Job, now: datetime, until: datetime) -> JobPlan:
        return JobPlan(
            runs=[PlannedRun(now, now)],
            skips=[PlannedSkip(t0 - s(10), t0 - s(1), 10, "misfire")],
            next_fire_at=now + s(1),
        )

    result = await materialize(store, t0, planner=planner)
    assert (result.runs_created, result.skips) == (1, 1)
    assert [r.scheduled_for for r in await list_runs(store, job_id=job.id)] == [t0]
    assert [k.count for k in await store.skips_list(TENANT, job.id)] == [10]


async def test_planned_available_at_is_kept(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)

    def planner(job: Job, now: datetime, until: datetime) -> JobPlan:
        return JobPlan([PlannedRun(t0, t0 + s(7))], [], None)

    await materialize(store, t0, planner=planner)
    (run,) = await list_runs(store, job_id=job.id)
    assert (run.scheduled_for, run.available_at) == (t0, t0 + s(7))


async def test_runs_copy_the_jobs_policies(store: Store, t0: datetime) -> None:
    at = t0
    await make_job(
        store,
        "once",
        next_fire_at=at,
        schedule=Schedule(kind=ScheduleKind.AT, at=at),
        retry=RetryPolicy(max_attempts=6, backoff_base=2, backoff_factor=4, backoff_cap=77),
        timeout=3.5,
        delivery=DeliveryMode.AT_MOST_ONCE,
    )
    await materialize(store, at)
    claimed = await claim_one(store, at)
    assert claimed.retry == RetryPolicy(6, 2, 4, 77)
    assert claimed.timeout == 3.5
    assert claimed.delivery is DeliveryMode.AT_MOST_ONCE
    assert claimed.one_shot is True
    assert claimed.run.max_attempts == 6


async def test_concurrent_schedulers_never_duplicate_an_occurrence(
    store: Store, make_store, t0: datetime
) -> None:
    """Many materializers over two store instances on one database, with a planner that never
    advances ``next_fire_at``: only the database's uniqueness keeps occurrences single."""
    other = await make_store()
    jobs = [await make_job(store, f"j{i}", next_fire_at=t0 + s(i % 3)) for i in range(12)]
    planner = fill_planner(1)

    def replanning(job: Job, now: datetime, until: datetime) -> JobPlan:
        plan = planner(job, now, until)
        return JobPlan(plan.runs, [], job.next_fire_at)  # never advances

    calls = [
        materialize(st, t0, planner=replanning, horizon=5, limit=5)
        for _ in range(6)
        for st in (store, other)
    ]
    results = await asyncio.gather(*calls)

    runs = await list_runs(store)
    occurrences = Counter((r.job_id, r.scheduled_for) for r in runs)
    assert occurrences
    assert max(occurrences.values()) == 1
    assert sum(r.runs_created for r in results) == len(runs)

    # a final sweep fills whatever the racing calls did not reach, still without duplicates
    for _ in range(3):
        await materialize(store, t0, planner=replanning, horizon=5)
    runs = await list_runs(store)
    occurrences = Counter((r.job_id, r.scheduled_for) for r in runs)
    assert max(occurrences.values()) == 1
    expected = sum(len(range(i % 3, 6)) for i in range(len(jobs)))
    assert len(runs) == expected


async def test_concurrent_schedulers_each_job_advanced_once(
    store: Store, make_store, t0: datetime
) -> None:
    other = await make_store()
    jobs = [await make_job(store, f"j{i}", next_fire_at=t0) for i in range(10)]
    results = await asyncio.gather(
        *[materialize(st, t0, horizon=0) for _ in range(4) for st in (store, other)]
    )
    assert sum(r.runs_created for r in results) == len(jobs)
    assert sum(r.jobs for r in results) == len(jobs)  # a job is planned by one scheduler
    for job in jobs:
        (run,) = await list_runs(store, job_id=job.id)
        assert run.scheduled_for == t0
        assert (await get_job(store, job.id)).next_fire_at == t0 + s(1)
