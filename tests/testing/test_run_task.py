"""``run_task``: one task body, called as the worker calls it, with a context whose progress,
checkpoints and heartbeats are recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from duetime import RunContext, UsageError
from duetime.testing import FrozenApp, FrozenClock, RecordedHooks, run_task


@pytest.fixture
async def app(tmp_path: Path, clock: FrozenClock) -> AsyncIterator[FrozenApp]:
    async with FrozenApp(str(tmp_path / "t.db"), clock=clock) as opened:

        @opened.task("billing.settle")
        async def settle(ctx: RunContext, payload: Any) -> dict[str, Any]:
            start = (ctx.last_checkpoint or {}).get("next", 0)
            for i in range(start, payload["invoices"]):
                ctx.progress((i + 1) / payload["invoices"], f"invoice {i + 1}")
                ctx.checkpoint({"next": i + 1})
            ctx.heartbeat()
            return {"attempt": ctx.attempt, "of": ctx.max_attempts, "from": start}

        @opened.task("billing.sync_report")
        def report(ctx: RunContext) -> str:  # sync: runs in a thread, as on a worker
            ctx.progress(0.5)
            return f"{ctx.job_name}:{ctx.tenant}"

        yield opened


async def test_run_task_gives_the_context_and_records_what_the_task_reports(
    app: FrozenApp, clock: FrozenClock
) -> None:
    call = await run_task(app, "billing.settle", payload={"invoices": 2}, attempt=2)
    assert call.result == {"attempt": 2, "of": 3, "from": 0}
    assert (call.ctx.payload, call.ctx.attempt, call.ctx.scheduled_for) == (
        {"invoices": 2},
        2,
        clock.now(),
    )
    assert call.progress == [(0.5, "invoice 1"), (1.0, "invoice 2")]
    assert call.checkpoints == [{"next": 1}, {"next": 2}]
    assert call.hooks.heartbeats == 1


async def test_run_task_resumes_from_a_checkpoint(app: FrozenApp) -> None:
    call = await run_task(
        app, "billing.settle", payload={"invoices": 3}, last_checkpoint={"next": 2}
    )
    assert call.result["from"] == 2
    assert call.checkpoints == [{"next": 3}]


async def test_run_task_calls_sync_tasks_and_checks_the_context_api(app: FrozenApp) -> None:
    call = await run_task(app, "billing.sync_report", job_name="nightly")
    assert call.result == "nightly:default"
    assert call.progress == [(0.5, None)]

    @app.task("bad.progress")
    async def bad(ctx: RunContext) -> None:
        ctx.progress(2.0)

    with pytest.raises(UsageError, match="progress"):
        await run_task(app, "bad.progress")

    @app.task("needs.tx")
    async def needs_tx(ctx: RunContext) -> None:
        async with ctx.transaction():
            pass

    with pytest.raises(UsageError, match="drain"):
        await run_task(app, "needs.tx")


async def test_run_task_passes_cancelled_and_names_unknown_tasks(app: FrozenApp) -> None:
    @app.task("long.job")
    async def long_job(ctx: RunContext) -> bool:
        return ctx.cancelled

    assert (await run_task(app, "long.job", hooks=RecordedHooks(cancelled=True))).result is True
    with pytest.raises(LookupError, match=r"'nope' is not registered .*billing\.settle"):
        await run_task(app, "nope")
