"""A changed schedule takes effect from its next occurrence (issue 16, item 2): an ``every``
keeps its anchor and never fires at the instant of the change, a cron change neither; the same
declaration again keeps the stored instant and anchor. Through every path that changes a
schedule — ``app.schedule`` declared again, ``app.update_job``, REST ``PATCH`` — on
both stores, with a frozen clock, the scheduler's materialize and a worker's claim and
completion driven directly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from duetime import AsyncApp
from duetime._clock import FrozenClock
from duetime._types import AttemptOutcome, Job, Run, RunState
from duetime.api import create_api
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from duetime.store.base import (
    RunCompletion,
    RunListParams,
    RunsClaimParams,
    RunsCompleteParams,
)

Change = Callable[[AsyncApp, dict[str, Any]], Awaitable[Job]]


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, clock=clock, migrate=True) as opened:
        yield opened


async def tick(app: AsyncApp, clock: FrozenClock) -> int:
    """One scheduler batch at the clock's instant (10 s horizon): the runs it created."""
    result = await materialize(app.store, plan_job, horizon=10.0, now=clock.now())
    return result.runs_created


async def run_due(app: AsyncApp, now: datetime, *, lookahead: float = 0.0) -> list[Run]:
    """A worker claims the runs due at ``now`` (or within ``lookahead``) and ends each."""
    claimed = await app.store.runs_claim(
        RunsClaimParams(
            worker_id="w1",
            tasks=("duetime.noop",),
            limit=100,
            lease_ttl=30.0,
            lookahead=lookahead,
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
            outcome=AttemptOutcome.SUCCEEDED,
            next_state=RunState.SUCCEEDED,
        )
        for c in claimed
    ]
    assert all(await app.store.runs_complete(RunsCompleteParams(completions, now=now)))
    return [c.run for c in claimed]


async def runs_of(app: AsyncApp, job: Job) -> list[Run]:
    page = await app.store.runs_list(RunListParams(tenant=app.tenant, job_id=job.id, limit=100))
    return sorted(page.items, key=lambda r: r.scheduled_for)


# --- the paths that change a schedule -----------------------------------------------------------


async def declared_again(app: AsyncApp, schedule: dict[str, Any]) -> Job:
    return await app.schedule("poll", task="duetime.noop", **schedule)


async def updated(app: AsyncApp, schedule: dict[str, Any]) -> Job:
    return await app.update_job("poll", **schedule)


def _rest_body(schedule: dict[str, Any]) -> dict[str, Any]:
    return {k: v.total_seconds() if isinstance(v, timedelta) else v for k, v in schedule.items()}


