"""Long runs on both stores: progress and checkpoints written while running and fenced by the
attempt's token, checkpoints handed to the next attempt, cancel seen through ``ctx.cancelled``
(async tasks are also cancelled; sync tasks poll), hard timeouts that abandon a sync thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from tests.waiting import eventually
from workerkit import (
    FAR,
    NO_HEARTBEAT,
    QUICK_RETRY,
    attempts_reach,
    open_app,
    outcomes,
    serving,
    settled,
    wait,
)

from duetime import AsyncApp, Retry, UsageError
from duetime._types import AttemptOutcome, RunState
from duetime.store.base import LeasesReapParams, RunCompletion
from duetime.targets.context import RunContext


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def thread_wait(event: threading.Event, timeout: float = 15.0) -> None:
    assert await asyncio.to_thread(event.wait, timeout), "timed out waiting for the task thread"


# --- progress and checkpoints -----------------------------------------------------------------


async def test_progress_and_checkpoints_show_on_the_run_while_it_runs(app: AsyncApp) -> None:
    reported, release = asyncio.Event(), asyncio.Event()
    sync_reported, sync_release = threading.Event(), threading.Event()

    @app.task("lr.async")
    async def async_task(ctx: Any) -> None:
        ctx.progress(0.5, "half way")
        ctx.checkpoint({"page": 5})
        assert await ctx.flush()
        reported.set()
        await release.wait()
        ctx.progress(1.0, "done")  # stored before the outcome is

    @app.task("lr.sync")
    def sync_task(ctx: Any) -> None:
        ctx.progress(0.25)
        ctx.checkpoint({"row": 1})  # in a sync task: returns once stored
        sync_reported.set()
        sync_release.wait(15)

    for name in ("lr.async", "lr.sync"):
        await app.schedule(name, task=name, at=FAR)
    a = await app.trigger("lr.async")
    b = await app.trigger("lr.sync")
    async with serving(app):
        await wait(reported)
        running = await app.run(a.id)
        assert running.state is RunState.RUNNING
        assert (running.progress, running.progress_message) == (0.5, "half way")
        assert running.checkpoint == {"page": 5}

        await thread_wait(sync_reported)
        assert (await app.run(b.id)).checkpoint == {"row": 1}

        async def sync_progress() -> bool:
            return (await app.run(b.id)).progress == 0.25

        await eventually(sync_progress, what="the sync task's progress")
        release.set()
        sync_release.set()
        done_a, done_b = await settled(app, a.id), await settled(app, b.id)
    assert done_a.state is done_b.state is RunState.SUCCEEDED
    assert (done_a.progress, done_a.progress_message) == (1.0, "done")


async def test_a_checkpoint_is_handed_to_the_next_attempt(app: AsyncApp) -> None:
    seen: list[Any] = []

    @app.task("lr.resume")
    async def resume(ctx: Any) -> None:
        seen.append(ctx.last_checkpoint)
        if ctx.attempt == 1:
            ctx.checkpoint({"step": 3})  # not awaited: still stored before the failure is
            raise RuntimeError("crashed after step 3")

    await app.schedule("j", task="lr.resume", at=FAR, retry=QUICK_RETRY)
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert final.state is RunState.SUCCEEDED
    assert seen == [None, {"step": 3}]


async def test_a_stale_attempt_checkpoint_is_refused(app: AsyncApp) -> None:
    saved, release = asyncio.Event(), asyncio.Event()
    after: list[bool] = []

    @app.task("lr.stale")
    async def stale(ctx: Any) -> None:
        ctx.checkpoint({"v": 1})
        assert await ctx.flush()
        saved.set()
        await release.wait()
        ctx.checkpoint({"v": 2})
        after.extend([await ctx.flush(), ctx.cancelled])

    await app.schedule("j", task="lr.stale", at=FAR)
    run = await app.trigger("j")
    async with serving(app, **NO_HEARTBEAT):
        await wait(saved)
        later = await app.store.db_now() + timedelta(seconds=3600)
        await app.store.leases_reap(LeasesReapParams(now=later))  # the run is taken over
        release.set()
        await attempts_reach(app, run.id, AttemptOutcome.STALE)
    assert after == [False, True], "refused, and the task is told to stop"
    assert (await app.run(run.id)).checkpoint == {"v": 1}


def a_context() -> RunContext:
    """A run's ``ctx`` outside any worker."""
    return RunContext(
        run_id=uuid.uuid4(),
        job_id=uuid.uuid4(),
        job_name="j",
        tenant="t",
        task="x",
        scheduled_for=datetime.now(UTC),
        attempt=1,
        max_attempts=1,
        token=1,
        worker_id="w",
        payload=None,
    )


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(-0.1, id="negative"),
        pytest.param(1.5, id="over-one"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(True, id="bool"),
        pytest.param("half", id="text"),
    ],
)
def test_bad_progress_is_refused(bad: Any) -> None:
    ctx = a_context()
    with pytest.raises(UsageError, match="progress"):
        ctx.progress(bad)


