"""Overlap ``replace`` really stops the old run before its successor starts (issue 16 item 1,
decision 0016) — both stores, a real worker. Heartbeats are 300 s apart: only the store's
announcement can explain a prompt stop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tests.waiting import eventually
from workerkit import FAR, NO_HEARTBEAT, QUICK_RETRY, open_app, serving, settled, wait

from duetime import AsyncApp
from duetime._types import AttemptOutcome, RunState


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url, **NO_HEARTBEAT)
    yield opened
    await opened.close()


async def thread_wait(event: threading.Event, timeout: float = 15.0) -> None:
    assert await asyncio.to_thread(event.wait, timeout), "timed out waiting for the task thread"


async def test_a_replaced_async_run_is_cancelled_at_once_and_its_successor_follows(
    app: AsyncApp,
) -> None:
    events: list[str] = []
    started: dict[int, asyncio.Event] = {1: asyncio.Event(), 2: asyncio.Event()}
    seen_cancelled: list[bool] = []

    @app.task("rp.long")
    async def long(ctx: Any, payload: Any) -> None:
        n = payload["n"]
        events.append(f"start {n}")
        started[n].set()
        try:
            await asyncio.Event().wait()  # "30 s": only a cancel ends it
        except asyncio.CancelledError:
            seen_cancelled.append(ctx.cancelled)
            events.append(f"stop {n}")
            raise

    await app.schedule("j", task="rp.long", at=FAR, overlap="replace")
    old = await app.trigger("j", payload={"n": 1})
    async with serving(app):
        await wait(started[1], what="the first run to start")
        await app.trigger("j", payload={"n": 2})
        await wait(started[2], what="the successor to start (no heartbeat comes in 300 s)")
        ended = await settled(app, old.id)
    # before: the first handler ran on beside its successor until a heartbeat noticed
    assert events[:3] == ["start 1", "stop 1", "start 2"]  # then the shutdown stops run 2
    assert seen_cancelled[0]
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")
    (attempt,) = await app.attempts(old.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED


async def test_a_sync_run_that_ignores_the_cancel_keeps_its_successor_waiting(
    app: AsyncApp,
) -> None:
    events: list[str] = []
    entered, release = threading.Event(), threading.Event()

    @app.task("rp.stubborn")
    def stubborn(ctx: Any, payload: Any) -> None:
        if payload["n"] == 2:
            events.append("start 2")
            return
        entered.set()
        release.wait(15)  # ignores ctx.cancelled
        events.append("exit 1")

    await app.schedule("j", task="rp.stubborn", at=FAR, overlap="replace", replace_timeout=600)
    old = await app.trigger("j", payload={"n": 1})
    async with serving(app) as worker:
        await thread_wait(entered)
        new = await app.trigger("j", payload={"n": 2})

        async def asked() -> bool:
            return (await app.run(old.id)).cancel_requested

        await eventually(asked, what="the old run to be asked to stop")
        claims = worker.signals.claimed.init()
        for _ in range(3):  # claims after the request: the successor is not taken
            await claims.wait()
        assert (await app.run(new.id)).state is RunState.SCHEDULED  # still waiting
        assert (await app.run(old.id)).state is RunState.RUNNING
        release.set()
        final = await settled(app, new.id)
    assert events == ["exit 1", "start 2"]
    assert final.state is RunState.SUCCEEDED
    ended = await app.run(old.id)
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")


async def test_replace_timeout_lets_the_successor_start_beside_a_stuck_sync_run(
    app: AsyncApp,
) -> None:
    events: list[str] = []
    entered, release = threading.Event(), threading.Event()

    @app.task("rp.stuck")
    def stuck(ctx: Any, payload: Any) -> None:
        if payload["n"] == 2:
            events.append("start 2")
            return
        entered.set()
        release.wait(15)
        events.append("exit 1")

    await app.schedule("j", task="rp.stuck", at=FAR, overlap="replace", replace_timeout=0.2)
    old = await app.trigger("j", payload={"n": 1})
    try:
        async with serving(app):
            await thread_wait(entered)
            new = await app.trigger("j", payload={"n": 2})
            final = await settled(app, new.id)
            assert events == ["start 2"]  # the old thread is still stuck
            ended = await app.run(old.id)
            (attempt,) = await app.attempts(old.id)
    finally:
        release.set()
    assert final.state is RunState.SUCCEEDED
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")
    assert attempt.outcome is AttemptOutcome.CANCELLED
    assert "replace_timeout" in (attempt.error_message or "")


async def test_a_replaced_run_that_fails_on_the_cancel_ends_replaced_not_retried(
    app: AsyncApp,
) -> None:
    # review of issue 16, finding 1: the attempt was retried, and the retry (still asked to
    # stop) and the successor replaced each other until attempts ran out
    events: list[str] = []
    started = asyncio.Event()

    @app.task("rp.fussy")
    async def fussy(ctx: Any, payload: Any) -> None:
        n = payload["n"]
        events.append(f"start {n} attempt {ctx.attempt}")
        if n == 2 or ctx.attempt > 1:
            return
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("aborted") from None  # a library's own error for the cancel

    await app.schedule("j", task="rp.fussy", at=FAR, overlap="replace", retry=QUICK_RETRY)
    old = await app.trigger("j", payload={"n": 1})
    async with serving(app):
        await wait(started, what="the first run to start")
        new = await app.trigger("j", payload={"n": 2})
        final = await settled(app, new.id)
        ended = await settled(app, old.id)
    assert (ended.state, ended.reason) == (RunState.CANCELLED, "replaced")
    (attempt,) = await app.attempts(old.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED
    assert attempt.error_message == "aborted"  # what the task raised is kept
    assert final.state is RunState.SUCCEEDED
    assert events == ["start 1 attempt 1", "start 2 attempt 1"]


async def test_a_shutdown_records_nothing_while_a_replaced_sync_run_still_runs(
    app: AsyncApp,
) -> None:
    # review of issue 16, finding 4: the shutdown recorded the replaced attempt while its
    # thread ran on, and the successor started beside it on the next worker
    events: list[str] = []
    contexts: list[Any] = []
    entered, release = threading.Event(), threading.Event()

    @app.task("rp.stubborn")
    def stubborn(ctx: Any, payload: Any) -> None:
        if payload["n"] == 2:
            events.append("start 2")
            return
        contexts.append(ctx)
        entered.set()
        release.wait(30)  # ignores ctx.cancelled
        events.append("exit 1")

    await app.schedule("j", task="rp.stubborn", at=FAR, overlap="replace", replace_timeout=600)
    old = await app.trigger("j", payload={"n": 1})
    try:
        async with serving(app, shutdown_grace=0.1):
            await thread_wait(entered)
            new = await app.trigger("j", payload={"n": 2})

            async def told() -> bool:
                return contexts[0].cancelled  # the worker took the request as a replace

            await eventually(told, what="the worker to ask the old run to stop")
        # the worker shut down (within its grace), the old thread runs on
        assert events == []
        assert (await app.run(old.id)).state is RunState.RUNNING  # its lease will lapse
        async with serving(app) as worker:
            claims = worker.signals.claimed.init()
            for _ in range(3):  # the next worker's claims do not take the successor
                await claims.wait()
            assert (await app.run(new.id)).state is RunState.SCHEDULED
        assert events == []
    finally:
        release.set()
