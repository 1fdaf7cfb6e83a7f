"""Claim-ahead: a worker of short tasks claims beyond its free slots what those slots finish
while its next claim travels, yet never executes more than ``worker_concurrency`` runs at once;
with ``worker_claim_ahead`` 0 it holds no more runs than it has slots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.waiting import eventually
from workerkit import FAR, open_app, serving

from duetime import AsyncApp
from duetime._types import RunState
from duetime.worker.claim_ahead import ClaimAhead
from duetime.worker.worker import Worker

RUNS = 200


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def _burn(app: AsyncApp, **settings: Any) -> tuple[int, int]:
    """Run RUNS no-op runs with a 2-slot worker; the most runs executing at once and the most
    runs the worker held at once."""
    executing = 0
    most_executing = 0
    most_held = 0
    worker: Worker | None = None

    @app.task("ahead.noop")
    async def noop(ctx: object, payload: object) -> None:
        nonlocal executing, most_executing, most_held
        executing += 1
        most_executing = max(most_executing, executing)
        assert worker is not None
        most_held = max(most_held, worker.in_flight)
        await asyncio.sleep(0)  # a turn for the others while this one holds its slot
        executing -= 1

    job = await app.schedule("noop", task="ahead.noop", at=FAR, overlap="allow")
    runs = [await app.trigger(job.id) for _ in range(RUNS)]
    async with serving(app, worker_concurrency=2, worker_batch=100, **settings) as served:
        worker = served

        async def all_done() -> bool:
            page = await app.runs(job.id, state=RunState.SUCCEEDED, limit=1000)
            return len(page.items) == len(runs)

        await eventually(all_done, what=f"{RUNS} runs to succeed", timeout=60)
    return most_executing, most_held


async def test_a_worker_of_short_tasks_claims_ahead_within_its_ceiling(app: AsyncApp) -> None:
    most_executing, most_held = await _burn(app)

    assert most_executing <= 2, "worker_concurrency is the ceiling on runs executing at once"
    assert most_held > 2, "short tasks: the worker held runs beyond its free slots"


async def test_claim_ahead_off_holds_no_more_than_the_slots(app: AsyncApp) -> None:
    most_executing, most_held = await _burn(app, worker_claim_ahead=0)

    assert most_executing <= 2
    assert most_held <= 2


def test_claim_ahead_is_what_the_slots_finish_while_claims_travel() -> None:
    ahead = ClaimAhead(slots=10, most=100, rounds=2.0)
    assert ahead.allowance() == 0, "nothing measured yet: nothing ahead"
    ahead.claimed(0.002)
    assert ahead.allowance() == 0
    ahead.served(0.001)  # 10 slots × 1 ms: 10 runs a millisecond; 2 claims of 2 ms: 40 runs
    assert ahead.allowance() == 40
    ahead.served(0.001)
    assert ahead.allowance() == 40


def test_long_tasks_get_nothing_ahead_and_the_batch_caps_short_ones() -> None:
    long = ClaimAhead(slots=10, most=100, rounds=2.0)
    long.claimed(0.002)
    long.served(1.0)
    assert long.allowance() == 0

    short = ClaimAhead(slots=10, most=100, rounds=2.0)
    short.claimed(0.002)
    short.served(0.00005)
    assert short.allowance() == 100

    off = ClaimAhead(slots=10, most=100, rounds=0.0)
    off.claimed(0.002)
    off.served(0.00005)
    assert off.allowance() == 0


async def test_runs_held_ahead_are_handed_back_at_shutdown_not_killed(
    app: AsyncApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At-most-once runs held ahead of a busy slot when the worker stops never began here:
    they go back to ``scheduled`` with their attempt refunded (not ``dead``); the one
    executing is the only one the shutdown interrupts."""
    monkeypatch.setattr(ClaimAhead, "allowance", lambda self: 4)  # hold 4 beyond the slot
    entered = asyncio.Event()
    calls: list[object] = []

    @app.task("ahead.block")
    async def block(ctx: Any, payload: object) -> None:
        calls.append(ctx.run_id)
        entered.set()
        await asyncio.Event().wait()  # until the shutdown cancels it

    job = await app.schedule(
        "block", task="ahead.block", at=FAR, overlap="allow", delivery="at_most_once"
    )
    runs = [await app.trigger(job.id) for _ in range(5)]
    async with serving(app, worker_concurrency=1, shutdown_grace=0.2) as worker:
        await entered.wait()

        async def holding_all() -> bool:
            return worker.in_flight == 5

        await eventually(holding_all, what="the worker to hold all 5 runs")
    finals = {r.id: await app.run(r.id) for r in runs}
    (executed,) = calls
    assert finals[executed].state is RunState.DEAD  # at-most-once, interrupted while executing
    held = [run for run_id, run in finals.items() if run_id != executed]
    assert [(r.state, r.attempt) for r in held] == [(RunState.SCHEDULED, 0)] * 4


async def test_no_run_waits_held_behind_long_runs(app: AsyncApp) -> None:
    """Short runs keep the measured slot time low; then long runs take both slots. Runs of
    another job due meanwhile are not left waiting in the worker, started and unchecked: they
    are back in the queue (or never left it), so cancelling their job ends them and none runs."""
    executed: list[object] = []
    slow_in = asyncio.Semaphore(0)
    release = asyncio.Event()

    @app.task("mix.fast")
    async def fast(ctx: Any, payload: object) -> None:
        executed.append(ctx.run_id)

    @app.task("mix.slow")
    async def slow(ctx: Any, payload: object) -> None:
        slow_in.release()
        await release.wait()

    fast_job = await app.schedule("fast", task="mix.fast", at=FAR, overlap="allow")
    slow_job = await app.schedule("slow", task="mix.slow", at=FAR, overlap="allow")
    warm = [await app.trigger(fast_job.id) for _ in range(100)]
    async with serving(app, worker_concurrency=2, worker_batch=100) as worker:

        async def warmed() -> bool:
            return len(executed) == len(warm)

        await eventually(warmed, what="the warm-up runs")
        for _ in range(2):
            await app.trigger(slow_job.id)
        await slow_in.acquire()
        await slow_in.acquire()  # both slots are held by long runs
        victim_job = await app.schedule("victim", task="mix.fast", at=FAR, overlap="allow")
        victims = [await app.trigger(victim_job.id) for _ in range(10)]

        async def none_held() -> bool:
            states = [(await app.run(v.id)).state for v in victims]
            return worker.in_flight == 2 and all(s is RunState.SCHEDULED for s in states)

        await eventually(none_held, what="the victims back in the queue, not held")
        await app.cancel(victim_job.id)
        release.set()
    finals = [(await app.run(v.id)).state for v in victims]
    assert finals == [RunState.CANCELLED] * 10
    assert not {v.id for v in victims} & set(executed), "a cancelled job's run executed"
