"""The unit of work (``store.transaction()``, the ``StoreTx`` protocol of store/base.py): the
same on both stores. Its writes commit together or not at all; rows it reads stay locked; the
service decides between its reads and writes (nothing calls back from the store)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from storekit import TENANT, get_job, job_params, list_runs, make_job, ref, s, upsert

from duetime._types import JobStatus, RunState
from duetime.errors import NotFound
from duetime.store import Store
from duetime.store.base import JobRef, JobsDueParams, PlannedRun, PlannedSkip


class Boom(Exception):
    pass


async def test_writes_commit_together(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    async with store.transaction() as tx:
        assert await tx.now(t0) == t0
        assert await tx.now() == t0  # the transaction's instant, read once
        due = await tx.jobs_lock_due(JobsDueParams(until=t0, limit=10))
        assert [j.id for j in due] == [job.id]
        planned = [(job, PlannedRun(t0, t0)), (job, PlannedRun(t0 + s(1), t0 + s(1)))]
        assert await tx.runs_insert_planned(planned) == 2
        assert await tx.runs_insert_planned(planned[:1]) == 0  # an existing occurrence
        assert await tx.skips_insert([(job.id, PlannedSkip(t0 - s(9), t0 - s(1), 9, "x"))]) == 1
        await tx.jobs_advance([(job.id, t0 + s(2))])
    assert (await get_job(store, job.id)).next_fire_at == t0 + s(2)
    assert len(await list_runs(store, job_id=job.id)) == 2
    assert [k.count for k in await store.skips_list(TENANT, job.id)] == [9]


async def test_a_raising_block_writes_nothing(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)

    async def write_then_fail() -> None:
        async with store.transaction() as tx:
            await tx.now(t0)
            await tx.runs_insert_planned([(job, PlannedRun(t0, t0))])
            await tx.jobs_advance([(job.id, None)])
            assert await tx.job_insert(job_params("new", next_fire_at=t0)) is not None
            raise Boom

    with pytest.raises(Boom):
        await write_then_fail()
    assert await list_runs(store, job_id=job.id) == []
    assert (await get_job(store, job.id)).next_fire_at == t0
    with pytest.raises(NotFound):
        await store.job_get(JobRef(TENANT, name="new"))


async def test_job_insert_lock_and_update(store: Store, t0: datetime) -> None:
    params = job_params("j", next_fire_at=t0)
    async with store.transaction() as tx:
        created = await tx.job_insert(params)
        assert created is not None
        assert await tx.job_insert(params) is None  # the name is taken: nothing written
        assert await tx.job_lock(JobRef(TENANT, name="missing")) is None
        locked = await tx.job_lock(JobRef(TENANT, name="j"))
        assert locked == created
        updated = await tx.job_update(
            job_params("j", next_fire_at=t0, priority=5),
            locked,
            schedule=locked.schedule,
            next_fire_at=t0 + s(5),
            status=JobStatus.PAUSED,
        )
    assert updated.id == created.id
    assert (updated.priority, updated.next_fire_at, updated.status) == (
        5,
        t0 + s(5),
        JobStatus.PAUSED,
    )
    assert await store.job_get(ref(updated)) == updated


async def test_runs_end_pending(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    async with store.transaction() as tx:
        await tx.now(t0)
        await tx.runs_insert_planned([(job, PlannedRun(t0, t0))])
    async with store.transaction() as tx:
        await tx.now(t0)
        ended = await tx.runs_end_pending(job.id, RunState.SKIPPED, "why", include_manual=False)
    assert ended == 1
    (run,) = await list_runs(store, job_id=job.id)
    assert (run.state, run.reason) == (RunState.SKIPPED, "why")


async def test_concurrent_upserts_of_one_name_create_one_job(store: Store, t0: datetime) -> None:
    results = await asyncio.gather(
        *[upsert(store, job_params("same", next_fire_at=t0, priority=i)) for i in range(5)]
    )
    assert sum(created for _, created in results) == 1
    assert len({job.id for job, _ in results}) == 1
