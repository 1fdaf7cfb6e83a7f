"""Conformance: ``jobs_insert_many``, the bulk registration path, on every store."""

from __future__ import annotations

from datetime import datetime

from tests.store.storekit import TENANT, job_params, one_run_planner, s

from duetime._types import JobStatus, ScheduleKind
from duetime.store import Store
from duetime.store.base import JobRef, JobsInsertManyParams, RunsMaterializeParams


async def test_inserts_every_new_job_as_it_was_given(store: Store, t0: datetime) -> None:
    params = [
        job_params(f"job-{i}", next_fire_at=t0 + s(i), priority=i, tags=("bulk",), partition=i)
        for i in range(50)
    ]
    assert await store.jobs_insert_many(JobsInsertManyParams(params)) == 50
    for p in (params[0], params[49]):
        job = await store.job_get(JobRef(tenant=TENANT, name=p.name))
        assert job.id == p.job_id
        assert job.status is JobStatus.ACTIVE
        assert job.next_fire_at == p.next_fire_at
        assert job.schedule == p.schedule
        assert job.schedule.kind is ScheduleKind.EVERY
        assert job.priority == p.priority
        assert job.tags == ("bulk",)
        assert job.payload == {"job": p.name}
        assert job.partition == p.partition
        assert job.created_at == t0


async def test_existing_and_repeated_names_are_left_alone(store: Store, t0: datetime) -> None:
    first, _ = await store.job_upsert(job_params("taken", next_fire_at=t0, priority=7))
    batch = [
        job_params("taken", next_fire_at=t0 + s(5), priority=1),
        job_params("fresh", next_fire_at=t0 + s(5)),
        job_params("fresh", next_fire_at=t0 + s(9)),
    ]
    assert await store.jobs_insert_many(JobsInsertManyParams(batch)) == 1
    kept = await store.job_get(JobRef(tenant=TENANT, name="taken"))
    assert (kept.id, kept.priority, kept.next_fire_at) == (first.id, 7, t0)
    fresh = await store.job_get(JobRef(tenant=TENANT, name="fresh"))
    assert fresh.next_fire_at == t0 + s(5)


async def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert await store.jobs_insert_many(JobsInsertManyParams([])) == 0


async def test_bulk_jobs_are_materialized_like_any_other(store: Store, t0: datetime) -> None:
    params = [job_params(f"due-{i}", next_fire_at=t0) for i in range(3)]
    await store.jobs_insert_many(JobsInsertManyParams(params))
    result = await store.runs_materialize(
        RunsMaterializeParams(planner=one_run_planner, horizon=1.0, now=t0)
    )
    assert (result.jobs, result.runs_created) == (3, 3)
