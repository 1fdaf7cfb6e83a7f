"""Runs claimed ahead of their instant start in batches (worker/starter.py): many runs due at
the same instant all start — none before it — and succeed, on both stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from workerkit import open_app, outcomes, serving, wait

from duetime import AsyncApp
from duetime._types import AttemptOutcome, RunState
from duetime.store.base import RunCompletion, RunsStartParams

RUNS = 200


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def test_many_runs_claimed_ahead_all_start_at_their_instant(app: AsyncApp) -> None:
    @app.task("start.noop")
    async def noop(ctx: Any) -> None:
        return None

    batches: list[int] = []
    runs_start = app.store.runs_start

    async def counting(params: RunsStartParams) -> set[Any]:
        batches.append(len(params.runs))
        return await runs_start(params)

    app.store.runs_start = counting  # type: ignore[method-assign]
    applied: set[Any] = set()
    all_done = asyncio.Event()

    def on_complete(completion: RunCompletion, ok: bool) -> None:
        if ok:
            applied.add(completion.run_id)
        if len(applied) == RUNS:
            all_done.set()

    # one-shot runs due together, half a second out: the worker claims them ahead
    due = await app.store.db_now() + timedelta(seconds=0.5)
    created = await app.schedule_many(
        {"name": f"once-{i}", "task": "start.noop", "at": due} for i in range(RUNS)
    )
    assert created == RUNS
    await app.materializer().run_once()
    async with serving(
        app, on_complete=on_complete, worker_concurrency=RUNS + 10, worker_lookahead=5.0
    ):
        await wait(all_done, timeout=60)

    runs = [r for i in range(RUNS) for r in (await app.runs(f"once-{i}")).items]
    assert len(runs) == RUNS
    for run in runs:
        assert run.state is RunState.SUCCEEDED
        assert run.started_at is not None
        assert run.started_at >= run.available_at
        assert await outcomes(app, run.id) == [AttemptOutcome.SUCCEEDED]
    # every run claimed ahead (not started by its claim) went through a batch start, once
    ahead = [r for r in runs if r.claimed_at is not None and r.claimed_at < r.available_at]
    assert sum(batches) == len(ahead)
