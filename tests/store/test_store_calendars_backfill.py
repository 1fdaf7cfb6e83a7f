"""Calendars and backfill (issue 24) on both stores, through the app: calendars kept per
tenant, excluded occurrences skipped (``calendar:<name>``) or moved by a business-day shift
by the scheduler's transaction, and backfills that are idempotent, capped and misfire-exempt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime._types import JobStatus
from duetime.errors import BackfillCapReached, Conflict, NotFound, ValidationError
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from duetime.store.base import CalendarPutParams
from duetime.testing import FrozenApp, FrozenClock

XMAS_EVE = datetime(2026, 12, 24, tzinfo=UTC)  # a Thursday
WEEKEND = [{"weekdays": ["sat", "sun"]}]


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[FrozenApp]:
    async with FrozenApp(store_url, clock=FrozenClock(XMAS_EVE)) as opened:
        yield opened


async def _tick(app: FrozenApp) -> None:
    await materialize(app.store, plan_job, horizon=10, now=app.clock.now())


async def _noon_job(app: FrozenApp, day: int = 24, **kwargs: Any) -> None:
    """A job at noon UTC every day, declared at 11:00 of 2026-12-``day``."""
    app.clock.set(datetime(2026, 12, day, 11, tzinfo=UTC))
    await app.schedule(
        "noon",
        task="t",
        cron="0 12 * * *",
        allow_unregistered=True,
        **kwargs,
    )


async def test_calendars_are_kept_per_tenant_and_validated(app: FrozenApp) -> None:
    stored = await app.calendars.set("holidays", [{"date": "2026-12-25"}, {"holidays": "us"}])
    assert stored.rules == [{"date": "2026-12-25"}, {"holidays": "US"}]
    assert [c.name for c in await app.calendars.find()] == ["holidays"]
    assert await app.for_tenant("other").calendars.find() == []
    await app.calendars.set("holidays", WEEKEND, description="weekends")  # replaces
    assert (await app.calendars.get("holidays")).rules == WEEKEND
    with pytest.raises(ValidationError) as bad:
        await app.calendars.set("x", [{"date": "2026-12-25"}, {"weekdays": ["funday"]}])
    assert bad.value.field == "rules[1].weekdays"
    with pytest.raises(ValidationError) as bad:
        await app.calendars.set("x", [{"from": "2026-12-25", "to": "2026-12-01"}])
    assert bad.value.field == "rules[0].to"
    with pytest.raises(ValidationError) as bad:
        await app.calendars.set("x", [{"holidays": "ZZ"}])
    assert bad.value.field == "rules[0].holidays"
    with pytest.raises(NotFound):
        await app.calendars.get("nope")


async def test_a_job_naming_an_unknown_calendar_is_refused(app: FrozenApp) -> None:
    with pytest.raises(ValidationError) as bad:
        await _noon_job(app, calendars=["nope"])
    assert bad.value.field == "calendars"
    assert "unknown calendar 'nope'" in bad.value.reason
    with pytest.raises(ValidationError) as bad:
        await _noon_job(app, calendar_shift="next_business_day")
    assert bad.value.field == "calendar_shift"


async def test_a_calendar_a_job_names_cannot_be_deleted(app: FrozenApp) -> None:
    await app.calendars.set("weekend", WEEKEND)
    await _noon_job(app, calendars=["weekend"])
    with pytest.raises(Conflict, match="'noon'"):
        await app.calendars.delete("weekend")
    await app.update_job("noon", calendars=[])
    await app.calendars.delete("weekend")
    with pytest.raises(NotFound):
        await app.calendars.delete("weekend")


async def test_an_excluded_occurrence_is_skipped_with_the_calendar_named(app: FrozenApp) -> None:
    await app.calendars.set("xmas", [{"date": "2026-12-25"}])
    await _noon_job(app, 25, calendars=["xmas"])
    job = await app.get("noon")
    assert job.calendars == ("xmas",)
    app.clock.set(datetime(2026, 12, 25, 11, 59, 55, tzinfo=UTC))
    await _tick(app)
    runs = (await app.runs.find(job="noon")).items
    assert runs == []
    skips = await app.skips("noon")
    assert [(s.first, s.count, s.reason) for s in skips] == [
        (datetime(2026, 12, 25, 12, tzinfo=UTC), 1, "calendar:xmas")
    ]
    assert (await app.get("noon")).next_fire_at == datetime(2026, 12, 26, 12, tzinfo=UTC)
    app.clock.set(datetime(2026, 12, 26, 11, 59, 55, tzinfo=UTC))
    await _tick(app)
    assert len((await app.runs.find(job="noon")).items) == 1
    explained = await app.explain("noon")
    (skipped,) = [r for r in explained.last if r.what == "skipped"]
    assert "excluded by the job's calendar 'xmas'" in skipped.why


async def test_previews_note_what_calendars_do(app: FrozenApp) -> None:
    await app.calendars.set("weekend", WEEKEND)
    await _noon_job(app, 24, calendars=["weekend"], calendar_shift="next_business_day")
    fires = await app.preview_job("noon", count=3)
    assert [f.calendar_note for f in fires] == [
        None,
        None,
        "runs at 2026-12-28T12:00:00Z (next_business_day; calendar 'weekend': sat)",
    ]
    await app.update_job("noon", calendar_shift=None)
    (_, _, saturday) = await app.preview_job("noon", count=3)
    assert saturday.calendar_note == "skipped: calendar 'weekend': sat"
    assert saturday.note == saturday.calendar_note


async def test_next_business_day_moves_the_run_and_keeps_its_occurrence(app: FrozenApp) -> None:
    await app.calendars.set("weekend", WEEKEND)
    await _noon_job(app, 26, calendars=["weekend"], calendar_shift="next_business_day")
    app.clock.set(datetime(2026, 12, 26, 11, 59, 55, tzinfo=UTC))  # a Saturday
    await _tick(app)
    (run,) = (await app.runs.find(job="noon")).items
    assert run.scheduled_for == datetime(2026, 12, 26, 12, tzinfo=UTC)  # its identity
    # Monday, 2 µs early: one µs per day moved keeps the runs landing there in order
    assert run.available_at == datetime(2026, 12, 28, 12, tzinfo=UTC) - timedelta(microseconds=2)
    await _tick(app)  # again: nothing doubles
    assert len((await app.runs.find(job="noon")).items) == 1


async def test_previous_business_day_plans_the_weekend_on_friday(app: FrozenApp) -> None:
    await app.calendars.set("weekend", WEEKEND)
    await _noon_job(app, 25, calendars=["weekend"], calendar_shift="previous_business_day")
    app.clock.set(datetime(2026, 12, 25, 11, 59, 55, tzinfo=UTC))  # a Friday
    await _tick(app)
    runs = sorted((await app.runs.find(job="noon")).items, key=lambda r: r.scheduled_for)
    friday = datetime(2026, 12, 25, 12, tzinfo=UTC)
    assert [(r.scheduled_for, r.available_at) for r in runs] == [
        (friday, friday),
        (friday + timedelta(days=1), friday + timedelta(microseconds=1)),
        (friday + timedelta(days=2), friday + timedelta(microseconds=2)),
    ]
    assert (await app.get("noon")).next_fire_at == friday + timedelta(days=3)


async def _hourly(app: FrozenApp, **kwargs: Any) -> None:
    app.clock.set(datetime(2026, 12, 25, 0, 30, tzinfo=UTC))
    await app.schedule(
        "hourly",
        task="t",
        cron="0 * * * *",
        allow_unregistered=True,
        **kwargs,
    )


async def test_a_backfill_creates_each_occurrence_once(app: FrozenApp) -> None:
    await _hourly(app)
    since, until = XMAS_EVE, XMAS_EVE + timedelta(hours=23, minutes=59)
    dry = await app.jobs.backfill("hourly", since, until, dry_run=True)
    assert (dry.created, dry.existing, len(dry.runs)) == (24, 0, 24)
    assert dry.warning is not None
    assert "overlap skip" in dry.warning  # the default: say what it does to close runs
    assert (await app.runs.find(job="hourly")).items == []
    done = await app.jobs.backfill("hourly", since, until)
    assert (done.created, done.existing, done.skipped) == (24, 0, 0)
    again = await app.jobs.backfill("hourly", since, until)
    assert (again.created, again.existing) == (0, 24)
    runs = (await app.runs.find(job="hourly", limit=100)).items
    assert len(runs) == 24
    assert {r.origin for r in runs} == {"backfill"}
    released = sorted(r.available_at for r in runs)
    assert released[0] == app.clock.now()  # spaced by 1 / backfill_rate from now
    assert released[1] - released[0] == timedelta(seconds=0.1)
    progress = await app.jobs.backfill_progress("hourly")
    assert (progress.states, progress.total, progress.finished) == ({"scheduled": 24}, 24, 0)


async def test_a_backfill_respects_calendars_and_the_tenant_cap(app: FrozenApp) -> None:
    await app.calendars.set("night", [{"cron": "* 0-5 * * *"}])
    await _hourly(app, calendars=["night"], overlap="serialize")
    since, until = XMAS_EVE, XMAS_EVE + timedelta(hours=23)
    await app.tenants.limits_set(max_backfill_runs=10)
    assert (await app.tenants.limits_get()).max_backfill_runs == 10
    with pytest.raises(BackfillCapReached) as capped:
        await app.jobs.backfill("hourly", since, until)
    assert capped.value.field == "max_backfill_runs"
    assert "would create 18 runs" in capped.value.reason
    assert (await app.runs.find(job="hourly")).items == []
    await app.tenants.limits_set(max_backfill_runs=0)  # no cap
    assert (await app.tenants.limits_get()).max_backfill_runs is None
    done = await app.jobs.backfill("hourly", since, until)
    assert (done.created, done.skipped, done.warning) == (18, 6, None)


async def test_bad_backfill_ranges_say_what_and_where(app: FrozenApp) -> None:
    await _hourly(app)
    now = app.clock.now()
    with pytest.raises(ValidationError) as bad:
        await app.jobs.backfill("hourly", now - timedelta(hours=1), now - timedelta(hours=2))
    assert bad.value.field == "to"
    with pytest.raises(ValidationError) as bad:
        await app.jobs.backfill("hourly", now - timedelta(days=365 * 100), now)
    assert bad.value.field == "to"
    assert "--yes" in bad.value.reason
    with pytest.raises(ValidationError) as bad:
        await app.jobs.backfill("hourly", now, now + timedelta(hours=1))
    assert "must not be after now" in bad.value.reason
    await app.pause("hourly")
    assert (await app.get("hourly")).status is JobStatus.PAUSED
    with pytest.raises(ValidationError, match="only an active job"):
        await app.jobs.backfill("hourly", now - timedelta(hours=2), now)


async def test_bulk_registration_names_calendars_too(app: FrozenApp) -> None:
    await app.calendars.set("weekend", WEEKEND)
    spec = {"task": "t", "cron": "0 12 * * *", "calendars": ["weekend"]}
    specs = [{"name": f"bulk-{i}", **spec} for i in range(3)]
    assert await app.schedule_many(specs, allow_unregistered=True) == 3
    assert (await app.get("bulk-2")).calendars == ("weekend",)
    with pytest.raises(ValidationError) as bad:
        await app.schedule_many(
            [{"name": "bulk-x", **spec, "calendars": ["gone"]}], allow_unregistered=True
        )
    assert bad.value.field == "specs[0].calendars"


async def test_a_calendar_whose_rules_no_longer_parse_never_stops_the_scheduler(
    app: FrozenApp,
) -> None:
    await app.calendars.set("odd", [{"date": "2026-12-25"}])
    await _noon_job(app, 25, calendars=["odd"])
    # as if the installed holidays package no longer knew a country stored earlier
    await app.store.calendar_put(CalendarPutParams(app.tenant, "odd", [{"holidays": "ZZ"}]))
    app.clock.set(datetime(2026, 12, 25, 11, 59, 55, tzinfo=UTC))
    await _tick(app)
    assert len((await app.runs.find(job="noon")).items) == 1  # the calendar excludes nothing
