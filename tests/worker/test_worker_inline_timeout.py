"""Issue 15 (worker fast path): a run with a timeout is executed inline on its runner (no
asyncio task per run, as ``asyncio.wait_for`` made one); its timeout still ends it
``timed_out``, a stop aimed at it meanwhile stays a cancellation, and its runner goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from workerkit import FAR, open_app, outcomes, serving, settled, wait

from duetime import AsyncApp, Retry
from duetime._types import AttemptOutcome, RunState
from duetime.store.base import RunCompletion


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def test_a_run_with_a_timeout_is_executed_by_its_runner(app: AsyncApp) -> None:
    tasks: list[asyncio.Task[Any] | None] = []

    @app.task("inline.where")
    async def where(ctx: Any) -> None:
        tasks.append(asyncio.current_task())

    await app.schedule("j", task="inline.where", at=FAR, timeout=30, overlap="allow")
    async with serving(app, worker_concurrency=1) as worker:
        for _ in range(3):
            run = await app.trigger("j")
            assert (await settled(app, run.id)).state is RunState.SUCCEEDED
        runners = set(worker._runners)
    assert len(tasks) == 3
    assert all(t is not None and t.get_name() == "duetime-runner" for t in tasks)
    assert len(set(tasks)) == 1, "one runner, no task per run"
    assert tasks[0] in runners


async def test_a_timeout_ends_the_run_timed_out_and_its_runner_goes_on(app: AsyncApp) -> None:
    tasks: list[asyncio.Task[Any] | None] = []

    @app.task("inline.slow")
    async def slow(ctx: Any, payload: Any) -> None:
        tasks.append(asyncio.current_task())
        if payload.get("hang"):
            await asyncio.Event().wait()

    await app.schedule(
        "j", task="inline.slow", at=FAR, timeout=0.2, retry=Retry(max_attempts=1), overlap="allow"
    )
    async with serving(app, worker_concurrency=1):
        hung = await app.trigger("j", payload={"hang": True})
        final = await settled(app, hung.id)
        after = await app.trigger("j", payload={})
        assert (await settled(app, after.id)).state is RunState.SUCCEEDED
    assert (final.state, final.reason) == (RunState.DEAD, "attempts_exhausted")
    assert await outcomes(app, hung.id) == [AttemptOutcome.TIMED_OUT]
    assert len(tasks) == 2
    assert tasks[0] is tasks[1], "the same runner ran the next run"


async def test_a_cancel_of_a_run_with_a_timeout_is_a_cancellation(app: AsyncApp) -> None:
    started = asyncio.Event()
    ended: list[BaseException] = []

    @app.task("inline.forever")
    async def forever(ctx: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except BaseException as exc:
            ended.append(exc)
            raise

    await app.schedule("j", task="inline.forever", at=FAR, timeout=600, overlap="allow")
    written: list[RunCompletion] = []
    reported = asyncio.Event()

    def record(completion: RunCompletion, applied: bool) -> None:
        written.append(completion)
        reported.set()

    async with serving(app, worker_concurrency=1, on_complete=record):
        run = await app.trigger("j")
        await wait(started)
        started.clear()
        await app.cancel_run(run.id)
        assert (await settled(app, run.id)).state is RunState.CANCELLED
        await wait(reported, what="the worker's report of the cancelled attempt")
        again = await app.trigger("j")
        await wait(started, what="the next run")  # the runner took it: it is free again
        await app.cancel_run(again.id)
    assert [type(e) for e in ended[:1]] == [asyncio.CancelledError]
    assert written[0].run_id == run.id
    assert written[0].outcome is AttemptOutcome.CANCELLED, "not timed_out: the timeout is 600 s"
