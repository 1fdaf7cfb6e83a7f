"""A job's ``next_occurrence_at``: the earliest occurrence not fired yet (issue 17, item 7).

The scheduler writes runs ahead of their instant and moves ``next_fire_at`` past them, so the
job reads (get by id or name, list, the job an upsert returns) compute the earliest of the
job's runs written ahead and not started yet, else ``next_fire_at``."""

from __future__ import annotations

from datetime import datetime

from storekit import (
    TENANT,
    claim,
    claim_one,
    complete,
    completion,
    every_schedule,
    fill_planner,
    get_job,
    get_run,
    job_params,
    list_runs,
    make_job,
    materialize,
    ref,
    s,
    upsert,
)

from duetime._types import AttemptOutcome, Job, JobStatus, RunState
from duetime.store import Store
from duetime.store.base import JobListParams, JobRef, JobSetStatusParams, RunTriggerParams


async def written_ahead(store: Store, t0: datetime) -> Job:
    """A job firing every second from ``t0 + 10 s``, its runs written 5 s ahead at ``t0 + 10 s``
    (``t0 + 10 s`` … ``t0 + 15 s``): its ``next_fire_at`` is ``t0 + 16 s``."""
    job = await make_job(store, "ticker", next_fire_at=t0 + s(10))
    result = await materialize(store, t0 + s(10), planner=fill_planner(), horizon=5)
    assert result.runs_created == 6
    return job


async def job_reads(store: Store, job: Job) -> list[Job]:
    """The job as every read shows it: by id, by name, in a list."""
    page = await store.job_list(JobListParams(tenant=TENANT))
    return [
        await get_job(store, job.id),
        await store.job_get(JobRef(tenant=TENANT, name=job.name)),
        *[j for j in page.items if j.id == job.id],
    ]


async def test_reads_show_the_earliest_run_not_fired_yet(store: Store, t0: datetime) -> None:
    job = await written_ahead(store, t0)
    for read in await job_reads(store, job):
        assert read.next_fire_at == t0 + s(16)
        assert read.next_occurrence_at == t0 + s(10)


async def test_a_run_that_started_has_fired_one_claimed_ahead_has_not(
    store: Store, t0: datetime
) -> None:
    job = await written_ahead(store, t0)
    ahead = await claim_one(store, t0 + s(9.5), lookahead=1.0, limit=1)  # due at t0 + 10 s
    assert ahead.run.scheduled_for == t0 + s(10)
    assert ahead.run.started_at is None
    assert (await get_job(store, job.id)).next_occurrence_at == t0 + s(10)

    await claim(store, t0 + s(11), limit=1)  # due at t0 + 11 s: claimed and started at once
    started = await list_runs(store, job_id=job.id, state=RunState.RUNNING)
    assert {r.scheduled_for for r in started if r.started_at is not None} == {t0 + s(11)}
    assert (await get_job(store, job.id)).next_occurrence_at == t0 + s(10)  # still not started

    await store.job_set_status(
        JobSetStatusParams(job=ref(job), status=JobStatus.PAUSED, now=t0 + s(11))
    )
    paused = await get_job(store, job.id)
    assert (paused.next_fire_at, paused.next_occurrence_at) == (None, None)


async def test_manual_runs_are_not_occurrences(store: Store, t0: datetime) -> None:
    job = await make_job(store, "ticker", next_fire_at=t0 + s(60))
    await store.run_trigger(RunTriggerParams(job=ref(job), now=t0))
    assert (await get_job(store, job.id)).next_occurrence_at == t0 + s(60)


async def test_a_run_waiting_to_retry_has_fired(store: Store, t0: datetime) -> None:
    job = await make_job(store, "ticker", next_fire_at=t0 + s(10))
    await materialize(store, t0 + s(10))  # one run at t0 + 10 s; next_fire_at t0 + 11 s
    claimed = await claim_one(store, t0 + s(10))
    failed = completion(
        claimed,
        outcome=AttemptOutcome.FAILED,
        next_state=RunState.SCHEDULED,
        available_at=t0 + s(30),
    )
    assert await complete(store, t0 + s(10.5), failed) == [True]
    assert (await get_run(store, claimed.run.id)).state is RunState.SCHEDULED
    assert (await get_job(store, job.id)).next_occurrence_at == t0 + s(11)


async def test_without_runs_it_is_next_fire_at(store: Store, t0: datetime) -> None:
    job = await make_job(store, "ticker", next_fire_at=t0 + s(60))
    assert job.next_occurrence_at == t0 + s(60)
    for read in await job_reads(store, job):
        assert read.next_occurrence_at == t0 + s(60)


async def test_declaring_again_returns_it(store: Store, t0: datetime) -> None:
    await written_ahead(store, t0)
    again, created = await upsert(
        store,
        job_params("ticker", next_fire_at=t0 + s(30), schedule=every_schedule(t0 + s(10))),
    )
    assert not created
    assert again.next_fire_at == t0 + s(16)  # an unchanged schedule keeps its instant
    assert again.next_occurrence_at == t0 + s(10)
