"""Overlap ``replace`` / ``buffer_one`` / ``max_waiting`` at their edges (issue 16 items 1 and
4, decision 0016): concurrent claims, a replaced run's retry, runs claimed ahead, a claim that
sees only part of a key's runs, the announcement of an outright cancel — both stores, frozen
clock (every instant passed as ``now``)."""

from __future__ import annotations

import asyncio
from datetime import datetime

from storekit import claim, complete, completion, get_run, job_with_runs, s
from test_store_buffer_one import runs_of

from duetime._types import AttemptOutcome, OverlapPolicy, RetryPolicy, RunState
from duetime.store import Store
from duetime.store.base import RunStartParams


async def test_concurrent_claims_of_waiting_keys_never_deadlock(store: Store, t0: datetime) -> None:
    # each claim locks its candidates, then the key; the trim under the key's lock used to
    # wait for the rows another claim held while that claim waited for the key: PostgreSQL's
    # deadlock detector aborted one claim (DeadlockDetected) about every other round
    failures: list[BaseException] = []
    policies = [
        {"overlap_policy": OverlapPolicy.BUFFER_ONE},
        {"overlap_policy": OverlapPolicy.REPLACE},
        {"overlap_policy": OverlapPolicy.SERIALIZE, "max_waiting": 2},
    ]
    for i in range(24):
        await job_with_runs(store, t0, f"j{i}", 12, **policies[i % 3])
        if i % 3 == 2:
            await claim(store, t0, worker="busy", limit=1)  # the key at its limit
        results = await asyncio.gather(
            *(claim(store, t0 + s(12), worker=f"w{k}", limit=1) for k in range(3)),
            return_exceptions=True,
        )
        failures += [r for r in results if isinstance(r, BaseException)]
    assert failures == []


async def test_a_replaced_runs_retry_is_asked_nothing(store: Store, t0: datetime) -> None:
    retry = RetryPolicy(max_attempts=3, backoff_base=0.5, backoff_factor=1.0, backoff_cap=0.5)
    await job_with_runs(
        store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE, replace_timeout=5.0, retry=retry
    )
    (old,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []  # the successor is due: the old run is asked
    # the old attempt failed instead of stopping: a retry
    failed = completion(
        old,
        outcome=AttemptOutcome.FAILED,
        next_state=RunState.SCHEDULED,
        available_at=t0 + s(1.5),
        reason=None,
    )
    assert await complete(store, t0 + s(1.1), failed) == [True]
    waiting = await get_run(store, old.run.id)
    assert (waiting.state, waiting.cancel_requested) == (RunState.SCHEDULED, False)
    (new,) = await claim(store, t0 + s(1.2))
    assert await complete(store, t0 + s(1.3), completion(new)) == [True]
    (again,) = await claim(store, t0 + s(1.6))
    assert again.run.id == old.run.id
    assert not again.run.cancel_requested
    # before: the retry was told "replaced" at once, and the next claim past the old
    # deadline cancelled it outright
    assert await store.runs_stop_requested([(again.run.id, again.run.token)]) == {}
    assert await claim(store, t0 + s(7)) == []
    assert (await get_run(store, old.run.id)).state is RunState.RUNNING


async def test_a_newer_run_claimed_ahead_supersedes_the_older_successor(
    store: Store, t0: datetime
) -> None:
    job = await job_with_runs(
        store, t0, "j", 3, overlap_policy=OverlapPolicy.REPLACE, replace_timeout=30.0
    )
    (a,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []  # B due: A asked to stop, B waits
    (c,) = await claim(store, t0 + s(1.5), lookahead=1.0)  # C (t0+2) claimed ahead
    assert c.run.scheduled_for == t0 + s(2)
    stopped = completion(
        a, outcome=AttemptOutcome.CANCELLED, next_state=RunState.CANCELLED, reason="replaced"
    )
    assert await complete(store, t0 + s(2.5), stopped) == [True]
    # a claim before C's start is written: C, newer and past its instant, keeps its place;
    # before, B's claim cancelled C outright and B ran
    assert await claim(store, t0 + s(2.6)) == []
    started = await store.run_start(
        RunStartParams(c.run.id, c.run.token, now=t0 + s(2.7), lease_ttl=30.0)
    )
    assert started
    assert [(r.state, r.reason) for r in await runs_of(store, job)] == [
        (RunState.CANCELLED, "replaced"),
        (RunState.SKIPPED, "superseded"),
        (RunState.RUNNING, None),
    ]


async def test_an_older_run_claimed_ahead_is_still_replaced(store: Store, t0: datetime) -> None:
    job = await job_with_runs(store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE)
    (ahead,) = await claim(store, t0 - s(0.5), lookahead=1.0)  # A (t0) claimed ahead
    assert ahead.run.started_at is None
    (b,) = await claim(store, t0 + s(1))  # B due, A never started: A is cancelled, B runs
    assert b.run.scheduled_for == t0 + s(1)
    assert [(r.state, r.reason) for r in await runs_of(store, job)] == [
        (RunState.CANCELLED, "replaced"),
        (RunState.RUNNING, None),
    ]


async def test_a_claim_that_sees_only_the_oldest_run_of_a_key_runs_the_newest(
    store: Store, t0: datetime
) -> None:
    # three serialize jobs, each busy with one run and one more due before x's runs: a claim
    # of one sees only x's oldest run among its candidates
    for i in range(3):
        await job_with_runs(store, t0 - s(10), f"ser{i}", 2, overlap_policy=OverlapPolicy.SERIALIZE)
    assert len(await claim(store, t0 - s(8), limit=10)) == 3
    x = await job_with_runs(store, t0, "x", 3, overlap_policy=OverlapPolicy.BUFFER_ONE)
    got = await claim(store, t0 + s(2.5), limit=1)
    # before: x's oldest run was claimed (a catch-up ran the oldest)
    assert [c.run.scheduled_for for c in got if c.run.job_id == x.id] in ([], [t0 + s(2)])
    assert [(r.state, r.reason) for r in await runs_of(store, x)][:2] == [
        (RunState.SKIPPED, "superseded"),
        (RunState.SKIPPED, "superseded"),
    ]


async def test_a_run_cancelled_past_its_replace_timeout_is_announced(
    store: Store, t0: datetime
) -> None:
    epoch = 0
    if getattr(store, "dialect", "") == "postgres":  # listening (it says "check all" first)
        epoch, _ = await store.wait_for_cancels(0, 10.0)
    await job_with_runs(
        store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE, replace_timeout=2.0
    )
    (old,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []  # asked: announced
    epoch, heard = await asyncio.wait_for(store.wait_for_cancels(epoch, 10.0), 10.0)
    assert heard is not None
    assert old.run.id in heard
    (new,) = await claim(store, t0 + s(3.5))  # past its deadline: cancelled outright
    assert new.run.scheduled_for == t0 + s(1)
    assert (await get_run(store, old.run.id)).state is RunState.CANCELLED
    # its worker hears at once (before: only at its next heartbeat, its slot held meanwhile)
    _, heard = await asyncio.wait_for(store.wait_for_cancels(epoch, 10.0), 10.0)
    assert heard is not None
    assert old.run.id in heard
