"""Operator actions on runs: replay from the dead-letter queue, cancel; reading runs back."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from storekit import (
    LEASE,
    OTHER_TENANT,
    TENANT,
    WORKER,
    claim,
    claim_one,
    complete,
    completion,
    dead_run,
    get_run,
    running_run,
    s,
    scheduled_run,
)

from duetime._types import AttemptOutcome, JobStatus, RunState
from duetime.errors import Conflict, NotFound
from duetime.store import Store
from duetime.store.base import (
    JobRef,
    JobSetStatusParams,
    LeasesReapParams,
    RunCancelParams,
    RunReplayParams,
    RunsHeartbeatParams,
    RunStartParams,
)


async def replay(store: Store, now: datetime, **kwargs) -> list[uuid.UUID]:
    return await store.runs_replay(
        RunReplayParams(tenant=kwargs.pop("tenant", TENANT), now=now, **kwargs)
    )


# --- replay -----------------------------------------------------------------------------------


async def test_replay_gives_a_dead_run_a_fresh_budget(store: Store, t0: datetime) -> None:
    dead = await dead_run(store, t0, "j", attempts=2)
    assert (await get_run(store, dead.run.id)).attempt == 2
    now = t0 + s(100)

    assert await replay(store, now, run_ids=[dead.run.id]) == [dead.run.id]

    run = await get_run(store, dead.run.id)
    assert run.state is RunState.SCHEDULED
    assert run.max_attempts == 2 + 2  # attempt + the job's max_attempts
    assert run.replays == 1
    assert run.finished_at is None
    assert run.attempt == 2
    again = await claim_one(store, now)
    assert again.run.id == run.id
    assert again.run.attempt == 3
    assert again.run.started_at == now


async def test_replay_with_an_explicit_budget(store: Store, t0: datetime) -> None:
    dead = await dead_run(store, t0, "j")
    assert await replay(store, t0 + s(10), run_ids=[dead.run.id], max_attempts=5) == [dead.run.id]
    run = await get_run(store, dead.run.id)
    assert run.max_attempts == 1 + 5
    # twice dead, twice replayed: replays counts every time
    again = await claim_one(store, t0 + s(10))
    await complete(
        store,
        t0 + s(11),
        completion(again, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD),
    )
    assert await replay(store, t0 + s(12), run_ids=[dead.run.id]) == [dead.run.id]
    run = await get_run(store, dead.run.id)
    assert run.replays == 2
    assert run.max_attempts == 2 + 1


async def test_replayed_budget_is_enforced_by_the_reaper(store: Store, t0: datetime) -> None:
    dead = await dead_run(store, t0, "j")  # attempt 1 of 1
    await replay(store, t0 + s(10), run_ids=[dead.run.id], max_attempts=1)  # max 2
    again = await claim_one(store, t0 + s(10))
    assert again.run.attempt == 2
    result = await store.leases_reap(LeasesReapParams(now=t0 + s(10 + LEASE + 1)))
    assert (result.rescheduled, result.dead) == (0, 1)


async def test_replay_leaves_runs_that_are_not_dead(store: Store, t0: datetime) -> None:
    scheduled = await scheduled_run(store, t0 + s(50), "scheduled")
    running = await running_run(store, t0, "running")
    done = await running_run(store, t0, "done")
    assert await complete(store, t0 + s(1), completion(done)) == [True]
    done_run = await get_run(store, done.run.id)
    ids = [scheduled.id, running.run.id, done.run.id, uuid.uuid4()]

    assert await replay(store, t0 + s(2), run_ids=ids) == []

    assert await get_run(store, scheduled.id) == scheduled
    assert await get_run(store, running.run.id) == running.run
    assert await get_run(store, done.run.id) == done_run


async def test_bulk_replay_by_job_and_by_tenant(store: Store, t0: datetime) -> None:
    a1 = await dead_run(store, t0, "a")
    b1 = await dead_run(store, t0, "b")
    foreign = await dead_run(store, t0, "x", tenant=OTHER_TENANT)

    assert await replay(store, t0 + s(10), job_id=a1.run.job_id) == [a1.run.id]
    assert (await get_run(store, b1.run.id)).state is RunState.DEAD

    assert await replay(store, t0 + s(11)) == [b1.run.id]  # every dead run of the tenant
    assert (await get_run(store, foreign.run.id, OTHER_TENANT)).state is RunState.DEAD
    assert await replay(store, t0 + s(12)) == []


async def test_replay_never_crosses_tenants(store: Store, t0: datetime) -> None:
    foreign = await dead_run(store, t0, "x", tenant=OTHER_TENANT)
    assert await replay(store, t0 + s(1), run_ids=[foreign.run.id]) == []
    assert (await get_run(store, foreign.run.id, OTHER_TENANT)).state is RunState.DEAD
    assert await replay(store, t0 + s(1), tenant=OTHER_TENANT, run_ids=[foreign.run.id]) == [
        foreign.run.id
    ]


async def test_replay_limit(store: Store, t0: datetime) -> None:
    for i in range(3):
        await dead_run(store, t0, f"j{i}")
    assert len(await replay(store, t0 + s(10), limit=2)) == 2
    assert len(await replay(store, t0 + s(10), limit=2)) == 1
    assert await replay(store, t0 + s(10), limit=2) == []


# --- cancel -----------------------------------------------------------------------------------


async def cancel(store: Store, run_id: uuid.UUID, now: datetime, tenant: str = TENANT):
    return await store.run_cancel(RunCancelParams(tenant=tenant, run_id=run_id, now=now))


async def test_cancel_a_scheduled_run(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(10), "j")
    cancelled = await cancel(store, run.id, t0)
    assert cancelled.id == run.id
    assert cancelled.state is RunState.CANCELLED
    assert cancelled.reason is not None  # says why
    assert cancelled.token > run.token
    assert cancelled.finished_at == t0
    assert await get_run(store, run.id) == cancelled
    assert await store.attempts_list(TENANT, run.id) == []
    assert await claim(store, t0 + s(10)) == []


async def test_cancel_a_running_run_fences_its_worker(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", worker="w-5")
    now = t0 + s(3)
    cancelled = await cancel(store, claimed.run.id, now)

    assert cancelled.state is RunState.CANCELLED
    assert cancelled.token > claimed.run.token
    assert cancelled.lease_owner is None
    assert cancelled.lease_expires_at is None
    assert cancelled.finished_at == now
    (attempt,) = await store.attempts_list(TENANT, claimed.run.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED
    assert (attempt.number, attempt.token, attempt.worker_id) == (1, claimed.run.token, "w-5")
    assert attempt.started_at == t0
    assert attempt.finished_at == now

    # the worker's later writes change nothing
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams("w-5", [(claimed.run.id, claimed.run.token)], LEASE, now=now)
    )
    assert kept == set()
    assert await complete(store, now + s(1), completion(claimed)) == [False]
    assert await get_run(store, claimed.run.id) == cancelled
    assert (await store.leases_reap(LeasesReapParams(now=now + s(LEASE * 10)))).rescheduled == 0


async def test_cancel_a_claimed_ahead_run(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1, worker=WORKER)
    cancelled = await cancel(store, claimed.run.id, t0 + s(0.5))
    assert cancelled.state is RunState.CANCELLED
    assert not await store.run_start(
        RunStartParams(claimed.run.id, claimed.run.token, now=t0 + s(1))
    )


@pytest.mark.parametrize("end", [RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED])
async def test_cancel_of_a_finished_run_conflicts(
    store: Store, t0: datetime, end: RunState
) -> None:
    claimed = await running_run(store, t0, "j")
    outcome = AttemptOutcome.SUCCEEDED if end is RunState.SUCCEEDED else AttemptOutcome.FAILED
    assert await complete(
        store, t0 + s(1), completion(claimed, outcome=outcome, next_state=end)
    ) == [True]
    before = await get_run(store, claimed.run.id)
    with pytest.raises(Conflict):
        await cancel(store, claimed.run.id, t0 + s(2))
    assert await get_run(store, claimed.run.id) == before


async def test_cancel_of_a_skipped_run_conflicts(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(5), "j")
    await store.job_set_status(  # at its instant: skipped (before it, it would be withdrawn)
        JobSetStatusParams(JobRef(TENANT, id=run.job_id), JobStatus.PAUSED, now=t0 + s(5))
    )
    assert (await get_run(store, run.id)).state is RunState.SKIPPED
    with pytest.raises(Conflict):
        await cancel(store, run.id, t0 + s(6))


async def test_cancel_twice_conflicts(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0, "j")
    await cancel(store, run.id, t0)
    with pytest.raises(Conflict):
        await cancel(store, run.id, t0 + s(1))


async def test_cancel_of_a_foreign_or_unknown_run(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0, "j")
    with pytest.raises(NotFound):
        await cancel(store, run.id, t0, tenant=OTHER_TENANT)
    with pytest.raises(NotFound):
        await cancel(store, uuid.uuid4(), t0)
    assert (await get_run(store, run.id)).state is RunState.SCHEDULED
