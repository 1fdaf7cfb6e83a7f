"""Issue 17: a failing task leaves its traceback on the attempt and in the log; successes are
counted into a periodic summary; a sync task's log lines are about its run, as an async one's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from workerkit import FAR, QUICK_RETRY, open_app, serving, settled

from duetime import AsyncApp, Retry
from duetime._logs import RunContextFilter
from duetime._types import AttemptOutcome, RunState
from duetime.worker.retry import TRACEBACK_LIMIT, traceback_text


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.handler.addFilter(RunContextFilter())  # as duetime._logs.configure's handler
    caplog.set_level(logging.DEBUG, logger="duetime")
    return caplog


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_failed_attempt_keeps_and_logs_its_traceback(
    app: AsyncApp, logs: pytest.LogCaptureFixture, kind: str
) -> None:
    if kind == "async":

        @app.task("fail.it")
        async def explode_async(ctx: Any) -> None:
            raise RuntimeError("boom")

        name = "explode_async"
    else:

        @app.task("fail.it")
        def explode_sync(ctx: Any) -> None:
            raise RuntimeError("boom")

        name = "explode_sync"

    await app.schedule("j", task="fail.it", at=FAR, retry=Retry(max_attempts=2, **_quick()))
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    assert (final.state, final.reason) == (RunState.DEAD, "attempts_exhausted")

    attempts = await app.attempts(run.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED] * 2
    for attempt in attempts:
        assert attempt.traceback is not None
        assert attempt.traceback.startswith("Traceback (most recent call last):")
        assert attempt.traceback.rstrip().endswith("RuntimeError: boom")
        assert f"in {name}" in attempt.traceback

    failures = [
        r for r in logs.records if r.name == "duetime.worker" and r.levelno == logging.WARNING
    ]
    assert [getattr(r, "attempt", None) for r in failures] == [1, 2]
    for record in failures:
        assert getattr(record, "run_id", None) == str(run.id)
        assert str(run.id) in record.getMessage()
        assert "raised unexpected: RuntimeError: boom" in record.getMessage()
        assert "fail.it" in record.getMessage()
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], RuntimeError)
    infos = [
        r.getMessage()
        for r in logs.records
        if r.name == "duetime.worker"
        and r.levelno == logging.INFO
        and str(run.id) in r.getMessage()
    ]
    assert any("will be retried" in m for m in infos)
    assert any("is dead after attempt 2 (attempts_exhausted)" in m for m in infos)


async def test_a_success_has_no_traceback_and_is_logged_at_debug_only(
    app: AsyncApp, logs: pytest.LogCaptureFixture
) -> None:
    @app.task("ok.it")
    async def fine(ctx: Any) -> None:
        return None

    await app.schedule("j", task="ok.it", at=FAR)
    run = await app.trigger("j")
    async with serving(app):
        assert (await settled(app, run.id)).state is RunState.SUCCEEDED
    (attempt,) = await app.attempts(run.id)
    assert attempt.traceback is None
    about = [r for r in logs.records if str(run.id) in r.getMessage()]
    assert [r.levelno for r in about] == [logging.DEBUG]
    assert "succeeded" in about[0].getMessage()


async def test_the_summary_counts_what_ended(app: AsyncApp, logs: pytest.LogCaptureFixture) -> None:
    @app.task("ok.it")
    async def fine(ctx: Any) -> None:
        return None

    @app.task("fail.it")
    async def explode(ctx: Any) -> None:
        raise ValueError("no")

    await app.schedule("ok", task="ok.it", at=FAR)
    await app.schedule("bad", task="fail.it", at=FAR, retry=QUICK_RETRY)
    good = [await app.trigger("ok") for _ in range(3)]
    bad = await app.trigger("bad")
    async with serving(app) as worker:
        for run in [*good, bad]:
            await settled(app, run.id)
        worker.log_summary(force=True)
        summaries = [r.getMessage() for r in logs.records if "in the last" in r.getMessage()]
        assert summaries[-1].startswith("3 succeeded, 3 failed, 1 dead in the last ")
        worker.log_summary(force=True)  # nothing ended since: no line
        assert [r.getMessage() for r in logs.records if "in the last" in r.getMessage()] == (
            summaries
        )


async def test_a_sync_tasks_log_lines_are_about_its_run(
    app: AsyncApp, logs: pytest.LogCaptureFixture
) -> None:
    task_log = logging.getLogger("duetime.test.task")

    @app.task("sync.logs")
    def chatty(ctx: Any) -> None:
        task_log.warning("hello from the thread")

    await app.schedule("j", task="sync.logs", at=FAR)
    run = await app.trigger("j")
    async with serving(app):
        assert (await settled(app, run.id)).state is RunState.SUCCEEDED
    (record,) = [r for r in logs.records if r.getMessage() == "hello from the thread"]
    assert getattr(record, "run_id", None) == str(run.id)
    assert getattr(record, "job", None) == "j"
    assert getattr(record, "attempt", None) == 1


async def test_a_timed_out_attempt_shows_where_it_was_stopped(app: AsyncApp) -> None:
    @app.task("slow.it")
    async def dawdle(ctx: Any) -> None:
        await asyncio.sleep(60)

    await app.schedule("j", task="slow.it", at=FAR, timeout=0.2, retry=Retry(max_attempts=1))
    run = await app.trigger("j")
    async with serving(app):
        await settled(app, run.id)
    (attempt,) = await app.attempts(run.id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT
    assert attempt.traceback is not None
    assert "in dawdle" in attempt.traceback
    assert attempt.traceback.rstrip().endswith("TimeoutError: timed out after 0.2s")


def test_a_huge_traceback_keeps_its_end_within_the_bound() -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise RuntimeError("boom " + "m" * 30_000 + " the end")
        deep(n - 1)

    try:
        deep(300)
    except RuntimeError as exc:
        text = traceback_text(exc)
    assert len(text) <= TRACEBACK_LIMIT
    assert text.startswith("[… ")
    assert "earlier characters cut …]\n" in text
    assert text.rstrip().endswith(" the end")
    small = traceback_text(_raised(KeyError("k")))
    assert small.startswith("Traceback")
    assert small.rstrip().endswith("KeyError: 'k'")
    assert "\x00" not in traceback_text(_raised(RuntimeError("nul\x00byte")))


async def test_a_huge_traceback_is_stored_truncated(app: AsyncApp) -> None:
    @app.task("fail.huge")
    async def explode(ctx: Any) -> None:
        raise RuntimeError("x" * 100_000 + " the end")

    await app.schedule("j", task="fail.huge", at=FAR, retry=Retry(max_attempts=1))
    run = await app.trigger("j")
    async with serving(app):
        await settled(app, run.id)
    (attempt,) = await app.attempts(run.id)
    assert attempt.traceback is not None
    assert len(attempt.traceback) <= TRACEBACK_LIMIT
    assert attempt.traceback.rstrip().endswith(" the end")


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def _quick() -> dict[str, float]:
    return {"backoff_base": 0.01, "backoff_factor": 1.0, "backoff_cap": 0.01}
