"""The scheduler paces bursts of future occurrences, never overdue or imminent ones, and a
paced tick still materializes everything within the horizon."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from duetime import AsyncApp
from duetime._config import Settings
from duetime.registration import JobSpec
from duetime.scheduler.materializer import PACE_AHEAD, _RecordingPlanner, paced


async def test_a_paced_tick_materializes_every_occurrence_within_the_horizon(
    store_url: str,
) -> None:
    settings = Settings(database_url=store_url, scheduler_batch=2, scheduler_horizon=60.0)
    async with AsyncApp(settings=settings, migrate=True) as app:
        soon = datetime.now(UTC) + timedelta(seconds=30)
        specs = [JobSpec(name=f"later-{i}", task="duetime.noop", at=soon) for i in range(5)]
        assert await app.schedule_many(specs) == 5
        materializer = app.materializer()
        result = await materializer.run_once(pace=True)
        assert (result.jobs, result.runs_created) == (5, 5)
        assert len((await app.runs()).items) == 5


async def test_only_batches_whose_occurrences_are_all_far_ahead_are_paced(
    store_url: str,
) -> None:
    settings = Settings(database_url=store_url, scheduler_tick=1.0)
    async with AsyncApp(settings=settings, migrate=True) as app:
        now = datetime.now(UTC)
        materializer = app.materializer()
        far = now + timedelta(seconds=PACE_AHEAD * settings.scheduler_tick + 5)
        near = now + timedelta(seconds=PACE_AHEAD * settings.scheduler_tick / 2)
        jobs = {}
        for name, at in (("far", far), ("near", near)):
            await app.schedule(name, task="duetime.noop", at=at)
            jobs[name] = await app.get(name)

        def batch(*names: str) -> list:  # type: ignore[type-arg]
            planner = _RecordingPlanner()
            for name in names:
                planner(jobs[name], now, now + timedelta(seconds=60))
            return planner.planned

        assert materializer._far_ahead(batch("far"), 0.0)
        assert not materializer._far_ahead(batch("far", "near"), 0.0)  # one imminent: no pause
        assert not materializer._far_ahead([], 0.0)
        # the tick spent 3 s on this burst: 7 s of lead left is less than 2 ticks + twice that
        assert not materializer._far_ahead(batch("far"), 3.0)


def test_a_burst_stops_being_paced_once_the_tick_spent_half_the_lead_left() -> None:
    tick = 1.0
    assert paced(10.0, 0.0, tick)  # a burst 10 s ahead, first batch
    assert paced(10.0, 4.0, tick)  # 10 >= 2 + 8
    assert not paced(10.0, 4.5, tick)  # 10 < 2 + 9: the rest at full speed
    assert not paced(PACE_AHEAD * tick - 0.1, 0.0, tick)  # imminent: never paced


async def test_a_stop_ends_a_paced_tick_at_its_pause(store_url: str) -> None:
    settings = Settings(database_url=store_url, scheduler_batch=2, scheduler_horizon=60.0)
    async with AsyncApp(settings=settings, migrate=True) as app:
        soon = datetime.now(UTC) + timedelta(seconds=30)
        # `replace`: jobs of the planner's path (plain one-shots take the set path, never
        # paced: docs/decisions/0038)
        specs = [
            JobSpec(name=f"later-{i}", task="duetime.noop", at=soon, overlap="replace")
            for i in range(5)
        ]
        await app.schedule_many(specs)
        stop = asyncio.Event()
        stop.set()
        result = await app.materializer().run_once(pace=True, stop=stop)
        assert result.jobs == 2  # the first batch, then the pause saw the stop
        assert (await app.materializer().run_once()).jobs == 3  # the rest, next tick
