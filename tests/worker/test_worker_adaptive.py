"""Adaptive claiming (docs/decisions/0012-adaptive-claiming.md): under a backlog a worker's
claims grow past the first claim's size, never past ``worker_batch``; the slots it claims for
grow toward ``worker_concurrency`` and never past it; a worker whose runs do not finish holds
no more than its ceiling, so a second worker gets the rest of the backlog. Real stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.waiting import eventually
from workerkit import FAR, open_app, serving

from duetime import AsyncApp
from duetime._types import RunState
from duetime.worker.claim_ahead import FIRST_CLAIM, START_CONCURRENCY, ClaimAhead
from duetime.worker.worker import ClaimTaken

BACKLOG = 900


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def _all_succeed(app: AsyncApp, job_id: Any, count: int) -> None:
    async def done() -> bool:
        page = await app.runs(job_id, state=RunState.SUCCEEDED, limit=1000)
        return len(page.items) == count

    await eventually(done, what=f"{count} runs to succeed", timeout=60)


async def test_claims_grow_under_a_backlog_within_the_batch(app: AsyncApp) -> None:
    @app.task("adapt.noop")
    async def noop(ctx: object, payload: object) -> None:
        return None

    job = await app.schedule("noop", task="adapt.noop", at=FAR, overlap="allow")
    for _ in range(BACKLOG):
        await app.trigger(job.id)
    claims: list[ClaimTaken] = []
    async with serving(app, worker_concurrency=100, worker_batch=300) as worker:
        worker.signals.claimed.on(claims.append)
        await _all_succeed(app, job.id, BACKLOG)
    asked = [c.asked for c in claims]
    assert asked[0] <= START_CONCURRENCY, "the first claim is for the starting slots only"
    assert max(asked) > FIRST_CLAIM, f"the claims never grew under a backlog: {asked}"
    assert max(asked) <= 300, "worker_batch is the ceiling on one claim"


async def test_slots_grow_toward_the_ceiling_and_never_past_it(app: AsyncApp) -> None:
    """Runs that wait until released keep every slot taken: the worker claims for more
    slots while the backlog lasts, up to ``worker_concurrency`` executing at once."""
    release = asyncio.Event()
    executing = 0
    most = 0

    @app.task("adapt.hold")
    async def hold(ctx: object, payload: object) -> None:
        nonlocal executing, most
        executing += 1
        most = max(most, executing)
        await release.wait()
        executing -= 1

    job = await app.schedule("hold", task="adapt.hold", at=FAR, overlap="allow")
    runs = 60
    for _ in range(runs):
        await app.trigger(job.id)
    claims: list[ClaimTaken] = []
    async with serving(app, worker_concurrency=40) as worker:
        worker.signals.claimed.on(claims.append)

        async def at_the_ceiling() -> bool:
            return executing == 40

        await eventually(at_the_ceiling, what="40 runs executing at once")
        release.set()
        await _all_succeed(app, job.id, runs)
    assert most == 40, "worker_concurrency is the ceiling on runs executing at once"
    assert max(c.concurrency for c in claims) == 40


async def test_a_worker_that_cannot_start_more_leaves_the_backlog_to_another(
    app: AsyncApp,
) -> None:
    """Two workers, a backlog of runs that do not finish until released: the first worker
    holds no more than its ceiling (it claims ahead nothing it cannot start), so the second
    one gets runs too."""
    release = asyncio.Event()
    by_worker: dict[str, int] = {}

    @app.task("adapt.share")
    async def share(ctx: Any, payload: object) -> None:
        by_worker[ctx.worker_id] = by_worker.get(ctx.worker_id, 0) + 1
        await release.wait()

    job = await app.schedule("share", task="adapt.share", at=FAR, overlap="allow")
    runs = 50
    for _ in range(runs):
        await app.trigger(job.id)
    async with (
        serving(app, worker_concurrency=30) as first,
        serving(app, worker_concurrency=30) as second,
    ):

        async def both_busy() -> bool:
            return sum(by_worker.values()) == runs

        await eventually(both_busy, what="every run executing on one worker or the other")
        assert first.in_flight <= 30
        assert second.in_flight <= 30
        assert set(by_worker) == {first.id, second.id}, by_worker
        release.set()
        await _all_succeed(app, job.id, runs)


def test_the_claim_size_doubles_on_full_claims_and_halves_when_held_runs_wait() -> None:
    ahead = ClaimAhead(slots=100, most=500, rounds=2.0)
    assert (ahead.concurrency, ahead.cap) == (START_CONCURRENCY, FIRST_CLAIM)
    ahead.returned(asked=100, got=100, holding=100)  # a backlog, every slot taken
    assert (ahead.concurrency, ahead.cap) == (20, 200)
    ahead.returned(asked=200, got=200, holding=5)  # a backlog the slots keep up with
    assert (ahead.concurrency, ahead.cap) == (20, 400)
    ahead.returned(asked=400, got=400, holding=400)
    ahead.returned(asked=500, got=500, holding=500)
    assert ahead.cap == 500, "worker_batch is the ceiling"
    ahead.held(0.001)
    assert ahead.cap == 500, "a held run started soon"
    ahead.held(1.0)
    ahead.held(1.0)  # the same claim's runs wait together: halved once
    assert ahead.cap == 250
    ahead.returned(asked=250, got=3, holding=1)  # the backlog is gone
    assert ahead.concurrency == 40
    for _ in range(10):
        ahead.returned(asked=10, got=0, holding=0)
    assert ahead.concurrency == START_CONCURRENCY, "never below the start"
    for _ in range(10):
        ahead.returned(asked=ahead.cap, got=ahead.cap, holding=1000)
    assert ahead.concurrency == 100, "worker_concurrency is the ceiling"
