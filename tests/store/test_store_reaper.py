"""leases_reap: expired leases go back to scheduled (attempt ``lost``) or dead."""

from __future__ import annotations

import asyncio
from datetime import datetime

from storekit import (
    LEASE,
    TENANT,
    WORKER,
    claim,
    claim_one,
    complete,
    completion,
    get_job,
    get_run,
    list_runs,
    make_job,
    materialize,
    running_run,
    s,
    scheduled_run,
)

from duetime._types import (
    AttemptOutcome,
    DeliveryMode,
    JobStatus,
    RetryPolicy,
    RunState,
    Schedule,
    ScheduleKind,
)
from duetime.store import Store
from duetime.store.base import LeasesReapParams, RunsHeartbeatParams, RunStartParams


async def reap(store: Store, now: datetime, limit: int = 1000) -> tuple[int, int]:
    result = await store.leases_reap(LeasesReapParams(limit=limit, now=now))
    return result.rescheduled, result.dead


async def test_unexpired_leases_are_untouched(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    assert await reap(store, t0 + s(LEASE - 1)) == (0, 0)
    assert await get_run(store, claimed.run.id) == claimed.run
    assert await store.attempts_list(TENANT, claimed.run.id) == []


async def test_expired_lease_is_rescheduled_and_its_attempt_lost(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0, "j", worker="w-9")
    now = t0 + s(LEASE + 1)
    assert await reap(store, now) == (1, 0)

    run = await get_run(store, claimed.run.id)
    assert run.state is RunState.SCHEDULED
    assert run.available_at == now
    assert run.token > claimed.run.token
    assert run.lease_owner is None
    assert run.lease_expires_at is None
    assert run.finished_at is None
    assert run.attempt == 1
    (attempt,) = await store.attempts_list(TENANT, run.id)
    assert (attempt.number, attempt.token, attempt.worker_id) == (1, claimed.run.token, "w-9")
    assert attempt.outcome is AttemptOutcome.LOST
    assert attempt.claimed_at == t0
    assert attempt.started_at == t0
    assert attempt.finished_at == now

    again = await claim_one(store, now)
    assert again.run.attempt == 2
    assert again.run.token > run.token
    assert await reap(store, now) == (0, 0)  # nothing else expired


async def test_old_holder_is_fenced_after_reaping(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1)  # claimed ahead
    now = t0 + s(LEASE + 1)
    assert await reap(store, now) == (1, 0)
    assert not await store.run_start(RunStartParams(claimed.run.id, claimed.run.token, now=now))
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(claimed.run.id, claimed.run.token)], LEASE, now=now)
    )
    assert kept == set()