def test_oversize_or_non_json_checkpoints_are_refused() -> None:
    ctx = a_context()
    with pytest.raises(UsageError, match="65536"):
        ctx.checkpoint({"blob": "x" * 70_000})
    with pytest.raises(UsageError, match="JSON"):
        ctx.checkpoint({"when": datetime.now})
    ctx.progress(1)
    ctx.checkpoint({"fine": True})
    assert not ctx.cancelled


# --- cancel -----------------------------------------------------------------------------------


async def test_cancelling_a_running_async_task(app: AsyncApp) -> None:
    started = asyncio.Event()
    seen: list[bool] = []
    reports: list[bool] = []

    @app.task("lr.forever")
    async def forever(ctx: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(ctx.cancelled)
            raise

    await app.schedule("j", task="lr.forever", at=FAR)
    run = await app.trigger("j")

    def record(completion: RunCompletion, applied: bool) -> None:
        reports.append(applied)

    async with serving(app, on_complete=record):
        await wait(started)
        cancelled = await app.cancel_run(run.id)
        assert (cancelled.state, cancelled.cancel_requested) == (RunState.CANCELLED, True)
        assert await outcomes(app, run.id) == [AttemptOutcome.CANCELLED]

        async def reported() -> bool:
            return bool(reports)

        await eventually(reported, what="the worker's late report")
    assert seen == [True], "the coroutine was cancelled with ctx.cancelled set"
    assert reports == [False]
    final = await app.run(run.id)
    assert (final.state, final.reason) == (RunState.CANCELLED, "cancelled")
    # the cancel recorded the attempt `cancelled`; the worker's report, refused, made it `stale`
    assert await outcomes(app, run.id) == [AttemptOutcome.STALE]


async def test_a_sync_task_sees_the_cancel(app: AsyncApp) -> None:
    started, stopped = threading.Event(), threading.Event()
    seen: list[bool] = []

    @app.task("lr.poll")
    def poll(ctx: Any) -> None:
        started.set()
        deadline = time.monotonic() + 15
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(ctx.cancelled)
        stopped.set()

    await app.schedule("j", task="lr.poll", at=FAR)
    run = await app.trigger("j")
    async with serving(app):
        await thread_wait(started)
        await app.cancel_run(run.id)
        await thread_wait(stopped)
    assert seen == [True]
    assert (await app.run(run.id)).state is RunState.CANCELLED


def _request_cancel(url: str, run_id: uuid.UUID) -> None:
    """Flag a cancel request without taking the run over, as a cooperative stop does (the
    overlap policy ``replace`` asks a running run to stop this way)."""
    if url.startswith("postgresql"):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE runs SET cancel_requested = true WHERE id = %s", (run_id,))
    else:
        with sqlite3.connect(url) as conn:
            conn.execute("UPDATE runs SET cancel_requested = 1 WHERE id = ?", (str(run_id),))


async def test_a_cancel_request_stops_the_run_at_the_next_heartbeat(
    app: AsyncApp, store_url: str
) -> None:
    started = asyncio.Event()
    seen: list[bool] = []

    @app.task("lr.cooperative")
    async def cooperative(ctx: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(ctx.cancelled)
            raise

    await app.schedule("j", task="lr.cooperative", at=FAR)
    run = await app.trigger("j")
    async with serving(app):
        await wait(started)
        await asyncio.to_thread(_request_cancel, store_url, run.id)
        final = await settled(app, run.id)
    assert seen == [True]
    assert (final.state, final.reason) == (RunState.CANCELLED, "cancelled")
    assert await outcomes(app, run.id) == [AttemptOutcome.CANCELLED]


# --- hard timeout -----------------------------------------------------------------------------


async def test_a_sync_task_past_its_timeout_is_abandoned_and_its_slot_freed(
    app: AsyncApp,
) -> None:
    entered, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    @app.task("lr.stuck")
    def stuck(ctx: Any) -> None:
        entered.set()
        release.wait(15)  # ignores everything until released
        seen.append(ctx.cancelled)

    await app.schedule("j", task="lr.stuck", at=FAR, timeout=0.3, retry=Retry(max_attempts=1))
    run = await app.trigger("j")
    try:
        async with serving(app) as worker:
            await thread_wait(entered)
            final = await settled(app, run.id)

            async def slot_freed() -> bool:
                return worker.in_flight == 0

            await eventually(slot_freed, what="the worker's slot to be freed")
            assert not release.is_set(), "the thread is still running: it was abandoned"
    finally:
        release.set()
    assert (final.state, final.reason) == (RunState.DEAD, "attempts_exhausted")
    assert await outcomes(app, run.id) == [AttemptOutcome.TIMED_OUT]

    async def thread_done() -> bool:
        return bool(seen)

    await eventually(thread_done, what="the abandoned thread to end")
    assert seen == [True], "the abandoned thread is told to stop"
