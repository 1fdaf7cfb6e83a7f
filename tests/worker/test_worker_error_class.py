"""Issue 16 item 6, per-job classification of a Python task's errors (``permanent_on`` /
``retry_on``, names matched through the raised exception's MRO, the most specific listed
class deciding), with a real worker on both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from workerkit import FAR, open_app, serving, settled

from duetime import AsyncApp, Permanent, Retry
from duetime._types import AttemptOutcome, RunState


class Fatal(Exception):
    """A user's own error class, named by its dotted name."""


class StaleCache(KeyError):
    """A subclass of a class the job makes permanent, which it retries."""


class GaveUp(Permanent):
    """duetime would end the run at once; the job retries it."""


QUICK = {"backoff_base": 0.01, "backoff_factor": 1.0, "backoff_cap": 0.01}


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    opened = await open_app(store_url)
    yield opened
    await opened.close()


async def _run(app: AsyncApp, raises: Any, retry: Retry) -> tuple[Any, list[AttemptOutcome]]:
    """One run of a task that raises ``raises(attempt)`` (or returns when that is None)."""

    @app.task("classified")
    async def classified(ctx: Any) -> None:
        error = raises(ctx.attempt)
        if error is not None:
            raise error

    await app.schedule("j", task="classified", at=FAR, retry=retry)
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    return final, [a.outcome for a in await app.attempts(run.id)]


async def test_a_builtin_named_in_permanent_on_is_dead_at_once(app: AsyncApp) -> None:
    final, outcomes = await _run(
        app,
        lambda attempt: ValueError("bad input"),
        Retry(max_attempts=5, permanent_on=["ValueError"], **QUICK),
    )
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "permanent_error", 1)
    assert final.last_error_class == "ValueError"
    assert outcomes == [AttemptOutcome.FAILED]


async def test_a_subclass_matches_through_the_mro(app: AsyncApp) -> None:
    """``LookupError`` listed: a ``KeyError`` is one."""
    final, _ = await _run(
        app,
        lambda attempt: KeyError("gone"),
        Retry(max_attempts=5, permanent_on=["LookupError"], **QUICK),
    )
    assert (final.reason, final.attempt) == ("permanent_error", 1)


async def test_a_user_class_by_dotted_name_or_by_class(app: AsyncApp) -> None:
    dotted = f"{Fatal.__module__}.{Fatal.__qualname__}"
    final, _ = await _run(
        app, lambda attempt: Fatal("no"), Retry(max_attempts=5, permanent_on=[dotted], **QUICK)
    )
    assert (final.reason, final.attempt) == ("permanent_error", 1)
    job = await app.jobs.get("j")
    await app.update_job("j", retry=Retry(max_attempts=5, permanent_on=[Fatal], **QUICK))
    assert (await app.jobs.get("j")).retry.permanent_on == (dotted,) == job.retry.permanent_on


async def test_the_most_specific_listed_class_wins(app: AsyncApp) -> None:
    """KeyError is permanent for this job, but its subclass StaleCache is retried."""
    dotted = f"{StaleCache.__module__}.{StaleCache.__qualname__}"
    final, outcomes = await _run(
        app,
        lambda attempt: StaleCache("refresh") if attempt < 3 else None,
        Retry(max_attempts=5, permanent_on=["KeyError"], retry_on=[dotted], **QUICK),
    )
    assert (final.state, final.attempt) == (RunState.SUCCEEDED, 3)
    assert outcomes == [AttemptOutcome.FAILED, AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


async def test_retry_on_overrides_duetimes_own_permanent(app: AsyncApp) -> None:
    final, _outcomes = await _run(
        app,
        lambda attempt: GaveUp("try again") if attempt == 1 else None,
        Retry(max_attempts=3, retry_on=[GaveUp], **QUICK),
    )
    assert (final.state, final.attempt) == (RunState.SUCCEEDED, 2)


async def test_an_unlisted_error_keeps_the_default(app: AsyncApp) -> None:
    final, outcomes = await _run(
        app,
        lambda attempt: RuntimeError("flaky"),
        Retry(max_attempts=2, permanent_on=["ValueError"], retry_on=["KeyError"], **QUICK),
    )
    assert (final.reason, final.attempt) == ("attempts_exhausted", 2)
    assert outcomes == [AttemptOutcome.FAILED] * 2


async def test_a_broad_retry_on_keeps_duetimes_own_permanent(app: AsyncApp) -> None:
    """``retry_on=["Exception"]`` (retry everything) does not reach past ``Permanent``, which
    sits nearer the raised class in its MRO: only naming it (or a subclass) overrides it."""
    final, outcomes = await _run(
        app,
        lambda attempt: GaveUp("no point"),
        Retry(max_attempts=3, retry_on=["Exception"], **QUICK),
    )
    assert (final.state, final.reason, final.attempt) == (RunState.DEAD, "permanent_error", 1)
    assert outcomes == [AttemptOutcome.FAILED]


async def test_scheduling_a_task_not_served_yet_is_retried(app: AsyncApp) -> None:
    """A task that schedules a job for a task whose worker has not registered it yet gets an
    UnknownTask (a ValidationError): the worker may come, so the run is retried, not dead."""

    async def other(ctx: Any) -> None:
        return None

    @app.task("fans-out")
    async def fans_out(ctx: Any) -> None:
        if ctx.attempt == 2:  # the worker serving "other" has started meanwhile
            app.task("other")(other)
        await app.schedule("child", task="other", at=FAR)

    await app.schedule("j", task="fans-out", at=FAR, retry=Retry(max_attempts=3, **QUICK))
    run = await app.trigger("j")
    async with serving(app):
        final = await settled(app, run.id)
    attempts = await app.attempts(run.id)
    assert (final.state, final.attempt) == (RunState.SUCCEEDED, 2)
    assert attempts[0].error_class == "duetime.errors.UnknownTask"
    assert (attempts[0].error_message or "").startswith("task: unknown task 'other'")
