"""``every`` in calendar units (issue 16, item 7): "1 day", "1 week", "1 month" keep the
anchor's wall time in the schedule's zone across DST changes; seconds, minutes, hours and a
``timedelta`` stay fixed durations. Pure computation (duetime.schedules), with property tests
against a reference that walks real time."""

from __future__ import annotations

import calendar
import os
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime._types import CalendarInterval, CalendarUnit, Schedule, ScheduleKind
from duetime.errors import ValidationError
from duetime.schedules import (
    every_schedule,
    first_fire,
    first_fire_after_change,
    next_fire_after,
    parse_every,
    preview,
    validate_schedule,
)

PARIS = ZoneInfo("Europe/Paris")
PROFILE = settings.get_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


def schedule(every: str, anchor: datetime, tz: str = "Europe/Paris") -> Schedule:
    return every_schedule(parse_every(every), tz, anchor)


def locals_of(s: Schedule, after: datetime, count: int) -> list[str]:
    return [o.local.isoformat() for o in preview(s, after, count)]


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 day", CalendarInterval(1, CalendarUnit.DAY)),
        ("2 days", CalendarInterval(2, CalendarUnit.DAY)),
        ("1 Week", CalendarInterval(1, CalendarUnit.WEEK)),
        ("3 months", CalendarInterval(3, CalendarUnit.MONTH)),
        ("90 seconds", timedelta(seconds=90)),
        ("5 minutes", timedelta(minutes=5)),
        ("1.5 hours", timedelta(minutes=90)),
        ("24 hours", timedelta(days=1)),
        ("PT15M", timedelta(minutes=15)),
        ("90s", timedelta(seconds=90)),
        ("1d", timedelta(days=1)),  # the compact duration forms stay fixed durations
        ("P1D", timedelta(days=1)),
    ],
)
def test_intervals_in_words(text: str, expected: object) -> None:
    assert parse_every(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1 fortnight", "is not an interval"),
        ("0 days", "must be positive"),
        ("-1 month", "must be positive"),
        ("0 seconds", "must be positive"),
        ("1.5 days", "counted whole"),
        ("1201 months", "from 1 to 1200"),
        ("", "is not an interval"),
    ],
)
def test_bad_intervals_name_the_field(text: str, reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_every(text)
    assert caught.value.field == "every"
    assert reason in caught.value.reason


def test_a_calendar_interval_is_shown_as_declared() -> None:
    assert str(CalendarInterval(1, CalendarUnit.DAY)) == "1 day"
    assert str(CalendarInterval(2, CalendarUnit.MONTH)) == "2 months"


def test_a_bad_calendar_interval_is_refused() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    bad = Schedule(
        ScheduleKind.EVERY, anchor=now, every_calendar=CalendarInterval(0, CalendarUnit.DAY)
    )
    with pytest.raises(ValidationError) as caught:
        validate_schedule(bad, now)
    assert caught.value.field == "every"


# --- DST: a day keeps the wall time, 24 hours does not --------------------------------------------


def test_one_day_keeps_nine_o_clock_across_both_changes() -> None:
    nine = schedule("1 day", datetime(2026, 3, 27, 9, tzinfo=PARIS))
    spring = locals_of(nine, datetime(2026, 3, 27, tzinfo=UTC), 4)
    assert spring == [
        "2026-03-27T09:00:00+01:00",
        "2026-03-28T09:00:00+01:00",
        "2026-03-29T09:00:00+02:00",  # 23 hours after the one before
        "2026-03-30T09:00:00+02:00",
    ]
    autumn = locals_of(nine, datetime(2026, 10, 24, tzinfo=UTC), 3)
    assert autumn == [
        "2026-10-24T09:00:00+02:00",
        "2026-10-25T09:00:00+01:00",  # 25 hours after
        "2026-10-26T09:00:00+01:00",
    ]


def test_twenty_four_hours_drifts_by_the_change() -> None:
    fixed = schedule("24 hours", datetime(2026, 3, 27, 9, tzinfo=PARIS))
    assert locals_of(fixed, datetime(2026, 3, 27, tzinfo=UTC), 3) == [
        "2026-03-27T09:00:00+01:00",
        "2026-03-28T09:00:00+01:00",
        "2026-03-29T10:00:00+02:00",
    ]
    as_timedelta = every_schedule(timedelta(days=1), "Europe/Paris", fixed.anchor)
    assert preview(as_timedelta, fixed.anchor - timedelta(seconds=1), 3) == preview(
        fixed, fixed.anchor - timedelta(seconds=1), 3
    )


def test_a_week_keeps_the_wall_time() -> None:
    weekly = schedule("1 week", datetime(2026, 3, 23, 9, tzinfo=PARIS))
    assert locals_of(weekly, datetime(2026, 3, 24, tzinfo=UTC), 2) == [
        "2026-03-30T09:00:00+02:00",
        "2026-04-06T09:00:00+02:00",
    ]
    fortnightly = schedule("2 weeks", datetime(2026, 3, 23, 9, tzinfo=PARIS))
    assert locals_of(fortnightly, datetime(2026, 3, 24, tzinfo=UTC), 1) == [
        "2026-04-06T09:00:00+02:00"
    ]


def test_a_time_in_the_spring_gap_moves_to_its_end_that_day_only() -> None:
    """The project's fixed-time DST rule (decision 0002): 02:30 does not exist on 29 March in
    Paris; that day's run is at 03:00 (the end of the gap), the next day's at 02:30 again."""
    early = schedule("1 day", datetime(2026, 3, 28, 2, 30, tzinfo=PARIS))
    got = preview(early, datetime(2026, 3, 28, 12, tzinfo=UTC), 2)
    assert [o.local.isoformat() for o in got] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    assert got[0].dst_note == "moved from 02:30 (DST gap)"
    assert got[1].dst_note is None


def test_a_repeated_time_fires_once_on_its_first_pass() -> None:
    early = schedule("1 day", datetime(2026, 10, 24, 2, 30, tzinfo=PARIS))
    got = preview(early, datetime(2026, 10, 24, 12, tzinfo=UTC), 2)
    assert [o.instant for o in got] == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST, not also 02:30 CET
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]
    assert got[0].dst_note == "first of a repeated hour"


