"""Overlap ``replace`` waits for the run it replaces (issue 16 item 1, decision 0016) — both
stores, through the real store on a frozen clock (every instant passed as ``now``)."""

from __future__ import annotations

import asyncio
from datetime import datetime

from storekit import (
    LEASE,
    TENANT,
    claim,
    complete,
    completion,
    get_run,
    job_with_runs,
    list_runs,
    s,
)

from duetime._types import AttemptOutcome, OverlapPolicy, RunState
from duetime.store import Store
from duetime.store.base import LeasesReapParams, RunStartParams


async def test_the_successor_waits_until_the_replaced_run_has_stopped(
    store: Store, t0: datetime
) -> None:
    epoch = 0
    if getattr(store, "dialect", "") == "postgres":  # listening (it says "check all" first)
        epoch, _ = await store.wait_for_cancels(0, 10.0)
    await job_with_runs(store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE)
    (old,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []  # before: the successor started at once
    asked = await get_run(store, old.run.id)
    assert (asked.state, asked.cancel_requested) == (RunState.RUNNING, True)
    assert asked.token == old.run.token  # its outcome will count
    # the worker holding it hears at once (NOTIFY on PostgreSQL, this process on SQLite)
    _, heard = await asyncio.wait_for(store.wait_for_cancels(epoch, 10.0), 10.0)
    assert heard is not None
    assert old.run.id in heard
    assert await store.runs_stop_requested([(old.run.id, old.run.token)]) == {
        old.run.id: "replaced"
    }
    assert await claim(store, t0 + s(2)) == []  # still running: the successor still waits
    stopped = completion(
        old, outcome=AttemptOutcome.CANCELLED, next_state=RunState.CANCELLED, reason="replaced"
    )
    assert await complete(store, t0 + s(2), stopped) == [True]
    (new,) = await claim(store, t0 + s(2))
    assert new.run.scheduled_for == t0 + s(1)
    ended = await get_run(store, old.run.id)
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")
    (attempt,) = await store.attempts_list(TENANT, old.run.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED


async def test_past_replace_timeout_the_old_run_is_cancelled_and_the_successor_starts(
    store: Store, t0: datetime
) -> None:
    await job_with_runs(
        store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE, replace_timeout=5.0
    )
    (old,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []
    assert await claim(store, t0 + s(5.9)) == []  # the deadline is t0 + 1 s + 5 s
    (new,) = await claim(store, t0 + s(6.1))
    assert new.run.scheduled_for == t0 + s(1)
    ended = await get_run(store, old.run.id)
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")
    assert ended.token == old.run.token + 1  # its late writes change nothing
    (attempt,) = await store.attempts_list(TENANT, old.run.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED
    assert "replace_timeout" in (attempt.error_message or "")


async def test_a_run_claimed_ahead_waits_at_its_instant_too(store: Store, t0: datetime) -> None:
    await job_with_runs(store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE)
    (old,) = await claim(store, t0)
    (ahead,) = await claim(store, t0 + s(0.5), lookahead=1.0)
    assert ahead.run.started_at is None
    started = await store.run_start(
        RunStartParams(ahead.run.id, ahead.run.token, now=t0 + s(1), lease_ttl=30.0)
    )
    assert not started  # back to waiting; the old run was asked to stop
    assert (await get_run(store, ahead.run.id)).state is RunState.SCHEDULED
    assert (await get_run(store, old.run.id)).cancel_requested


async def test_older_runs_waiting_for_a_replace_are_superseded(store: Store, t0: datetime) -> None:
    job = await job_with_runs(store, t0, "j", 4, overlap_policy=OverlapPolicy.REPLACE)
    (_old,) = await claim(store, t0)
    assert await claim(store, t0 + s(3)) == []
    runs = sorted(await list_runs(store, job_id=job.id), key=lambda r: r.scheduled_for)
    assert [(r.state, r.reason) for r in runs[1:]] == [
        (RunState.SKIPPED, "superseded"),
        (RunState.SKIPPED, "superseded"),
        (RunState.SCHEDULED, None),
    ]


async def test_a_replaced_run_whose_worker_died_is_reaped_as_replaced(
    store: Store, t0: datetime
) -> None:
    await job_with_runs(
        store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE, replace_timeout=2 * LEASE
    )
    (old,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []  # asked to stop; its worker never answers
    # its lease ran out but not its replace_timeout: its handler may still run (a worker
    # shutting down lets the lease lapse), so it stays, and its successor keeps waiting
    reaped = await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE + 1)))
    assert (reaped.rescheduled, reaped.dead) == (0, 0)
    assert (await get_run(store, old.run.id)).state is RunState.RUNNING
    assert await claim(store, t0 + s(LEASE + 1)) == []
    past = t0 + s(1 + 2 * LEASE + 1)  # its replace_deadline has passed
    reaped = await store.leases_reap(LeasesReapParams(now=past))
    assert reaped.rescheduled == 0
    ended = await get_run(store, old.run.id)
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")  # not retried
    (new,) = await claim(store, past)
    assert new.run.scheduled_for == t0 + s(1)