async def _rest(app: AsyncApp, method: str, body: dict[str, Any]) -> Job:
    transport = httpx.ASGITransport(app=create_api(app, auth_required=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        response = await client.request(method, "/api/v1/jobs/poll", json=body)
    assert response.status_code == 200, response.text
    return await app.get("poll")


async def patched(app: AsyncApp, schedule: dict[str, Any]) -> Job:
    return await _rest(app, "PATCH", _rest_body(schedule))


PATHS = pytest.mark.parametrize("change", [declared_again, updated, patched])
"""The REST API has no PUT: ``POST /jobs`` only creates (a name in use is 409)."""


# --- every: the case ---------------------------------------------------------------------


async def ran_twice_every_minute(app: AsyncApp, clock: FrozenClock) -> Job:
    """A job every 60 s from the clock's instant, run at +0 s and +60 s, the clock 3.5 s past
    the second run."""
    job = await app.schedule("poll", task="duetime.noop", every=60)
    for _ in range(2):
        assert await tick(app, clock) == 1
        assert len(await run_due(app, clock.now())) == 1
        clock.advance(60)
    clock.advance(-60 + 3.5)
    return job


@PATHS
async def test_a_longer_interval_does_not_fire_at_the_change(
    app: AsyncApp, clock: FrozenClock, change: Change
) -> None:
    job = await ran_twice_every_minute(app, clock)
    anchor = job.schedule.anchor
    assert anchor is not None
    changed = await change(app, {"every": 120})
    assert changed.schedule.every == timedelta(seconds=120)
    assert changed.schedule.anchor == anchor  # the anchor is kept
    assert changed.next_fire_at == anchor + timedelta(seconds=120)  # first after the change
    assert await tick(app, clock) == 0  # nothing at the instant of the change
    clock.set(anchor + timedelta(seconds=120))
    assert await tick(app, clock) == 1
    assert [r.scheduled_for - anchor for r in await runs_of(app, job)] == [
        timedelta(0),
        timedelta(seconds=60),
        timedelta(seconds=120),
    ]


@PATHS
async def test_a_shorter_interval_does_not_catch_up(
    app: AsyncApp, clock: FrozenClock, change: Change
) -> None:
    """Every 60 s → every 25 s, 50 s after the last run: the new occurrences at +75 s and
    +100 s passed already (before the change): the first is +125 s, not one at once."""
    job = await app.schedule("poll", task="duetime.noop", every=60)
    anchor = clock.now()
    await tick(app, clock)
    await run_due(app, clock.now())
    clock.advance(60)
    await tick(app, clock)
    await run_due(app, clock.now())
    clock.advance(50)  # +110 s
    changed = await change(app, {"every": 25})
    assert changed.next_fire_at == anchor + timedelta(seconds=125)
    assert await tick(app, clock) == 0
    assert len(await runs_of(app, job)) == 2


async def test_runs_written_ahead_give_way_to_the_new_interval(
    app: AsyncApp, clock: FrozenClock
) -> None:
    job = await app.schedule("poll", task="duetime.noop", every=60)
    anchor = clock.now()
    await tick(app, clock)
    await run_due(app, clock.now())
    clock.advance(55)
    assert await tick(app, clock) == 1  # +60 s written ahead
    changed = await app.update_job("poll", every=90)
    assert changed.next_fire_at == anchor + timedelta(seconds=90)
    # the run written ahead, never due, is withdrawn (deleted): only the one that ran is left
    assert [r.scheduled_for for r in await runs_of(app, job)] == [anchor]


async def test_an_occurrence_started_ahead_of_its_instant_is_not_fired_again(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """A worker may start a run a moment before its instant: a change in that moment to an
    interval sharing that occurrence must not fire it a second time."""
    await app.schedule("poll", task="duetime.noop", every=60)
    anchor = clock.now()
    await tick(app, clock)
    await run_due(app, clock.now())
    clock.advance(59.9)
    assert await tick(app, clock) == 1
    [early] = await run_due(app, clock.now(), lookahead=1.0)  # +60 s, claimed and run early
    assert early.scheduled_for == anchor + timedelta(seconds=60)
    changed = await app.update_job("poll", every=30)  # +60 s is one of its occurrences too
    assert changed.next_fire_at == anchor + timedelta(seconds=90)


async def test_an_explicit_anchor_given_with_the_change_is_used(
    app: AsyncApp, clock: FrozenClock
) -> None:
    await app.schedule("poll", task="duetime.noop", every=60)
    clock.advance(10)
    anchor = clock.now() + timedelta(seconds=7)
    changed = await app.update_job("poll", every=30, anchor=anchor)
    assert (changed.schedule.anchor, changed.next_fire_at) == (anchor, anchor)
    past = clock.now() - timedelta(seconds=100)  # an anchor in the past: no catch-up either
    changed = await app.update_job("poll", every=30, anchor=past)
    assert changed.next_fire_at == past + timedelta(seconds=120)


# --- the same declaration again ------------------------------------------------------------------


@pytest.mark.parametrize("every", [60, timedelta(minutes=1), "60 seconds", "1 minute", "PT1M"])
async def test_the_same_interval_declared_again_keeps_instant_and_anchor(
    app: AsyncApp, clock: FrozenClock, every: Any
) -> None:
    first = await app.schedule("poll", task="duetime.noop", every=60)
    await tick(app, clock)
    first = await app.get("poll")
    clock.advance(25)
    again = await app.schedule("poll", task="duetime.noop", every=every)
    assert (again.schedule, again.next_fire_at) == (first.schedule, first.next_fire_at)
    assert await tick(app, clock) == 0
    assert [r.state for r in await runs_of(app, first)] == [RunState.SCHEDULED]


async def test_the_same_calendar_interval_declared_again_keeps_its_instant(
    app: AsyncApp, clock: FrozenClock
) -> None:
    first = await app.schedule("daily", task="duetime.noop", every="1 day", tz="Europe/Paris")
    clock.advance(3600)
    again = await app.schedule("daily", task="duetime.noop", every="1 days", tz="Europe/Paris")
    assert (again.schedule, again.next_fire_at) == (first.schedule, first.next_fire_at)
    other_zone = await app.schedule("daily", task="duetime.noop", every="1 day", tz="Asia/Tokyo")
    assert other_zone.schedule.tz == "Asia/Tokyo"  # a zone is part of a calendar interval
    assert other_zone.schedule.anchor == first.schedule.anchor
    assert other_zone.next_fire_at == first.schedule.anchor + timedelta(days=1)  # no DST there


async def test_24_hours_is_another_declaration_than_1_day(
    app: AsyncApp, clock: FrozenClock
) -> None:
    first = await app.schedule("daily", task="duetime.noop", every="1 day", tz="Europe/Paris")
    clock.advance(3600)
    fixed = await app.schedule("daily", task="duetime.noop", every="24 hours", tz="Europe/Paris")
    assert fixed.schedule.every == timedelta(hours=24)
    assert fixed.schedule.every_calendar is None
    assert fixed.schedule.anchor == first.schedule.anchor
    assert fixed.next_fire_at == first.next_fire_at + timedelta(hours=24)  # from the anchor


# --- cron, and between kinds ---------------------------------------------------------------------


@PATHS
async def test_a_changed_cron_does_not_fire_at_the_change(
    app: AsyncApp, clock: FrozenClock, change: Change
) -> None:
    """At a minute's start (the clock's ``t0``), changed to every minute: its first fire is
    the next minute, not this instant, and nothing is caught up."""
    await app.schedule("poll", task="duetime.noop", cron="0 * * * *")
    changed = await change(app, {"cron": "* * * * *"})
    assert changed.next_fire_at == clock.now() + timedelta(minutes=1)
    assert await tick(app, clock) == 0


@PATHS
async def test_cron_changed_to_every_counts_from_the_change(
    app: AsyncApp, clock: FrozenClock, change: Change
) -> None:
    await app.schedule("poll", task="duetime.noop", cron="0 * * * *")
    clock.advance(12)
    changed = await change(app, {"every": 30})
    assert changed.schedule.anchor == clock.now()
    assert changed.next_fire_at == clock.now() + timedelta(seconds=30)
    assert await tick(app, clock) == 0


async def test_every_changed_to_cron_does_not_fire_at_the_change(
    app: AsyncApp, clock: FrozenClock
) -> None:
    job = await ran_twice_every_minute(app, clock)
    changed = await app.update_job("poll", cron="*/2 * * * *")
    first = changed.next_fire_at
    assert first is not None
    assert timedelta(0) < first - clock.now() <= timedelta(minutes=2)
    assert (first.minute % 2, first.second) == (0, 0)
    assert await tick(app, clock) == 0
    assert len(await runs_of(app, job)) == 2


async def test_a_new_every_job_still_fires_at_once(app: AsyncApp, clock: FrozenClock) -> None:
    """Creating is not changing: a new ``every`` job's first run is at its registration."""
    job = await app.schedule("poll", task="duetime.noop", every=60)
    assert job.next_fire_at == clock.now()


# --- an occurrence written ahead and shared by the new schedule ---------------------------------


@PATHS
async def test_an_occurrence_written_ahead_and_shared_by_the_new_interval_fires(
    app: AsyncApp, clock: FrozenClock, change: Change
) -> None:
    """Every 60 s → every 120 s at +115 s: the +120 s run was written ahead (the 10 s horizon)
    and withdrawn by the change; the new interval's first instant is +120 s too, and it fires
    (the withdrawn run, never due, does not hold its instant)."""
    job = await app.schedule("poll", task="duetime.noop", every=60)
    anchor = clock.now()
    clock.advance(115)
    await tick(app, clock)  # +0, +60 (never claimed) and +120 s, written ahead
    changed = await change(app, {"every": 120})
    assert changed.next_fire_at == anchor + timedelta(seconds=120)
    assert await tick(app, clock) == 1
    clock.advance(5)
    assert [r.scheduled_for for r in await run_due(app, clock.now())] == [
        anchor + timedelta(seconds=120)
    ]
    assert len(await runs_of(app, job)) == 3  # +0 and +60 s skipped (due before the change)


async def test_a_cron_occurrence_written_ahead_and_shared_by_the_new_cron_fires(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """*/5 → */10 five seconds before a :10 (the reviewer's case): the :10 run fires."""
    start = clock.now()
    tens = start + timedelta(minutes=10 - start.minute % 10)
    clock.set(tens - timedelta(minutes=1))
    job = await app.schedule("poll", task="duetime.noop", cron="*/5 * * * *")
    clock.set(tens - timedelta(seconds=5))
    await tick(app, clock)  # the :10 run, written ahead
    changed = await app.update_job("poll", cron="*/10 * * * *")
    assert changed.next_fire_at == tens
    assert await tick(app, clock) == 1
    clock.set(tens)
    assert [r.scheduled_for for r in await run_due(app, clock.now())] == [tens]
    assert [r.state for r in await runs_of(app, job)] == [RunState.SUCCEEDED]


async def test_a_pause_and_resume_before_an_occurrence_written_ahead_fire_it(
    app: AsyncApp, clock: FrozenClock
) -> None:
    job = await app.schedule("poll", task="duetime.noop", every=60)
    anchor = clock.now()
    clock.advance(55)
    await tick(app, clock)  # +0 (due, never claimed) and +60 s, written ahead
    await app.pause("poll")
    clock.advance(1)
    resumed = await app.resume("poll")
    assert resumed.next_fire_at == anchor + timedelta(seconds=60)
    assert await tick(app, clock) == 1
    clock.advance(4)
    assert [r.scheduled_for for r in await run_due(app, clock.now())] == [
        anchor + timedelta(seconds=60)
    ]
    first = (await runs_of(app, job))[0]
    assert (first.scheduled_for, first.state, first.reason) == (
        anchor,
        RunState.SKIPPED,
        "paused",
    )
