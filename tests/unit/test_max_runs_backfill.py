"""Misfire backfill cut by ``max_runs`` (issue 16 review): the missed occurrences past the cut
are recorded as a skip (``max_runs``) and ``explain`` says why, on both stores, with a frozen
clock and the scheduler's materialize driven directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from duetime import AsyncApp
from duetime._clock import FrozenClock
from duetime._types import JobStatus
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job

MINUTE = timedelta(minutes=1)


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, clock=clock, migrate=True) as opened:
        yield opened


async def test_missed_occurrences_past_max_runs_are_recorded_and_explained(
    app: AsyncApp, clock: FrozenClock
) -> None:
    t0 = clock.now()
    job = await app.schedule(
        "poll", task="duetime.noop", every=60, misfire="backfill", max_backfill=10, max_runs=4
    )
    clock.advance(30 * 60)  # occurrences t0 .. t0+28 min are missed (60 s grace)
    await materialize(app.store, plan_job, horizon=10.0, limit=100, now=clock.now())
    assert (await app.get("poll")).status is JobStatus.COMPLETED
    skips = await app.store.skips_list(app.tenant, job.id)
    assert sorted((s.first - t0, s.last - t0, s.count, s.reason) for s in skips) == [
        (timedelta(0), 18 * MINUTE, 19, "misfire_backfill"),
        (23 * MINUTE, 28 * MINUTE, 6, "max_runs"),
    ]
    why = await app.explain("poll")
    (line,) = [o for o in why.last if o.reason == "max_runs"]
    assert (line.count, line.instant) == (6, t0 + 23 * MINUTE)
    assert "max_runs" in line.why
