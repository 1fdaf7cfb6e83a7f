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
        worker = Worker(app.store, app.registry, settings, tasks=["sd.wait"])
        # claim for every slot at once (no backlog has grown the claimed-for slots yet)
        worker._ahead.concurrency = RUNS
        spawned: list[ClaimedRun] = []

        def stop_at_the_end_of_the_first_slice(claimed: ClaimedRun) -> None:
            spawned.append(claimed)
            if len(spawned) == SPAWN_SLICE:
                stop.set()

        worker.signals.spawned.on(stop_at_the_end_of_the_first_slice)
        await asyncio.wait_for(worker.run(stop), 30)

        assert len(spawned) == RUNS  # one claim, stopped after its first slice
        assert worker.in_flight == 0
        for job in jobs:
            [run] = (await app.runs(job.id)).items
            assert (run.state, run.reason) == (RunState.SCHEDULED, "handed_back"), job.name
    finally:
        await app.close()
