"""Declaring jobs again at every start (issue 17, item 8): a one-shot declared as a delay keeps
the instant of its first declaration, and one that ran does not run again; ``rearm=True``
re-arms on purpose; ``update_job(at=<delay>)`` counts from now. On both stores, with a frozen
clock, the scheduler's materialize and a worker's claim and completion driven directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from duetime import AsyncApp
from duetime._clock import FrozenClock
from duetime._types import AttemptOutcome, Job, JobStatus, Run, RunState
from duetime.cli._demo import register_demo
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from duetime.store.base import (
    RunCompletion,
    RunListParams,
    RunsClaimParams,
    RunsCompleteParams,
)
from duetime.testing import FrozenApp, assert_triggered, drain

HOURS_3 = timedelta(hours=3)


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, clock=clock, migrate=True) as opened:
        yield opened


async def reminder(app: AsyncApp, *, rearm: bool = False) -> Job:
    """The README's one-shot, as a program declares it at start-up."""
    return await app.schedule("reminder", task="duetime.noop", at=HOURS_3, rearm=rearm)


async def tick(app: AsyncApp, clock: FrozenClock) -> int:
    """One scheduler batch at the clock's instant: the runs it created."""
    result = await materialize(app.store, plan_job, horizon=10.0, now=clock.now())
    return result.runs_created


async def run_due(app: AsyncApp, clock: FrozenClock, *, fail: bool = False) -> int:
    """A worker claims the runs due at the clock's instant and ends each (succeeded, or dead
    when ``fail``); how many."""
    now = clock.now()
    claimed = await app.store.runs_claim(
        RunsClaimParams(
            worker_id="w1",
            tasks=("duetime.noop", "duetime.fail"),
            limit=100,
            lease_ttl=30.0,
            lookahead=0.0,
            now=now,
        )
    )
    completions = [
        RunCompletion(
            run_id=c.run.id,
            token=c.run.token,
            worker_id="w1",
            attempt=c.run.attempt,
            claimed_at=now,
            started_at=now,
            outcome=AttemptOutcome.FAILED if fail else AttemptOutcome.SUCCEEDED,
            next_state=RunState.DEAD if fail else RunState.SUCCEEDED,
            reason="permanent_error" if fail else None,
            completes_job=c.one_shot,
        )
        for c in claimed
    ]
    applied = await app.store.runs_complete(RunsCompleteParams(completions, now=now))
    assert all(applied)
    return len(claimed)


async def runs_of(app: AsyncApp, job: Job) -> list[Run]:
    page = await app.store.runs_list(RunListParams(tenant=app.tenant, job_id=job.id, limit=100))
    return page.items


async def test_declared_again_it_keeps_its_instant(app: AsyncApp, clock: FrozenClock) -> None:
    first = await reminder(app)
    assert first.schedule.at == clock.now() + HOURS_3
    assert first.declared_delay == HOURS_3
    clock.advance(600)  # the program starts again ten minutes later
    again = await reminder(app)
    assert not again.created
    assert replace(again, updated_at=first.updated_at) == first
    assert (again.schedule.at, again.next_fire_at) == (first.schedule.at, first.next_fire_at)


async def test_one_that_ran_does_not_run_again(store_url: str, clock: FrozenClock) -> None:
    # with duetime.testing: drain() is the scheduler's pass and a worker at the frozen instant
    async with FrozenApp(store_url, clock=clock) as app:
        first = await reminder(app)
        clock.advance(HOURS_3)
        assert [r.state for r in await drain(app)] == [RunState.SUCCEEDED]
        assert (await app.get("reminder")).status is JobStatus.COMPLETED

        clock.advance(minutes=1)  # restarted after it ran
        again = await reminder(app)
        assert (again.status, again.next_fire_at, again.schedule) == (
            JobStatus.COMPLETED,
            None,
            first.schedule,
        )
        clock.advance(HOURS_3)
        assert await drain(app) == []
        await assert_triggered(app, first, count=1)


