"""Calendars and backfill (issue 24) through the real scheduler pass and worker (``drain``), on
both stores: a ``previous_business_day`` job runs the weekend's occurrences on Friday, each once
and under its own occurrence; backfilled runs far older than the misfire grace still run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime import RunContext, RunState
from duetime.testing import FrozenApp, FrozenClock, drain

THURSDAY = datetime(2026, 12, 24, 13, tzinfo=UTC)


async def test_the_weekend_runs_on_friday_with_previous_business_day(
    app: FrozenApp, clock: FrozenClock
) -> None:
    fired: list[tuple[datetime, datetime]] = []  # (its occurrence, the clock when it ran)

    @app.task("books.close")
    async def close(ctx: RunContext) -> None:
        fired.append((ctx.scheduled_for, clock.now()))

    clock.set(THURSDAY)
    await app.calendars.set("weekend", [{"weekdays": ["sat", "sun"]}])
    await app.schedule(
        "close",
        task="books.close",
        cron="0 12 * * *",
        overlap="serialize",
        calendars=["weekend"],
        calendar_shift="previous_business_day",
    )
    friday, monday = datetime(2026, 12, 25, 12, tzinfo=UTC), datetime(2026, 12, 28, 12, tzinfo=UTC)
    for hour in range(1, 4 * 24 + 1):  # to Monday 13:00, hour by hour, and a second past noon
        for at in (THURSDAY + timedelta(hours=hour), THURSDAY + timedelta(hours=hour, seconds=1)):
            clock.set(at)
            await drain(app)
    second = timedelta(seconds=1)
    assert fired == [  # the moved ones a µs per day moved after Friday's: in order
        (friday, friday),
        (friday + timedelta(days=1), friday + second),
        (friday + timedelta(days=2), friday + second),
        (monday, monday),
    ]


async def test_backfilled_runs_never_misfire(app: FrozenApp, clock: FrozenClock) -> None:
    ran: list[datetime] = []

    @app.task("reports.hourly")
    async def hourly(ctx: RunContext) -> None:
        ran.append(ctx.scheduled_for)

    clock.set(THURSDAY + timedelta(days=1))
    await app.schedule("hourly", task="reports.hourly", cron="0 * * * *", overlap="serialize")
    since = THURSDAY - timedelta(hours=13)  # Thursday 00:00, a day before the clock
    result = await app.jobs.backfill("hourly", since, since + timedelta(hours=2))
    assert result.created == 3
    await drain(app)  # the first is released now, the others 0.1 s apart
    clock.advance(seconds=1)
    await drain(app)
    assert ran == [since + timedelta(hours=h) for h in range(3)]
    runs = [r for r in (await app.runs.find(job="hourly")).items if r.origin == "backfill"]
    assert {r.state for r in runs} == {RunState.SUCCEEDED}
