"""runs_claim, run_start and runs_heartbeat: what gets claimed, leases, fencing tokens."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime

from storekit import (
    LEASE,
    TASK,
    WORKER,
    claim,
    claim_one,
    complete,
    completion,
    fill_planner,
    get_run,
    is_utc,
    list_runs,
    make_job,
    materialize,
    ref,
    running_run,
    s,
    scheduled_run,
)

from duetime._types import AttemptOutcome, JobStatus, RunState
from duetime.store import Store
from duetime.store.base import (
    JobRef,
    JobSetStatusParams,
    RunCancelParams,
    RunsHeartbeatParams,
    RunStartParams,
    RunTriggerParams,
)

# --- claim -------------------------------------------------------------------------------------


async def test_claim_of_a_due_run_starts_it(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 - s(2), "j")
    now = t0
    claimed = await claim_one(store, now, worker="w-7", lease_ttl=45)

    got = claimed.run
    assert got.id == run.id
    assert got.state is RunState.RUNNING
    assert got.token > run.token
    assert got.attempt == run.attempt + 1 == 1
    assert got.lease_owner == "w-7"
    assert got.lease_expires_at == now + s(45)
    assert got.claimed_at == now
    assert got.started_at == now
    assert all(is_utc(at) for at in (got.lease_expires_at, got.claimed_at, got.started_at))
    assert await get_run(store, run.id) == got


async def test_claim_ahead_leaves_started_at_null(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1)
    assert claimed.run.id == run.id
    assert claimed.run.state is RunState.RUNNING
    assert claimed.run.started_at is None
    assert claimed.run.claimed_at == t0
    assert claimed.run.lease_expires_at == t0 + s(LEASE)


async def test_claim_respects_available_at_and_lookahead(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await materialize(store, t0, planner=fill_planner(1), horizon=5)  # t0 .. t0+5
    claimed = await claim(store, t0 - s(1), lookahead=3)  # available_at <= t0+2
    assert sorted(c.run.scheduled_for for c in claimed) == [t0, t0 + s(1), t0 + s(2)]
    assert all(c.run.started_at is None for c in claimed)  # none due at t0-1

    edge = await claim(store, t0 + s(0.5), lookahead=2.5)  # exactly t0+3 is included
    assert [c.run.scheduled_for for c in edge] == [t0 + s(3)]
    runs = await list_runs(store, job_id=job.id, state=RunState.SCHEDULED)
    assert sorted(r.scheduled_for for r in runs) == [t0 + s(4), t0 + s(5)]


async def test_claim_only_the_listed_tasks(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0, "a", task="task.a")
    b = await scheduled_run(store, t0, "b", task="task.b")
    await scheduled_run(store, t0, "c", task="task.c")
    assert await claim(store, t0, tasks=()) == []
    assert await claim(store, t0, tasks=("task.x",)) == []
    claimed = await claim(store, t0, tasks=("task.b", "task.x"))
    assert [c.run.id for c in claimed] == [b.id]
    both = await claim(store, t0, tasks=("task.a", "task.c"))
    assert sorted(c.run.task for c in both) == ["task.a", "task.c"]


async def test_claim_limit_and_priority_order(store: Store, t0: datetime) -> None:
    low = await scheduled_run(store, t0 - s(10), "low", priority=0)
    high = await scheduled_run(store, t0, "high", priority=10)
    mid = await scheduled_run(store, t0 - s(5), "mid", priority=5)

    first = await claim(store, t0, limit=1)
    assert [c.run.id for c in first] == [high.id]
    second = await claim(store, t0, limit=1)
    assert [c.run.id for c in second] == [mid.id]
    rest = await claim(store, t0, limit=5)
    assert [c.run.id for c in rest] == [low.id]
    assert await claim(store, t0, limit=5) == []


async def test_same_priority_claims_the_earliest_first(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0 - s(5))
    await materialize(store, t0, planner=fill_planner(1), horizon=0)  # t0-5 .. t0
    order = [(await claim_one(store, t0, limit=1)).run.scheduled_for for _ in range(6)]
    assert order == [t0 - s(k) for k in (5, 4, 3, 2, 1, 0)]
    assert await list_runs(store, job_id=job.id, state=RunState.SCHEDULED) == []


async def test_claim_takes_only_scheduled_runs(store: Store, t0: datetime) -> None:
    running = await running_run(store, t0, "running")
    done = await running_run(store, t0, "done")
    assert await complete(store, t0, completion(done)) == [True]
    cancelled = await scheduled_run(store, t0, "cancelled")
    await store.run_cancel(RunCancelParams(cancelled.tenant, cancelled.id, now=t0))
    assert await claim(store, t0 + s(1)) == []
    assert (await get_run(store, running.run.id)).token == running.run.token


async def test_claim_increments_token_and_attempt_on_every_claim(
    store: Store, t0: datetime
) -> None:
    first = await running_run(store, t0, "j")
    retry_at = t0 + s(2)
    assert await complete(
        store,
        t0 + s(1),
        completion(
            first,
            next_state=RunState.SCHEDULED,
            available_at=retry_at,
            outcome=AttemptOutcome.FAILED,
        ),
    ) == [True]
    assert await claim(store, t0 + s(1)) == []  # not available yet
    second = await claim_one(store, retry_at, worker="w2")
    assert second.run.id == first.run.id
    assert second.run.token > first.run.token
    assert second.run.attempt == 2
    assert second.run.lease_owner == "w2"


async def test_concurrent_claimers_never_share_a_run(
    store: Store, make_store, t0: datetime
) -> None:
    other = await make_store()
    for i in range(4):
        await make_job(store, f"j{i}", next_fire_at=t0 - s(9))
    await materialize(store, t0, planner=fill_planner(1), horizon=0)  # 4 jobs x 10 runs
    total = 40

    results = await asyncio.gather(
        *[
            claim(st, t0, worker=f"w{i}-{n}", limit=3)
            for n in range(8)
            for i, st in enumerate((store, other))
        ]
    )
    ids = Counter(c.run.id for batch in results for c in batch)
    assert ids
    assert max(ids.values()) == 1
    for batch in results:
        assert len(batch) <= 3
        for c in batch:
            assert (await get_run(store, c.run.id)).lease_owner == c.run.lease_owner

    # whatever is left is claimable; every run ends up claimed exactly once
    while rest := await claim(store, t0, worker="sweeper", limit=10):
        ids.update(c.run.id for c in rest)
    assert len(ids) == total
    assert max(ids.values()) == 1
    runs = await list_runs(store)
    assert len(runs) == total
    assert all(r.state is RunState.RUNNING and r.attempt == 1 for r in runs)


# --- run_start ------------------------------------------------------------------------------


async def test_run_start_is_fenced_by_token(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1)
    run = claimed.run
    assert not await store.run_start(RunStartParams(run.id, run.token + 1, now=t0 + s(1)))
    assert not await store.run_start(RunStartParams(run.id, run.token - 1, now=t0 + s(1)))
    assert (await get_run(store, run.id)).started_at is None
    assert await store.run_start(RunStartParams(run.id, run.token, now=t0 + s(1)))
    started = await get_run(store, run.id)
    assert started.started_at == t0 + s(1)
    assert started.state is RunState.RUNNING


async def test_run_start_refused_after_the_run_ended(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1)
    assert await complete(store, t0 + s(0.5), completion(claimed)) == [True]
    assert not await store.run_start(
        RunStartParams(claimed.run.id, claimed.run.token, now=t0 + s(1))
    )


async def test_run_start_refused_when_job_paused(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1)
    job = await store.job_set_status(  # at its instant (before it, the run is withdrawn)
        JobSetStatusParams(JobRef(run.tenant, id=run.job_id), JobStatus.PAUSED, now=t0 + s(1))
    )
    assert job.status is JobStatus.PAUSED
    assert not await store.run_start(RunStartParams(run.id, claimed.run.token, now=t0 + s(1)))
    assert (await get_run(store, run.id)).started_at is None


async def test_run_start_rechecks_the_job_for_a_retry_claimed_ahead(
    store: Store, t0: datetime
) -> None:
    """A run already started when its job was paused is not skipped; if it then fails and is
    retried, its next attempt — claimed ahead — must not start while the job is paused."""
    first = await running_run(store, t0, "j")
    job_ref = JobRef(first.run.tenant, id=first.run.job_id)
    await store.job_set_status(JobSetStatusParams(job_ref, JobStatus.PAUSED, now=t0 + s(0.5)))
    assert (await get_run(store, first.run.id)).state is RunState.RUNNING
    retry = completion(
        first,
        outcome=AttemptOutcome.FAILED,
        next_state=RunState.SCHEDULED,
        available_at=t0 + s(10),
    )
    assert await complete(store, t0 + s(1), retry) == [True]

    for c in await claim(store, t0 + s(5), lookahead=10):  # a store may also refuse to claim
        assert c.run.id == first.run.id
        assert c.run.started_at is None
        assert not await store.run_start(RunStartParams(c.run.id, c.run.token, now=t0 + s(10)))


async def test_run_start_of_a_manual_run_allowed_on_paused_job(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=None)
    manual, _ = await store.run_trigger(RunTriggerParams(ref(job), now=t0 + s(1)))
    claimed = await claim_one(store, t0, lookahead=1)
    assert claimed.run.id == manual.id
    assert claimed.run.started_at is None
    await store.job_set_status(JobSetStatusParams(ref(job), JobStatus.PAUSED, now=t0 + s(0.5)))
    assert await store.run_start(RunStartParams(manual.id, claimed.run.token, now=t0 + s(1)))
    assert (await get_run(store, manual.id)).started_at == t0 + s(1)


# --- heartbeat --------------------------------------------------------------------------------


async def test_heartbeat_extends_own_current_leases_only(store: Store, t0: datetime) -> None:
    mine = await running_run(store, t0, "mine", worker=WORKER)
    theirs = await running_run(store, t0, "theirs", worker="other")
    done = await running_run(store, t0, "done", worker=WORKER)
    assert await complete(store, t0, completion(done)) == [True]

    now = t0 + s(10)
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(
            worker_id=WORKER,
            runs=[
                (mine.run.id, mine.run.token),
                (theirs.run.id, theirs.run.token),  # not my lease
                (done.run.id, done.run.token),  # no longer running
            ],
            lease_ttl=60,
            now=now,
        )
    )
    assert kept == {mine.run.id}
    assert (await get_run(store, mine.run.id)).lease_expires_at == now + s(60)
    untouched = await get_run(store, theirs.run.id)
    assert untouched.lease_expires_at == theirs.run.lease_expires_at


async def test_heartbeat_with_a_stale_token_is_refused(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(claimed.run.id, claimed.run.token - 1)], 60, now=t0 + s(1))
    )
    assert kept == set()
    assert (await get_run(store, claimed.run.id)).lease_expires_at == claimed.run.lease_expires_at


async def test_heartbeat_after_expiry_but_before_reaping_still_holds(
    store: Store, t0: datetime
) -> None:
    """Expiry alone rejects nothing: only a takeover (token bump) does."""
    claimed = await running_run(store, t0, "j")
    late = t0 + s(LEASE * 3)
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(claimed.run.id, claimed.run.token)], LEASE, now=late)
    )
    assert kept == {claimed.run.id}
    assert (await get_run(store, claimed.run.id)).lease_expires_at == late + s(LEASE)


async def test_heartbeat_of_nothing_and_of_unknown_runs(store: Store, t0: datetime) -> None:
    import uuid

    assert await store.runs_heartbeat(RunsHeartbeatParams(WORKER, [], LEASE, now=t0)) == set()
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(uuid.uuid4(), 1)], LEASE, now=t0)
    )
    assert kept == set()


async def test_heartbeat_of_a_claimed_ahead_run(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j", task=TASK)
    claimed = await claim_one(store, t0, lookahead=1)
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(claimed.run.id, claimed.run.token)], 90, now=t0 + s(0.5))
    )
    assert kept == {claimed.run.id}
    assert (await get_run(store, claimed.run.id)).lease_expires_at == t0 + s(90.5)
