"""Delivery modes, driven into each case with a real worker on real stores.

at_most_once: no retry after a failure; a lease lost after the start ends the run ``dead``
(``lease_lost``); at shutdown only runs that never started are handed back. exactly_once
(PostgreSQL): the handler's ``ctx.transaction`` writes commit with the run's completion, so a
stale attempt's effect and a failed attempt's effect are never applied."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

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

from duetime import AsyncApp, Retry, ValidationError
from duetime._types import AttemptOutcome, RunState
from duetime.store.base import LeasesReapParams, RunCompletion, RunsClaimParams


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


# --- at most once -----------------------------------------------------------------------------


async def test_at_most_once_failure_is_dead_at_once(app: AsyncApp) -> None:
    calls: list[int] = []

    @app.task("amo.fail")
    async def fail(ctx: Any) -> None:
        calls.append(ctx.attempt)
        raise RuntimeError("boom")

    await app.schedule("j", task="amo.fail", at=FAR, delivery="at_most_once", retry=QUICK_RETRY)
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert (final.state, final.reason) == (RunState.DEAD, "at_most_once_failed")
    assert calls == [1]
    assert await outcomes(app, run.id) == [AttemptOutcome.FAILED]


async def test_at_most_once_run_whose_lease_is_lost_after_it_started_is_dead(
    app: AsyncApp,
) -> None:
    started = asyncio.Event()
    starts: list[int] = []

    @app.task("amo.block")
    async def block(ctx: Any) -> None:
        starts.append(ctx.attempt)
        started.set()
        await asyncio.Event().wait()  # until its worker cancels it

    await app.schedule("j", task="amo.block", at=FAR, delivery="at_most_once", retry=QUICK_RETRY)
    run = await app.trigger("j")
    async with serving(app, **NO_HEARTBEAT) as worker:
        await wait(started)
        # the worker stalls past its lease; the reaper takes the run over
        later = await app.store.db_now() + timedelta(seconds=3600)
        await app.store.leases_reap(LeasesReapParams(now=later))
        reaped = await app.run(run.id)
        assert (reaped.state, reaped.reason) == (RunState.DEAD, "lease_lost")
        await worker.heartbeat_once()  # the worker learns it, stops the task, reports late
        await attempts_reach(app, run.id, AttemptOutcome.STALE)
        assert worker.in_flight == 0
    assert starts == [1]
    final = await app.run(run.id)
    assert (final.state, final.reason) == (RunState.DEAD, "lease_lost")


async def test_shutdown_hands_back_only_runs_that_never_started(store_url: str) -> None:
    app = await open_app(store_url, scheduler_horizon=60.0)
    try:
        started: dict[str, asyncio.Event] = {"amo": asyncio.Event(), "alo": asyncio.Event()}

        @app.task("sd.block")
        async def block(ctx: Any, payload: Any) -> None:
            started[payload["name"]].set()
            await asyncio.Event().wait()

        for name, delivery in (("amo", "at_most_once"), ("alo", "at_least_once")):
            await app.schedule(
                name, task="sd.block", at=FAR, delivery=delivery, payload={"name": name}
            )
        amo = await app.trigger("amo")
        alo = await app.trigger("alo")
        # a run 30 s out, claimed ahead by the worker's lookahead but not started
        ahead_job = await app.schedule(
            "ahead",
            task="sd.block",
            at=timedelta(seconds=30),
            delivery="at_most_once",
            payload={"name": "ahead"},
        )
        await app.materializer().run_once()
        [ahead] = (await app.runs(ahead_job.id)).items

        async with serving(app, worker_lookahead=60.0, shutdown_grace=0.2):
            await wait(started["amo"])
            await wait(started["alo"])

            async def ahead_claimed() -> bool:
                return (await app.run(ahead.id)).state is RunState.RUNNING

            await eventually(ahead_claimed, what="the future run to be claimed ahead")
        # leaving the block stopped the worker: claimed-ahead runs went back at once, the
        # started ones after the grace period
        amo_end, alo_end, ahead_end = [await app.run(r.id) for r in (amo, alo, ahead)]
        assert (amo_end.state, amo_end.reason) == (RunState.DEAD, "shutdown_interrupted")
        assert (alo_end.state, alo_end.reason) == (RunState.SCHEDULED, "handed_back")
        assert alo_end.attempt == 1
        assert (ahead_end.state, ahead_end.reason) == (RunState.SCHEDULED, "handed_back")
        assert ahead_end.attempt == 0, "an attempt that never started is refunded"
        for run in (amo, alo, ahead):
            assert await outcomes(app, run.id) == [AttemptOutcome.CANCELLED]
    finally:
        await app.close()


# --- exactly once -----------------------------------------------------------------------------


async def test_exactly_once_is_refused_on_sqlite(tmp_path: Path) -> None:
    app = await open_app(str(tmp_path / "d.db"))
    try:
        with pytest.raises(ValidationError) as refused:
            await app.schedule("j", task="duetime.noop", at=FAR, delivery="exactly_once")
        assert refused.value.field == "delivery"
    finally:
        await app.close()


async def test_transaction_is_for_exactly_once_jobs_only(app: AsyncApp) -> None:
    @app.task("eo.misused")
    async def misused(ctx: Any) -> None:
        async with ctx.transaction():
            pass

    await app.schedule("j", task="eo.misused", at=FAR, retry=Retry(max_attempts=1))
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert final.last_error_class == "duetime.errors.UsageError"
    assert "exactly_once" in (final.last_error_message or "")


@pytest.fixture
async def pg_app(pg_url: str) -> AsyncIterator[AsyncApp]:
    """An app on a fresh PostgreSQL schema with an ``effects`` table beside duetime's."""
    opened = await open_app(pg_url)
    async with opened.store.pool.connection() as conn:  # type: ignore[attr-defined]
        await conn.execute("CREATE TABLE effects (run_id uuid NOT NULL, note text NOT NULL)")
    yield opened
    await opened.close()


