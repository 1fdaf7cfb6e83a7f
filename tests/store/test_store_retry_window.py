"""Issue 16 item 6 in the store (both dialects): a job's retry window and classification are
stored, copied onto its scheduled and manual runs as the rest of the retry policy is, read
back with a claim; a replay opens a fresh window; the reaper ends a run whose lease expired
past its window ``retry_window_exhausted`` instead of retrying it."""

from __future__ import annotations

from datetime import datetime

from storekit import (
    LEASE,
    TENANT,
    claim_one,
    complete,
    completion,
    get_job,
    get_run,
    running_run,
    s,
    scheduled_run,
)

from duetime._types import AttemptOutcome, RetryPolicy, RunState
from duetime.store import Store
from duetime.store.base import JobRef, LeasesReapParams, RunReplayParams, RunTriggerParams

RULES = RetryPolicy(
    max_attempts=5,
    within=60.0,
    permanent_on=("KeyError", "myapp.errors.Fatal"),
    retry_on=("myapp.errors.Flaky",),
    permanent_on_status=(404,),
    retry_on_status=(409, 423),
)


async def test_rules_round_trip_through_jobs_and_runs(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0, "scheduled", retry=RULES)
    assert (await get_job(store, run.job_id)).retry == RULES
    claimed = await claim_one(store, t0)
    assert claimed.retry == RULES
    assert (claimed.retry_from, claimed.window_from) == (None, run.scheduled_for)

    manual, created = await store.run_trigger(
        RunTriggerParams(JobRef(TENANT, id=run.job_id), now=t0 + s(5))
    )
    assert created
    claimed_manual = await store.run_get_claimed(TENANT, manual.id)
    assert claimed_manual.retry == RULES
    assert claimed_manual.window_from == t0 + s(5)


async def test_a_policy_without_rules_stores_none(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0, "plain", retry=RetryPolicy(max_attempts=2))
    claimed = await claim_one(store, t0)
    assert claimed.retry == RetryPolicy(max_attempts=2)
    assert not claimed.retry.has_rules


async def test_the_reaper_ends_a_run_past_its_window(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", retry=RetryPolicy(max_attempts=5, within=60))
    first = t0 + s(LEASE + 1)  # 31 s after the run was due: inside the window
    result = await store.leases_reap(LeasesReapParams(limit=10, now=first))
    assert (result.rescheduled, result.dead) == (1, 0)
    again = await claim_one(store, first)
    assert again.run.id == claimed.run.id
    late = first + s(LEASE + 1)  # 62 s: a retry now would start past the window
    result = await store.leases_reap(LeasesReapParams(limit=10, now=late))
    assert (result.rescheduled, result.dead) == (0, 1)
    run = await get_run(store, claimed.run.id)
    assert (run.state, run.reason, run.attempt) == (RunState.DEAD, "retry_window_exhausted", 2)


async def test_a_replay_opens_a_fresh_window(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", retry=RetryPolicy(max_attempts=5, within=60))
    dead = completion(claimed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await complete(store, t0 + s(1), dead) == [True]
    later = t0 + s(3600)
    replayed = await store.runs_replay(
        RunReplayParams(tenant=TENANT, run_ids=[claimed.run.id], now=later)
    )
    assert replayed == [claimed.run.id]
    reclaimed = await claim_one(store, later)
    assert reclaimed.retry_from == later
    assert not reclaimed.retry_window_over(later + s(60))
    assert reclaimed.retry_window_over(later + s(61))


async def test_the_reaper_reschedules_a_run_that_never_started_past_its_window(
    store: Store, t0: datetime
) -> None:
    """A run claimed ahead of its instant never started; however late its lease lapses, its
    first attempt is still to come (the window only stops retries): back to scheduled."""
    run = await scheduled_run(store, t0, "j", retry=RetryPolicy(max_attempts=5, within=2))
    claimed = await claim_one(store, t0 - s(5), lookahead=10)
    assert (claimed.run.id, claimed.run.started_at) == (run.id, None)
    late = t0 + s(LEASE + 60)  # the lease and the window have both long passed
    result = await store.leases_reap(LeasesReapParams(limit=10, now=late))
    assert (result.rescheduled, result.dead) == (1, 0)
    back = await get_run(store, run.id)
    assert (back.state, back.reason) == (RunState.SCHEDULED, None)
