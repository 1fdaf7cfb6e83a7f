"""Conformance: ``jobs_insert_many``, the bulk registration path, on every store."""

from __future__ import annotations

import uuid
from datetime import datetime

from tests.store.storekit import TENANT, job_params, one_run_planner, s, upsert

from duetime import _json
from duetime._types import JobStatus, Schedule, ScheduleKind
from duetime.scheduler.materializer import materialize as materialize_batch
from duetime.store import Store
from duetime.store.base import (
    BulkJob,
    JobListParams,
    JobRef,
    JobsInsertManyParams,
)


async def test_inserts_every_new_job_as_it_was_given(store: Store, t0: datetime) -> None:
    params = [
        job_params(f"job-{i}", next_fire_at=t0 + s(i), priority=i, tags=("bulk",), partition=i)
        for i in range(50)
    ]
    assert await store.jobs_insert_many(JobsInsertManyParams([BulkJob.of(p) for p in params])) == 50
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
    first, _ = await upsert(store, job_params("taken", next_fire_at=t0, priority=7))
    batch = [
        job_params("taken", next_fire_at=t0 + s(5), priority=1),
        job_params("fresh", next_fire_at=t0 + s(5)),
        job_params("fresh", next_fire_at=t0 + s(9)),
    ]
    assert await store.jobs_insert_many(JobsInsertManyParams([BulkJob.of(p) for p in batch])) == 1
    kept = await store.job_get(JobRef(tenant=TENANT, name="taken"))
    assert (kept.id, kept.priority, kept.next_fire_at) == (first.id, 7, t0)
    fresh = await store.job_get(JobRef(tenant=TENANT, name="fresh"))
    assert fresh.next_fire_at == t0 + s(5)


async def test_an_empty_batch_writes_nothing(store: Store) -> None:
    assert await store.jobs_insert_many(JobsInsertManyParams([])) == 0


async def test_bulk_jobs_are_materialized_like_any_other(store: Store, t0: datetime) -> None:
    params = [job_params(f"due-{i}", next_fire_at=t0) for i in range(3)]
    await store.jobs_insert_many(JobsInsertManyParams([BulkJob.of(p) for p in params]))
    result = await materialize_batch(store, one_run_planner, horizon=1.0, now=t0)
    assert (result.jobs, result.runs_created) == (3, 3)


AWKWARD = "back\\slash\ttab\nnewline\rreturn \\N é 🙂"
"""Every character COPY's text format escapes, its NULL marker, and some non-ASCII."""


async def test_jobs_sharing_a_shape_keep_their_own_fields(store: Store, t0: datetime) -> None:
    """A shape lends its task, queue, priority … to every job; each job's own name, payload,
    metadata, schedule, first instant, id and partition are its own."""
    shape = job_params("shape", next_fire_at=t0, priority=5, queue="bulk", tags=("t",))
    cron = Schedule(ScheduleKind.CRON, cron="0 3 * * *", tz="Europe/Paris")
    once = Schedule(ScheduleKind.AT, at=t0 + s(30))
    jobs = [
        BulkJob(shape, uuid.uuid4(), "plain", "null", "{}", cron, t0 + s(60), 7),
        BulkJob(
            shape,
            uuid.uuid4(),
            "name with a \\ backslash",
            _json.dumps({"text": AWKWARD}),
            _json.dumps({"note": AWKWARD}),
            once,
            t0 + s(30),
            255,
        ),
    ]
    assert await store.jobs_insert_many(JobsInsertManyParams(jobs, expect_new=True)) == 2
    for job in jobs:
        stored = await store.job_get(JobRef(tenant=TENANT, name=job.name))
        assert stored.id == job.job_id
        assert stored.payload == _json.loads(job.payload)
        assert stored.metadata == _json.loads(job.metadata)
        assert stored.schedule == job.schedule
        assert stored.next_fire_at == job.next_fire_at
        assert stored.partition == job.partition
        assert (stored.priority, stored.queue, stored.tags) == (5, "bulk", ("t",))
    assert (await store.job_get(JobRef(tenant=TENANT, name="plain"))).payload is None
    awkward = await store.job_get(JobRef(tenant=TENANT, name="name with a \\ backslash"))
    assert awkward.payload == {"text": AWKWARD}


async def test_a_wrong_expect_new_hint_still_leaves_existing_names_alone(
    store: Store, t0: datetime
) -> None:
    first, _ = await upsert(store, job_params("taken", next_fire_at=t0, priority=7))
    batch = [
        job_params("taken", next_fire_at=t0 + s(5), priority=1),
        job_params("fresh", next_fire_at=t0 + s(5)),
        job_params("fresh", next_fire_at=t0 + s(9)),
    ]
    params = JobsInsertManyParams([BulkJob.of(p) for p in batch], expect_new=True)
    assert await store.jobs_insert_many(params) == 1
    kept = await store.job_get(JobRef(tenant=TENANT, name="taken"))
    assert (kept.id, kept.priority, kept.next_fire_at) == (first.id, 7, t0)
    fresh = await store.job_get(JobRef(tenant=TENANT, name="fresh"))
    assert fresh.next_fire_at == t0 + s(5)
    page = await store.job_list(JobListParams(tenant=TENANT))
    assert sorted(j.name for j in page.items) == ["fresh", "taken"]