async def effects(app: AsyncApp) -> list[tuple[uuid.UUID, str]]:
    async with app.store.pool.connection() as conn:  # type: ignore[attr-defined]
        cursor = await conn.execute("SELECT run_id, note FROM effects ORDER BY note")
        return [(r["run_id"], r["note"]) for r in await cursor.fetchall()]


@pytest.mark.postgres
async def test_exactly_once_effect_commits_with_the_success(pg_app: AsyncApp) -> None:
    @pg_app.task("eo.apply")
    async def apply(ctx: Any) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES (%s, %s)", (ctx.run_id, "applied"))

    await pg_app.schedule("j", task="eo.apply", at=FAR, delivery="exactly_once")
    run = await pg_app.trigger("j")
    async with serving(pg_app):
        final = await settled(pg_app, run.id)
    assert final.state is RunState.SUCCEEDED
    assert await effects(pg_app) == [(run.id, "applied")]


@pytest.mark.postgres
async def test_a_stale_attempt_effect_is_rolled_back(pg_app: AsyncApp) -> None:
    """Worker 1 writes its effect, then stalls past its lease; the run is reaped and completed
    by another worker (with its own effect) before worker 1 commits: worker 1's effect is
    rolled back, and the effect exists once."""
    written, release = asyncio.Event(), asyncio.Event()

    @pg_app.task("eo.slow")
    async def slow(ctx: Any) -> None:
        async with ctx.transaction() as conn:
            await conn.execute("INSERT INTO effects VALUES (%s, 'worker-1')", (ctx.run_id,))
        written.set()
        await release.wait()

    await pg_app.schedule("j", task="eo.slow", at=FAR, delivery="exactly_once")
    run = await pg_app.trigger("j")
    store = pg_app.store
    completions: list[tuple[RunCompletion, bool]] = []

    def record(completion: RunCompletion, applied: bool) -> None:
        completions.append((completion, applied))

    async with serving(pg_app, on_complete=record, **NO_HEARTBEAT):
        await wait(written)
        later = await store.db_now() + timedelta(seconds=3600)
        await store.leases_reap(LeasesReapParams(now=later))
        [other] = await store.runs_claim(
            RunsClaimParams(
                worker_id="worker-2",
                tasks=["eo.slow"],
                limit=1,
                lease_ttl=30,
                lookahead=0,
                now=later,
            )
        )
        tx = await store.exactly_once_begin()
        async with tx.block() as conn:
            await conn.execute("INSERT INTO effects VALUES (%s, 'worker-2')", (run.id,))
        o = other.run
        assert o.claimed_at is not None
        assert await tx.complete(
            RunCompletion(
                run_id=o.id,
                token=o.token,
                worker_id="worker-2",
                attempt=o.attempt,
                claimed_at=o.claimed_at,
                started_at=o.started_at,
                outcome=AttemptOutcome.SUCCEEDED,
                next_state=RunState.SUCCEEDED,
            )
        )
        release.set()  # worker 1 finishes and tries to commit

        async def reported() -> bool:
            return bool(completions)

        await eventually(reported, what="worker 1's completion")
    assert [ok for _, ok in completions] == [False]
    assert await effects(pg_app) == [(run.id, "worker-2")]
    assert (await pg_app.run(run.id)).state is RunState.SUCCEEDED
    assert await outcomes(pg_app, run.id) == [AttemptOutcome.STALE, AttemptOutcome.SUCCEEDED]