# --- months ---------------------------------------------------------------------------------------


def test_a_month_keeps_the_anchor_day_clamped_to_each_month() -> None:
    end_of_month = schedule("1 month", datetime(2026, 1, 31, 9, tzinfo=PARIS))
    assert locals_of(end_of_month, datetime(2026, 1, 1, tzinfo=UTC), 5) == [
        "2026-01-31T09:00:00+01:00",
        "2026-02-28T09:00:00+01:00",
        "2026-03-31T09:00:00+02:00",  # back to the 31st, and across the DST change
        "2026-04-30T09:00:00+02:00",
        "2026-05-31T09:00:00+02:00",
    ]
    leap = schedule("1 month", datetime(2028, 1, 31, 9, tzinfo=PARIS))
    assert locals_of(leap, datetime(2028, 2, 1, tzinfo=UTC), 1) == ["2028-02-29T09:00:00+01:00"]
    quarterly = schedule("3 months", datetime(2026, 11, 30, 9, tzinfo=PARIS))
    assert locals_of(quarterly, datetime(2026, 12, 1, tzinfo=UTC), 2) == [
        "2027-02-28T09:00:00+01:00",
        "2027-05-30T09:00:00+02:00",
    ]


def test_next_fire_after_and_first_fire() -> None:
    anchor = datetime(2026, 3, 27, 9, tzinfo=PARIS)
    daily = schedule("1 day", anchor)
    assert next_fire_after(daily, anchor) == datetime(2026, 3, 28, 8, tzinfo=UTC)
    assert next_fire_after(daily, anchor - timedelta(seconds=1)) == anchor
    assert first_fire(daily, anchor) == anchor  # a new job fires at its anchor
    assert first_fire(daily, anchor + timedelta(days=1, hours=23)) == datetime(
        2026, 3, 29, 7, tzinfo=UTC
    )
    # changed at its instant: the next one, never the instant of the change
    assert first_fire_after_change(daily, datetime(2026, 3, 29, 7, tzinfo=UTC)) == datetime(
        2026, 3, 30, 7, tzinfo=UTC
    )


def test_year_9999_ends_it() -> None:
    late = schedule("1 month", datetime(9999, 11, 15, tzinfo=UTC), tz="UTC")
    assert len(preview(late, datetime(9999, 11, 1, tzinfo=UTC), 10)) == 2


# --- properties -----------------------------------------------------------------------------------

ZONES = ("Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC")