async def test_out_of_attempts_goes_dead(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", retry=RetryPolicy(max_attempts=2))
    first = t0 + s(LEASE + 1)
    assert await reap(store, first) == (1, 0)
    second = await claim_one(store, first)
    assert second.run.attempt == 2
    now = first + s(LEASE + 1)
    assert await reap(store, now) == (0, 1)

    run = await get_run(store, claimed.run.id)
    assert run.state is RunState.DEAD
    assert run.reason == "attempts_exhausted"
    assert run.finished_at == now
    assert run.lease_owner is None
    assert [a.outcome for a in await store.attempts_list(TENANT, run.id)] == [
        AttemptOutcome.LOST,
        AttemptOutcome.LOST,
    ]
    assert await claim(store, now + s(100)) == []


async def test_single_attempt_job_dies_at_once(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", retry=RetryPolicy(max_attempts=1))
    assert await reap(store, t0 + s(LEASE + 1)) == (0, 1)
    run = await get_run(store, claimed.run.id)
    assert (run.state, run.reason) == (RunState.DEAD, "attempts_exhausted")


async def test_at_most_once_started_run_is_not_retried(store: Store, t0: datetime) -> None:
    claimed = await running_run(
        store,
        t0,
        "j",
        delivery=DeliveryMode.AT_MOST_ONCE,
        retry=RetryPolicy(max_attempts=5),
    )
    assert claimed.run.started_at == t0
    assert await reap(store, t0 + s(LEASE + 1)) == (0, 1)
    run = await get_run(store, claimed.run.id)
    assert (run.state, run.reason) == (RunState.DEAD, "lease_lost")
    (attempt,) = await store.attempts_list(TENANT, run.id)
    assert attempt.outcome is AttemptOutcome.LOST


async def test_a_run_claimed_ahead_that_never_started_owes_its_first_attempt(
    store: Store, t0: datetime
) -> None:
    """Claimed ahead of its instant, then its worker died: nothing of it ran, so its lease's
    end neither spends its only attempt nor, at most once, ends it — it goes back to
    ``scheduled`` with the attempt given back (the lapsed lease is still recorded)."""
    for delivery in (DeliveryMode.AT_LEAST_ONCE, DeliveryMode.AT_MOST_ONCE):
        run = await scheduled_run(
            store,
            t0 + s(5),
            f"ahead-{delivery}",
            delivery=delivery,
            retry=RetryPolicy(max_attempts=1),
        )
        ahead = await claim_one(store, t0, lookahead=10.0)
        assert (ahead.run.id, ahead.run.started_at, ahead.run.attempt) == (run.id, None, 1)
        assert await reap(store, t0 + s(LEASE + 1)) == (1, 0)
        back = await get_run(store, run.id)
        assert (back.state, back.attempt, back.reason) == (RunState.SCHEDULED, 0, None)
        (lost,) = await store.attempts_list(TENANT, run.id)
        assert (lost.outcome, lost.started_at) == (AttemptOutcome.LOST, None)
        again = await claim_one(store, t0 + s(LEASE + 2))
        assert (again.run.id, again.run.attempt) == (run.id, 1)
        assert again.run.started_at is not None  # due now: started at its claim
        assert await complete(store, t0 + s(LEASE + 3), completion(again)) == [True]


async def test_heartbeat_keeps_the_reaper_away(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(WORKER, [(claimed.run.id, claimed.run.token)], LEASE, now=t0 + s(20))
    )
    assert kept == {claimed.run.id}
    assert await reap(store, t0 + s(LEASE + 10)) == (0, 0)
    assert await reap(store, t0 + s(20 + LEASE + 1)) == (1, 0)


async def test_reap_limit(store: Store, t0: datetime) -> None:
    for i in range(3):
        await running_run(store, t0, f"j{i}")
    now = t0 + s(LEASE + 1)
    assert sum(await reap(store, now, limit=2)) == 2
    assert sum(await reap(store, now, limit=2)) == 1
    assert sum(await reap(store, now, limit=2)) == 0


async def test_only_running_runs_are_reaped(store: Store, t0: datetime) -> None:
    scheduled = await scheduled_run(store, t0, "scheduled")
    assert await reap(store, t0 + s(3600)) == (0, 0)
    assert await get_run(store, scheduled.id) == scheduled


async def test_reaping_a_one_shot_run_to_death_completes_its_job(
    store: Store, t0: datetime
) -> None:
    job = await make_job(
        store,
        "once",
        next_fire_at=t0,
        schedule=Schedule(kind=ScheduleKind.AT, at=t0),
        retry=RetryPolicy(max_attempts=1),
    )
    await materialize(store, t0)
    await claim_one(store, t0)
    assert await reap(store, t0 + s(LEASE + 1)) == (0, 1)
    assert (await get_job(store, job.id)).status is JobStatus.COMPLETED


async def test_concurrent_reapers_reap_each_lease_once(
    store: Store, make_store, t0: datetime
) -> None:
    other = await make_store()
    claimed = [await running_run(store, t0, f"j{i}") for i in range(8)]
    now = t0 + s(LEASE + 1)
    results = await asyncio.gather(
        *[
            st.leases_reap(LeasesReapParams(limit=3, now=now))
            for _ in range(4)
            for st in (store, other)
        ]
    )
    assert sum(r.rescheduled for r in results) == len(claimed)
    assert sum(r.dead for r in results) == 0
    for c in claimed:
        run = await get_run(store, c.run.id)
        assert run.state is RunState.SCHEDULED
        attempts = await store.attempts_list(TENANT, run.id)
        assert [a.outcome for a in attempts] == [AttemptOutcome.LOST]
    assert all(r.token > claimed[0].run.token for r in await list_runs(store))