async def test_runs_written_ahead_are_kept(app: AsyncApp, clock: FrozenClock) -> None:
    first = await reminder(app)
    clock.advance(HOURS_3 - timedelta(seconds=5))  # within the scheduler's horizon
    assert await tick(app, clock) == 1
    await reminder(app)
    [run] = await runs_of(app, first)
    assert (run.state, run.scheduled_for) == (RunState.SCHEDULED, first.schedule.at)


async def test_rearm_fires_it_again_from_now(app: AsyncApp, clock: FrozenClock) -> None:
    first = await reminder(app)
    clock.advance(HOURS_3)
    await tick(app, clock)
    await run_due(app, clock)
    clock.advance(60)
    rearmed = await reminder(app, rearm=True)
    assert rearmed.status is JobStatus.ACTIVE
    assert rearmed.schedule.at == rearmed.next_fire_at == clock.now() + HOURS_3
    clock.advance(HOURS_3)
    assert await tick(app, clock) == 1
    assert len(await runs_of(app, first)) == 2


async def test_rearm_skips_the_runs_written_ahead(app: AsyncApp, clock: FrozenClock) -> None:
    first = await reminder(app)
    clock.advance(HOURS_3 - timedelta(seconds=5))
    await tick(app, clock)
    await reminder(app, rearm=True)
    assert await runs_of(app, first) == []  # never due: withdrawn (docs/api.md)


async def test_another_delay_is_a_changed_schedule(app: AsyncApp, clock: FrozenClock) -> None:
    await reminder(app)
    clock.advance(600)
    changed = await app.schedule("reminder", task="duetime.noop", at=timedelta(hours=2))
    assert changed.schedule.at == clock.now() + timedelta(hours=2)
    assert changed.declared_delay == timedelta(hours=2)


async def test_an_instant_declared_instead_replaces_the_delay(
    app: AsyncApp, clock: FrozenClock
) -> None:
    first = await reminder(app)
    assert first.schedule.at is not None
    same_instant = await app.schedule("reminder", task="duetime.noop", at=first.schedule.at)
    assert same_instant.schedule == first.schedule
    assert same_instant.declared_delay is None
    clock.advance(600)
    assert (await reminder(app)).schedule.at == clock.now() + HOURS_3


async def test_an_update_keeps_the_delay_unless_it_gives_one(
    app: AsyncApp, clock: FrozenClock
) -> None:
    first = await reminder(app)
    clock.advance(600)
    updated = await app.update_job("reminder", priority=5)
    assert (updated.schedule, updated.declared_delay) == (first.schedule, HOURS_3)
    assert (await reminder(app)).schedule == first.schedule  # still the same declaration

    moved = await app.update_job("reminder", at=HOURS_3)  # an update's delay counts from now
    assert moved.schedule.at == clock.now() + HOURS_3
    assert moved.declared_delay == HOURS_3


async def test_the_demo_restarted_adds_no_dead_letter(tmp_path: Path, t0: datetime) -> None:
    """``duetime up --demo`` twice on one SQLite file: the second start re-declares the demo
    jobs; the one-shots that ran (one of them dead) do not run again."""
    db = str(tmp_path / "demo.db")
    clock = FrozenClock(t0)
    async with AsyncApp(db, clock=clock, migrate=True) as first:
        await register_demo(first)
        clock.advance(5)  # every demo one-shot is due
        await tick(first, clock)
        await run_due(first, clock, fail=True)  # all dead: the worst case for the queue
        dead = await first.runs.find(state=RunState.DEAD, limit=100)
        assert {r.job_name for r in dead.items} >= {"demo.doomed", "demo.one-shot"}
    clock.advance(60)
    async with AsyncApp(db, clock=clock) as restarted:
        await register_demo(restarted)
        for name in ("demo.one-shot", "demo.flaky", "demo.doomed"):
            assert (await restarted.get(name)).status is JobStatus.COMPLETED
        clock.advance(5)
        created = await materialize(restarted.store, plan_job, horizon=10.0, now=clock.now())
        assert created.jobs == 1  # demo.every-2s only
        again = await restarted.runs.find(state=RunState.DEAD, limit=100)
        assert len(again.items) == len(dead.items)
