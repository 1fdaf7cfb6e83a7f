"""Issue 16 item 3: a misuse of duetime's API inside a task (``ctx.transaction()`` in a job that
is not exactly-once, ``ctx.progress(2.0)``, a checkpoint that is not JSON) is a ``UsageError``:
the run is dead on its first attempt (reason ``usage_error``), however many attempts its policy
allows, and the attempt keeps the message and the traceback. Real worker, both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
from workerkit import FAR, open_app, serving, settled

from duetime import AsyncApp, Retry, RetryLater
from duetime._types import AttemptOutcome, RunState

MANY = Retry(max_attempts=5, backoff_base=0.01, backoff_factor=1.0, backoff_cap=0.01)
"""Attempts enough that burning them all would show."""


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def _misuse(app: AsyncApp, task: Any, **job: Any) -> tuple[Any, Any]:
    """Run ``task`` once (under a policy of five attempts unless ``job`` gives one); the run
    and its attempts."""
    app.task("misuse")(task)
    job.setdefault("retry", MANY)
    await app.schedule("j", task="misuse", at=FAR, **job)
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    return final, await app.attempts(run.id)


async def test_transaction_in_an_at_least_once_job_is_dead_at_once(app: AsyncApp) -> None:
    async def uses_transaction(ctx: Any) -> None:
        async with ctx.transaction():
            pass

    final, attempts = await _misuse(app, uses_transaction)
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "usage_error", 1)
    assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED]
    (attempt,) = attempts
    assert attempt.error_class == "duetime.errors.UsageError"
    assert "ctx.transaction()" in (attempt.error_message or "")
    assert "exactly_once" in (attempt.error_message or "")
    assert attempt.traceback is not None
    assert "uses_transaction" in attempt.traceback
    assert final.last_error_class == "duetime.errors.UsageError"


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_progress_out_of_range_is_dead_at_once(app: AsyncApp, kind: str) -> None:
    async def async_progress(ctx: Any) -> None:
        ctx.progress(2.0)

    def sync_progress(ctx: Any) -> None:
        ctx.progress(2.0)

    task = async_progress if kind == "async" else sync_progress
    final, attempts = await _misuse(app, task)
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "usage_error", 1)
    (attempt,) = attempts
    assert attempt.error_class == "duetime.errors.UsageError"
    assert attempt.error_message == "progress: must be a number from 0 to 1, got 2.0"
    assert attempt.traceback is not None
    assert task.__name__ in attempt.traceback


async def test_a_checkpoint_that_is_not_json_is_dead_at_once(app: AsyncApp) -> None:
    async def bad_checkpoint(ctx: Any) -> None:
        ctx.checkpoint({"when": datetime.now})

    final, attempts = await _misuse(app, bad_checkpoint)
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "usage_error", 1)
    assert attempts[0].error_message is not None
    assert attempts[0].error_message.startswith("checkpoint: is not JSON")


async def test_a_job_may_still_choose_to_retry_usage_errors(app: AsyncApp) -> None:
    """The job's own classification comes first (retry_on names the class)."""

    async def misuses_then_behaves(ctx: Any) -> None:
        if ctx.attempt == 1:
            ctx.progress(-1)

    final, attempts = await _misuse(
        app,
        misuses_then_behaves,
        retry=Retry(
            max_attempts=2, backoff_base=0.01, backoff_cap=0.01, retry_on=["duetime.UsageError"]
        ),
    )
    assert (final.state, final.attempt) == (RunState.SUCCEEDED, 2)
    assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


@pytest.mark.parametrize("delay", [float("inf"), -1.0, "5"], ids=["infinite", "negative", "text"])
async def test_a_retry_later_with_an_impossible_delay_is_a_usage_error(
    app: AsyncApp, delay: Any
) -> None:
    async def asks_the_impossible(ctx: Any) -> None:
        raise RetryLater("again", delay=delay)

    final, attempts = await _misuse(app, asks_the_impossible)
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "usage_error", 1)
    assert attempts[0].error_class == "duetime.errors.UsageError"
    assert (attempts[0].error_message or "").startswith("RetryLater.delay: ")


async def test_a_broad_retry_on_does_not_retry_usage_errors(app: AsyncApp) -> None:
    """``retry_on=["Exception"]`` does not reach past ``UsageError``; and a job that names the
    class in ``permanent_on`` still sees reason ``usage_error``."""

    async def misuses(ctx: Any) -> None:
        ctx.progress(2.0)

    broad = Retry(max_attempts=3, backoff_base=0.01, backoff_cap=0.01, retry_on=["Exception"])
    final, _ = await _misuse(app, misuses, retry=broad)
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "usage_error", 1)
    named = Retry(max_attempts=3, permanent_on=["duetime.UsageError"])
    await app.update_job("j", retry=named)
    rerun = await app.trigger("j")
    async with serving(app):
        final = await settled(app, rerun.id)
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "usage_error", 1)
