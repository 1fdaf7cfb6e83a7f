"""Issue 16 item 6, the retry window: ``Retry(within=…)`` stops retrying after a duration as
well as after a count. A retry that would start later than ``within`` after the run's
``scheduled_for`` is not scheduled; the run goes dead ``retry_window_exhausted`` with the
failure kept. Real worker on both stores; the task asks for its own retry delays
(``RetryLater``), so no test depends on the jitter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from workerkit import FAR, open_app, serving, settled

from duetime import AsyncApp, Retry, RetryLater
from duetime._types import AttemptOutcome, RunState


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def test_a_retry_past_the_window_is_not_scheduled(app: AsyncApp) -> None:
    delays = {1: 0.0, 2: 3600.0}  # the second retry would land an hour later

    @app.task("flaky")
    async def flaky(ctx: Any) -> None:
        raise RetryLater(f"not yet ({ctx.attempt})", delay=delays.get(ctx.attempt, 0.0))

    retry = Retry(max_attempts=10, within=timedelta(minutes=30))
    await app.schedule("j", task="flaky", at=FAR, retry=retry)
    assert (await app.jobs.get("j")).retry.within == 1800.0
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert (final.state, final.reason, final.attempt) == (
        RunState.DEAD,
        "retry_window_exhausted",
        2,
    )
    attempts = await app.attempts(run.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED] * 2
    assert attempts[-1].error_message == "not yet (2)"
    assert attempts[-1].traceback is not None


async def test_without_a_window_the_count_alone_decides(app: AsyncApp) -> None:
    @app.task("flaky")
    async def flaky(ctx: Any) -> None:
        if ctx.attempt < 3:
            raise RetryLater("not yet", delay=0.0)

    await app.schedule("j", task="flaky", at=FAR, retry=Retry(max_attempts=3, within=60))
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert (final.state, final.attempt) == (RunState.SUCCEEDED, 3)


async def test_a_replayed_run_gets_a_fresh_window(app: AsyncApp) -> None:
    """The window of a replay counts from the replay (``retry_from``), not from the instant
    the run was first due: else a replay would never retry."""

    @app.task("flaky")
    async def flaky(ctx: Any) -> None:
        raise RetryLater("later", delay=3600.0)

    await app.schedule("j", task="flaky", at=FAR, retry=Retry(max_attempts=5, within=1800))
    run = await app.trigger("j")
    async with serving(app):
        dead = await settled(app, run.id)
    assert dead.reason == "retry_window_exhausted"
    await app.runs.replay([run.id])
    claimed = await app.store.run_get_claimed(run.tenant, run.id)
    assert claimed is not None
    assert claimed.retry_from is not None
    assert claimed.retry_from > dead.scheduled_for
    assert claimed.window_from == claimed.retry_from