def reference_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first instant whose local clock reads ``wall`` or later, found by walking real time
    (minute-aligned walls): its first pass in a fold, the end of the gap in a gap."""
    t = wall.replace(tzinfo=UTC) - timedelta(hours=15)
    while (local := t.astimezone(zone).replace(tzinfo=None)) < wall:
        behind = wall - local
        t += behind - timedelta(hours=3) if behind > timedelta(hours=3) else timedelta(minutes=1)
    return t


def reference_wall(start: datetime, interval: CalendarInterval, k: int) -> datetime:
    if interval.unit is CalendarUnit.MONTH:
        month = start.month - 1 + k * interval.count
        year, month = start.year + month // 12, month % 12 + 1
        day = min(start.day, calendar.monthrange(year, month)[1])
        return start.replace(year=year, month=month, day=day)
    days = {CalendarUnit.DAY: 1, CalendarUnit.WEEK: 7}[interval.unit]
    return start + timedelta(days=days * k * interval.count)


@PROFILE
@given(
    zone_name=st.sampled_from(ZONES),
    anchor=st.datetimes(
        min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ).map(lambda d: d.replace(second=0, microsecond=0)),
    count=st.integers(min_value=1, max_value=3),
    unit=st.sampled_from(list(CalendarUnit)),
    steps=st.integers(min_value=0, max_value=30),
    offset=st.integers(min_value=-3 * 86400, max_value=3 * 86400),
)
def test_the_next_fire_is_the_first_reference_occurrence_after(
    zone_name: str,
    anchor: datetime,
    count: int,
    unit: CalendarUnit,
    steps: int,
    offset: int,
) -> None:
    zone = ZoneInfo(zone_name)
    interval = CalendarInterval(count, unit)
    start = anchor.astimezone(zone).replace(tzinfo=None)
    nominal = reference_wall(start, interval, steps).replace(tzinfo=UTC)
    after = max(nominal + timedelta(seconds=offset), anchor - timedelta(days=1))

    def occurrence(k: int) -> datetime:
        return anchor if k == 0 else reference_instant(reference_wall(start, interval, k), zone)

    k = 0
    while occurrence(k) <= after:
        k += 1
    expected = occurrence(k)
    s = every_schedule(interval, zone_name, anchor)
    assert next_fire_after(s, after) == expected
    assert first_fire(s, after + timedelta(microseconds=1)) == expected
    assert preview(s, after, 2)[0].instant == expected
    assert preview(s, after, 2)[1].instant == occurrence(k + 1)


# --- review fixes -------------------------------------------------------------------------------


def test_an_anchor_before_year_one_in_its_zone_is_an_error_not_the_end() -> None:
    """The low end of datetime's range is not "past year 9999": it is refused, naming anchor."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    schedule = every_schedule(
        CalendarInterval(1, CalendarUnit.DAY), "America/New_York", datetime(1, 1, 1, tzinfo=UTC)
    )
    for compute in (
        lambda: validate_schedule(schedule, now),
        lambda: first_fire(schedule, now),
        lambda: next_fire_after(schedule, now),
        lambda: preview(schedule, now, 3),
    ):
        with pytest.raises(ValidationError) as caught:
            compute()
        assert caught.value.field == "anchor"
        assert "before year 1 in America/New_York" in str(caught.value)
    # five hours later it is 0001-01-01 00:03:58 local (LMT): fine
    later = every_schedule(
        CalendarInterval(1, CalendarUnit.DAY), "America/New_York", datetime(1, 1, 1, 5, tzinfo=UTC)
    )
    validate_schedule(later, now)
    assert first_fire(later, now) is not None


def test_a_calendar_interval_takes_its_unit_by_name() -> None:
    assert CalendarInterval(1, "day") == CalendarInterval(1, CalendarUnit.DAY)  # type: ignore[arg-type]
    assert CalendarInterval(2, "Weeks").unit is CalendarUnit.WEEK  # type: ignore[arg-type]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for interval, says in [
        (CalendarInterval(1, "fortnight"), "unit is day, week or month"),  # type: ignore[arg-type]
        (CalendarInterval(1, "hour"), "fixed durations"),  # type: ignore[arg-type]
        (CalendarInterval(0, CalendarUnit.DAY), "whole count from 1 to 1200, got '0'"),
    ]:
        with pytest.raises(ValidationError) as caught:
            validate_schedule(every_schedule(interval, "UTC", now), now)
        assert caught.value.field == "every"
        assert says in str(caught.value)


def test_seven_days_and_one_week_are_one_interval_shown_as_declared() -> None:
    week, days = CalendarInterval(1, CalendarUnit.WEEK), CalendarInterval(7, CalendarUnit.DAY)
    assert week.normalized == days.normalized == days
    assert (str(week), str(days)) == ("1 week", "7 days")
