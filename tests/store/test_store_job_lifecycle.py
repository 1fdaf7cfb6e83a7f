"""A job's lifecycle in the store (decision 0023): pause notes and their history, the
auto-resume's and pause on failure's reads, declared jobs, and the tenant's job cap."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime

import pytest
from storekit import (
    OTHER_TENANT,
    TENANT,
    claim_one,
    complete,
    completion,
    job_params,
    job_with_runs,
    make_job,
    ref,
    s,
    upsert,
)

from duetime._types import AttemptOutcome, JobPause, JobStatus, RetryPolicy, RunState
from duetime.errors import JobCapReached
from duetime.store import Store
from duetime.store.base import (
    BulkJob,
    JobListParams,
    JobRef,
    JobSetStatusParams,
    JobsInsertManyParams,
    TenantLimitsSetParams,
)


def pause(job_ref: JobRef, now: datetime, **note: object) -> JobSetStatusParams:
    return JobSetStatusParams(job_ref, JobStatus.PAUSED, now=now, pause=JobPause(**note))  # type: ignore[arg-type]


async def test_a_pause_keeps_its_note_until_resumed_and_both_are_history(
    store: Store, t0: datetime
) -> None:
    job = await make_job(store, "nightly", next_fire_at=t0 + s(60))
    until = t0 + s(3600)
    paused = await store.job_set_status(pause(ref(job), t0, by="ana", note="db move", until=until))
    assert paused.pause == JobPause(by="ana", note="db move", until=until)
    assert (await store.job_get(ref(job))).pause == paused.pause
    again = await store.job_set_status(pause(ref(job), t0 + s(1), by="bo", note="longer"))
    assert again.pause == JobPause(by="bo", note="longer", until=None)
    resumed = await store.job_set_status(
        JobSetStatusParams(
            ref(job), JobStatus.ACTIVE, next_fire_at=t0 + s(120), now=t0 + s(2), actor="cy"
        )
    )
    assert resumed.status is JobStatus.ACTIVE
    assert resumed.pause is None
    events = await store.job_events_list(ref(job))
    assert [(e.kind, e.actor) for e in events] == [
        ("resumed", "cy"),
        ("pause_changed", "bo"),
        ("paused", "ana"),
    ]
    assert events[2].detail == {"by": "ana", "note": "db move", "until": until.isoformat()}
    assert events[2].at == t0
    assert await store.job_events_list(ref(job), before=events[1].id, limit=5) == events[2:]


async def test_pauses_due_are_found_and_a_changed_pause_is_left_alone(
    store: Store, t0: datetime
) -> None:
    soon = await make_job(store, "soon", next_fire_at=t0 + s(60))
    later = await make_job(store, "later", next_fire_at=t0 + s(60))
    forever = await make_job(store, "forever", next_fire_at=t0 + s(60))
    await store.job_set_status(pause(ref(soon), t0, until=t0 + s(10)))
    await store.job_set_status(pause(ref(later), t0, until=t0 + s(100)))
    await store.job_set_status(pause(ref(forever), t0, note="no end"))
    assert [j.name for j in await store.jobs_pause_due(t0 + s(10))] == ["soon"]
    assert [j.name for j in await store.jobs_pause_due(t0 + s(100))] == ["soon", "later"]
    # an operator re-paused it meanwhile: the resume guarded by the old instant does nothing
    await store.job_set_status(pause(ref(soon), t0 + s(5), until=t0 + s(500)))
    kept = await store.job_set_status(
        JobSetStatusParams(
            ref(soon),
            JobStatus.ACTIVE,
            next_fire_at=t0 + s(60),
            now=t0 + s(11),
            expect_until=t0 + s(10),
        )
    )
    assert kept.status is JobStatus.PAUSED
    done = await store.job_set_status(
        JobSetStatusParams(
            ref(soon),
            JobStatus.ACTIVE,
            next_fire_at=t0 + s(600),
            now=t0 + s(501),
            expect_until=t0 + s(500),
            actor="duetime",
        )
    )
    assert done.status is JobStatus.ACTIVE
    assert done.next_fire_at == t0 + s(600)


async def _die(store: Store, at: datetime) -> None:
    claimed = await claim_one(store, at)
    dead = completion(
        claimed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD, reason="failed"
    )
    assert await complete(store, at, dead) == [True]


async def test_consecutive_dead_runs_since_the_last_success_or_resume_make_a_job_failing(
    store: Store, t0: datetime
) -> None:
    job = await job_with_runs(store, t0, "flaky", 5, retry=RetryPolicy(max_attempts=1))
    assert (await store.job_pause_on_failure_set(ref(job), 2, now=t0)).pause_after_dead == 2
    await _die(store, t0 + s(0.5))
    assert await store.jobs_failing() == []
    ok = await claim_one(store, t0 + s(1))
    assert await complete(store, t0 + s(1.5), completion(ok)) == [True]
    await _die(store, t0 + s(2))
    assert await store.jobs_failing() == []  # the success broke the streak
    await _die(store, t0 + s(3))
    [(failing, dead)] = await store.jobs_failing()
    assert (failing.id, dead) == (job.id, 2)
    await store.job_set_status(pause(ref(job), t0 + s(3), by="duetime"))
    assert await store.jobs_failing() == []  # paused jobs are not looked at
    await store.job_set_status(
        JobSetStatusParams(ref(job), JobStatus.ACTIVE, next_fire_at=t0 + s(4), now=t0 + s(3.5))
    )
    assert await store.jobs_failing() == []  # the streak counts from the resume
    off = await store.job_pause_on_failure_set(ref(job), None, now=t0 + s(4))
    assert off.pause_after_dead is None


async def test_declared_jobs_are_marked_per_source_and_tenant(store: Store, t0: datetime) -> None:
    for name in ("a", "b", "c"):
        await make_job(store, name, next_fire_at=t0)
    await make_job(store, "a", next_fire_at=t0, tenant=OTHER_TENANT)
    assert await store.jobs_declare(TENANT, "app", ["a", "b"]) == 2
    assert await store.jobs_declare(TENANT, "app", ["a"]) == 0
    assert [j.name for j in await store.jobs_declared(TENANT, "app")] == ["a", "b"]
    assert (await store.jobs_declared(TENANT, "app"))[0].declared_source == "app"
    assert await store.jobs_declared(OTHER_TENANT, "app") == []
    assert await store.jobs_declared(TENANT, "other") == []


async def test_a_tenant_cap_refuses_new_jobs_only(store: Store, t0: datetime) -> None:
    limits = await store.tenant_limits_set(TenantLimitsSetParams(TENANT, max_jobs=2))
    assert limits.max_jobs == 2
    assert (await store.tenant_limits_get(TENANT)).max_jobs == 2
    first = await make_job(store, "one", next_fire_at=t0)
    await make_job(store, "two", next_fire_at=t0)
    with pytest.raises(JobCapReached, match="reached its cap of 2") as raised:
        await upsert(store, job_params("three", next_fire_at=t0))
    assert raised.value.field == "max_jobs"
    # an update of a job it has is no new job; another tenant has no cap
    await upsert(store, replace(job_params("two", next_fire_at=t0), priority=5))
    await make_job(store, "three", next_fire_at=t0, tenant=OTHER_TENANT)
    # cancelled jobs do not count
    await store.job_set_status(JobSetStatusParams(ref(first), JobStatus.CANCELLED, now=t0))
    await make_job(store, "three", next_fire_at=t0)
    await store.tenant_limits_set(TenantLimitsSetParams(TENANT, max_jobs=0))
    assert (await store.tenant_limits_get(TENANT)).max_jobs is None
    await make_job(store, "four", next_fire_at=t0)
    # setting other limits keeps the cap
    await store.tenant_limits_set(TenantLimitsSetParams(TENANT, max_jobs=9))
    await store.tenant_limits_set(TenantLimitsSetParams(TENANT, weight=3))
    assert (await store.tenant_limits_get(TENANT)).max_jobs == 9


async def test_a_bulk_batch_past_the_cap_writes_nothing(store: Store, t0: datetime) -> None:
    def batch(*names: str, expect_new: bool = False) -> JobsInsertManyParams:
        jobs = [BulkJob.of(job_params(n, next_fire_at=t0)) for n in names]
        return JobsInsertManyParams(jobs, expect_new=expect_new)

    await store.tenant_limits_set(TenantLimitsSetParams(TENANT, max_jobs=3))
    await make_job(store, "a", next_fire_at=t0)
    # "a" exists (left alone), "b" and "c" are new: 1 + 2 fits
    assert await store.jobs_insert_many(batch("a", "b", "c")) == 2
    with pytest.raises(JobCapReached):
        await store.jobs_insert_many(batch("d", expect_new=True))
    with pytest.raises(JobCapReached):
        await store.jobs_insert_many(batch("a", "d"))
    assert await store.jobs_insert_many(batch("a", "b")) == 0
    assert (await store.tenant_limits_get(TENANT)).max_jobs == 3


async def test_concurrent_registrations_never_pass_the_cap(store: Store, t0: datetime) -> None:
    await store.tenant_limits_set(TenantLimitsSetParams(TENANT, max_jobs=3))

    async def register(n: int) -> bool:
        try:
            await upsert(store, job_params(f"job-{n}", next_fire_at=t0))
        except JobCapReached:
            return False
        return True

    created = await asyncio.gather(*(register(n) for n in range(12)))
    assert sum(created) == 3
    counts = await store.job_list(JobListParams(TENANT, limit=100))
    assert len(counts.items) == 3


async def test_duetimes_own_pause_never_rewrites_an_operators_note(
    store: Store, t0: datetime
) -> None:
    job = await make_job(store, "j", next_fire_at=t0 + s(60))
    await store.job_set_status(pause(ref(job), t0, by="ana", note="mine"))
    failing = JobSetStatusParams(
        ref(job),
        JobStatus.PAUSED,
        now=t0 + s(1),
        pause=JobPause(by="duetime", note="paused after 3 consecutive dead runs"),
        event="paused_on_failure",
    )
    kept = await store.job_set_status(failing)
    assert kept.pause == JobPause(by="ana", note="mine")
    assert [e.kind for e in await store.job_events_list(ref(job))] == ["paused"]
