"""``now`` left out: every method falls back to the store's clock (the database clock on
PostgreSQL, the host clock on SQLite). These tests use a store with no injected clock and
check instants against the host clock, loosely."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storekit import (
    LEASE,
    TASK,
    TENANT,
    WORKER,
    completion,
    fill_planner,
    get_run,
    list_runs,
    make_job,
    ref,
    s,
)

from duetime._types import AttemptOutcome, JobStatus, RunState, WorkerInfo
from duetime.scheduler.materializer import materialize as materialize_batch
from duetime.store import Store
from duetime.store.base import (
    JobSetStatusParams,
    LeasesReapParams,
    RunCancelParams,
    RunReplayParams,
    RunsClaimParams,
    RunsCompleteParams,
    RunsHeartbeatParams,
    RunStartParams,
    RunTriggerParams,
)

SLACK = timedelta(seconds=60)


def real_now() -> datetime:
    return datetime.now(UTC)


def near(at: datetime | None, reference: datetime) -> bool:
    return at is not None and at.utcoffset() == timedelta(0) and abs(at - reference) < SLACK


async def clockless(make_store) -> Store:
    return await make_store(clock=None)


def claim_params(**kwargs) -> RunsClaimParams:
    values = {
        "worker_id": WORKER,
        "tasks": (TASK,),
        "limit": 10,
        "lease_ttl": LEASE,
        "lookahead": 0.0,
    }
    values.update(kwargs)
    return RunsClaimParams(**values)


async def test_db_now(make_store) -> None:
    store = await clockless(make_store)
    assert near(await store.db_now(), real_now())


async def test_the_worker_path_on_the_default_clock(make_store) -> None:
    store = await clockless(make_store)
    start = real_now()
    job = await make_job(store, "j", next_fire_at=start - s(2))

    result = await materialize_batch(store, fill_planner(3600), horizon=0)
    assert result.runs_created == 1
    assert near(result.now, start)

    (claimed,) = await store.runs_claim(claim_params())
    run = claimed.run
    assert run.job_id == job.id
    assert near(run.claimed_at, start)
    assert run.started_at == run.claimed_at  # due: started at claim
    assert run.lease_expires_at == run.claimed_at + s(LEASE)

    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(run.id, run.token)], lease_ttl=600)
    )
    assert kept == {run.id}
    extended = await get_run(store, run.id)
    assert extended.lease_expires_at is not None
    assert near(extended.lease_expires_at - s(600), start)

    applied = await store.runs_complete(RunsCompleteParams([completion(claimed)]))
    assert applied == [True]
    done = await get_run(store, run.id)
    assert done.state is RunState.SUCCEEDED
    assert near(done.finished_at, start)
    assert done.finished_at >= run.claimed_at
    (attempt,) = await store.attempts_list(TENANT, run.id)
    assert near(attempt.finished_at, start)


async def test_trigger_and_start_on_the_default_clock(make_store) -> None:
    store = await clockless(make_store)
    job = await make_job(store, "j", next_fire_at=None)
    start = real_now()
    run, created = await store.run_trigger(RunTriggerParams(ref(job)))
    assert created
    assert near(run.scheduled_for, start)
    assert run.available_at == run.scheduled_for

    # a run claimed ahead, started later
    future = await make_job(store, "later", next_fire_at=start + s(30))
    await materialize_batch(store, fill_planner(3600), horizon=60)
    claimed = await store.runs_claim(claim_params(lookahead=120))
    ahead = next(c for c in claimed if c.run.job_id == future.id)
    assert ahead.run.started_at is None
    assert await store.run_start(RunStartParams(ahead.run.id, ahead.run.token))
    assert near((await get_run(store, ahead.run.id)).started_at, start)


async def test_reaper_and_operator_actions_on_the_default_clock(make_store) -> None:
    store = await clockless(make_store)
    start = real_now()
    job = await make_job(store, "j", next_fire_at=start - s(100))
    await materialize_batch(
        store, fill_planner(1), horizon=0, now=start - s(99)
    )  # two runs: start-100, start-99
    claimed = await store.runs_claim(claim_params(now=start - s(99), limit=1))
    assert len(claimed) == 1

    reaped = await store.leases_reap(LeasesReapParams())  # its lease ran out 69 s ago
    assert (reaped.rescheduled, reaped.dead) == (1, 0)
    lost = await get_run(store, claimed[0].run.id)
    assert lost.state is RunState.SCHEDULED
    assert near(lost.available_at, start)

    other = next(r for r in await list_runs(store, job_id=job.id) if r.id != lost.id)
    cancelled = await store.run_cancel(RunCancelParams(TENANT, other.id))
    assert near(cancelled.finished_at, start)

    again = await store.runs_claim(claim_params())
    assert [c.run.id for c in again] == [lost.id]
    dead = completion(again[0], outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await store.runs_complete(RunsCompleteParams([dead])) == [True]
    assert await store.runs_replay(RunReplayParams(TENANT, run_ids=[lost.id])) == [lost.id]
    replayed = await get_run(store, lost.id)
    assert replayed.state is RunState.SCHEDULED
    assert near(replayed.available_at, start)

    paused = await store.job_set_status(JobSetStatusParams(ref(job), JobStatus.PAUSED))
    assert paused.status is JobStatus.PAUSED


async def test_worker_heartbeat_on_the_default_clock(make_store) -> None:
    store = await clockless(make_store)
    start = real_now()
    long_ago = start - timedelta(hours=1)
    await store.worker_register(
        WorkerInfo("w", "h", 1, ("t",), ("default",), started_at=long_ago, heartbeat_at=long_ago)
    )
    await store.worker_heartbeat("w")
    (worker,) = await store.workers_list()
    assert near(worker.heartbeat_at, start)