@pytest.mark.postgres
async def test_a_failed_attempt_applies_nothing_and_the_retry_applies_once(
    pg_app: AsyncApp,
) -> None:
    @pg_app.task("eo.flaky")
    async def flaky(ctx: Any) -> None:
        async with ctx.transaction() as conn:
            await conn.execute(
                "INSERT INTO effects VALUES (%s, %s)", (ctx.run_id, f"attempt {ctx.attempt}")
            )
        if ctx.attempt == 1:
            raise RuntimeError("failed after writing its effect")

    await pg_app.schedule("j", task="eo.flaky", at=FAR, delivery="exactly_once", retry=QUICK_RETRY)
    run = await pg_app.trigger("j")
    async with serving(pg_app):
        final = await settled(pg_app, run.id)
    assert (final.state, final.attempt) == (RunState.SUCCEEDED, 2)
    assert await effects(pg_app) == [(run.id, "attempt 2")]
    assert await outcomes(pg_app, run.id) == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


@pytest.mark.postgres
async def test_a_sync_task_cannot_use_the_transaction(pg_app: AsyncApp) -> None:
    done = threading.Event()

    @pg_app.task("eo.sync")
    def sync_task(ctx: Any) -> None:
        try:
            ctx.transaction()
        finally:
            done.set()

    await pg_app.schedule(
        "j", task="eo.sync", at=FAR, delivery="exactly_once", retry=Retry(max_attempts=1)
    )
    run = await pg_app.trigger("j")
    async with serving(pg_app):
        final = await settled(pg_app, run.id)
    assert done.is_set()
    assert final.state is RunState.DEAD
    assert final.last_error_class == "duetime.errors.UsageError"
    assert "async task" in (final.last_error_message or "")


# --- outcomes that are hard to store -----------------------------------------------------------


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


@pytest.mark.parametrize(
    ("exc", "stored"),
    [
        pytest.param(RuntimeError("nul\x00byte"), "nul\\x00byte", id="nul"),
        pytest.param(
            RuntimeError("lone \udc80 surrogate"), "lone \\udc80 surrogate", id="surrogate"
        ),
        pytest.param(_Unprintable(), "<unprintable ", id="broken-str"),
    ],
)
async def test_a_failure_whose_message_no_database_takes_is_still_recorded(
    app: AsyncApp, exc: Exception, stored: str
) -> None:
    """No text column takes NUL or a lone surrogate: the message is escaped, so the outcome is
    written (not retried forever, blocking the other completions of its batch)."""

    @app.task("odd.fail")
    async def fail(ctx: Any) -> None:
        raise exc

    await app.schedule("j", task="odd.fail", at=FAR, retry=Retry(max_attempts=1))
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert final.state is RunState.DEAD
    assert final.last_error_message is not None
    assert final.last_error_message.startswith(stored)
