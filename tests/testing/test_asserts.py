"""``runs_of``, ``assert_triggered`` and ``assert_scheduled`` on both stores: they pass on what
is there, and fail saying what was expected and listing what was found."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime import RunContext, RunState
from duetime.testing import (
    FrozenApp,
    FrozenClock,
    assert_scheduled,
    assert_triggered,
    drain,
    runs_of,
)


async def test_runs_of_lists_a_jobs_runs_oldest_first(app: FrozenApp, clock: FrozenClock) -> None:
    job = await app.schedule("beat", task="duetime.noop", every=60, anchor=clock.now())
    for _ in range(3):
        await drain(app)
        clock.advance(minutes=1)
    runs = await runs_of(app, job)
    t0 = clock.now() - timedelta(minutes=3)
    assert [r.scheduled_for for r in runs] == [t0 + timedelta(minutes=m) for m in range(3)]
    assert [r.id for r in await runs_of(app, "beat")] == [r.id for r in runs]
    assert [r.id for r in await runs_of(app, job.id)] == [r.id for r in runs]


async def test_assert_triggered_counts_runs_and_lists_them_when_wrong(
    app: FrozenApp, clock: FrozenClock
) -> None:
    @app.task("mail.send")
    async def send(ctx: RunContext) -> None:
        raise RuntimeError("smtp refused")

    await app.schedule("mail", task="mail.send", at=clock.now() + timedelta(days=1))
    with pytest.raises(AssertionError) as nothing:
        await assert_triggered(app, "mail")
    assert str(nothing.value) == "expected job 'mail' to have been triggered; it has no runs"

    run = await app.trigger("mail")
    await drain(app)
    assert [r.id for r in await assert_triggered(app, "mail")] == [run.id]
    await assert_triggered(app, "mail", count=1)
    with pytest.raises(AssertionError) as wrong:
        await assert_triggered(app, "mail", count=2)
    message = str(wrong.value)
    assert message.startswith("expected job 'mail' to have 2 runs, found 1:\n")
    assert message.endswith(
        f"  - {run.scheduled_for.isoformat()} scheduled (RuntimeError: smtp refused),"
        f" attempt 1/3, manual, id {run.id}"
    )


async def test_assert_scheduled_checks_the_next_fire_and_says_what_it_is(
    app: FrozenApp, clock: FrozenClock
) -> None:
    job = await app.schedule("hourly", task="duetime.noop", cron="0 * * * *")
    top = clock.now().replace(minute=0) + timedelta(hours=1)
    assert (await assert_scheduled(app, job, at=top)).name == "hourly"
    with pytest.raises(AssertionError) as wrong:
        await assert_scheduled(app, "hourly", at=top + timedelta(hours=1))
    assert str(wrong.value) == (
        f"expected job 'hourly' to fire next at {(top + timedelta(hours=1)).isoformat()}; "
        f"it next fires at {top.isoformat()} (status active). Its runs:\n  (no runs)"
    )
    clock.set(top)
    ran = await drain(app)
    assert [(r.scheduled_for, r.state) for r in ran] == [(top, RunState.SUCCEEDED)]
    await assert_scheduled(app, job, at=top + timedelta(hours=1))


async def test_assert_scheduled_on_a_one_shot_that_ran(app: FrozenApp, clock: FrozenClock) -> None:
    at = clock.now() + timedelta(minutes=5)
    await app.schedule("once", task="duetime.noop", at=at)
    await assert_scheduled(app, "once", at=at)
    clock.set(at)
    await drain(app)
    with pytest.raises(AssertionError) as done:
        await assert_scheduled(app, "once", at=at)
    message = str(done.value)
    assert "it fires no more (status completed). Its runs:\n" in message
    assert f"  - {at.isoformat()} succeeded, attempt 1/3, schedule, id " in message
