"""A stop that arrives while a worker is still spawning a large claim, slice by slice: every run
of the claim, spawned before or after the drain began, is handed back (real stores)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from workerkit import open_app

from duetime._types import RunState
from duetime.store.base import ClaimedRun
from duetime.worker.worker import SPAWN_SLICE, Worker

RUNS = SPAWN_SLICE * 6


class StoppedMidClaim(Worker):
    """Sets ``stop`` as it spawns the last run of its first slice of a claim."""

    def __init__(self, *args: Any, stop: asyncio.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stop, self.spawned = stop, 0

    def _spawn(self, claimed: ClaimedRun) -> None:
        super()._spawn(claimed)
        self.spawned += 1
        if self.spawned == SPAWN_SLICE:
            self.stop.set()


async def test_runs_spawned_after_the_drain_began_are_handed_back_too(store_url: str) -> None:
    app = await open_app(store_url, scheduler_horizon=60.0)
    try:

        @app.task("sd.wait")
        async def never_called(ctx: Any) -> None:  # pragma: no cover - its runs never start
            raise AssertionError("a run started")

        jobs = [
            await app.schedule(f"ahead-{i}", task="sd.wait", at=timedelta(seconds=30))
            for i in range(RUNS)
        ]
        await app.materializer().run_once()
        stop = asyncio.Event()
        settings = app.settings.with_(
            worker_lookahead=60.0, worker_concurrency=RUNS, worker_batch=RUNS, shutdown_grace=2.0
        )
        worker = StoppedMidClaim(app.store, app.registry, settings, tasks=["sd.wait"], stop=stop)
        await asyncio.wait_for(worker.run(stop), 30)

        assert worker.spawned == RUNS  # one claim, stopped after its first slice
        assert worker.in_flight == 0
        for job in jobs:
            [run] = (await app.runs(job.id)).items
            assert (run.state, run.reason) == (RunState.SCHEDULED, "handed_back"), job.name
    finally:
        await app.close()
