"""next_fire_after / first_fire / validate_schedule for every schedule kind, and zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from duetime._types import Schedule, ScheduleKind
from duetime.errors import ValidationError
from duetime.schedules import (
    WallKind,
    first_fire,
    load_zone,
    next_fire_after,
    validate_schedule,
    wall_instants,
    wall_to_instant,
)
from duetime.schedules.zones import transition_between

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)
CET = timezone(timedelta(hours=2))


def cron(expr: str, tz: str = "UTC") -> Schedule:
    return Schedule(kind=ScheduleKind.CRON, cron=expr, tz=tz)


def every(interval: timedelta, anchor: datetime | None = NOW) -> Schedule:
    return Schedule(kind=ScheduleKind.EVERY, every=interval, anchor=anchor)


def at(when: datetime | None, kind: ScheduleKind = ScheduleKind.AT) -> Schedule:
    return Schedule(kind=kind, at=when)


# --- now / at ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [ScheduleKind.AT, ScheduleKind.NOW])
def test_one_shot(kind: ScheduleKind) -> None:
    when = NOW + timedelta(hours=1)
    s = at(when, kind)
    assert next_fire_after(s, NOW) == when
    assert next_fire_after(s, when - timedelta(microseconds=1)) == when
    assert next_fire_after(s, when) is None
    assert next_fire_after(s, when + SEC) is None
    assert first_fire(s, NOW) == when
    # a past instant still fires (at once) when registered
    assert first_fire(s, when + timedelta(days=1)) == when


def test_at_in_another_zone_is_returned_in_utc() -> None:
    s = at(datetime(2024, 5, 1, 16, 0, tzinfo=CET))
    result = next_fire_after(s, NOW)
    assert result == datetime(2024, 5, 1, 14, 0, tzinfo=UTC)
    assert result is not None
    assert result.tzinfo is UTC
    assert first_fire(s, NOW) == result


# --- every ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (NOW - timedelta(days=3), NOW),  # before the anchor: the anchor (k = 0)
        (NOW - timedelta(microseconds=1), NOW),
        (NOW, NOW + timedelta(minutes=10)),  # strictly after
        (NOW + timedelta(minutes=9, seconds=59), NOW + timedelta(minutes=10)),
        (NOW + timedelta(minutes=10), NOW + timedelta(minutes=20)),
        (NOW + timedelta(days=365, minutes=5), NOW + timedelta(days=365, minutes=10)),
    ],
)
def test_every_next_fire_after(after: datetime, expected: datetime) -> None:
    assert next_fire_after(every(timedelta(minutes=10)), after) == expected


def test_every_is_real_time_across_dst() -> None:
    anchor = datetime(2024, 3, 10, 5, 0, tzinfo=UTC)  # 00:00 EST
    s = Schedule(kind=ScheduleKind.EVERY, every=timedelta(hours=1), anchor=anchor,
                 tz="America/New_York")  # fmt: skip
    x = anchor
    seen = []
    for _ in range(4):
        x = next_fire_after(s, x)  # type: ignore[assignment]
        seen.append(x)
    assert seen == [anchor + timedelta(hours=h) for h in range(1, 5)]


def test_every_with_odd_interval_is_exact() -> None:
    step = timedelta(seconds=7, microseconds=3)
    s = every(step)
    after = NOW + 1000 * step
    assert next_fire_after(s, after) == NOW + 1001 * step
    assert next_fire_after(s, after - timedelta(microseconds=1)) == after


def test_every_first_fire() -> None:
    s = every(timedelta(minutes=10))
    assert first_fire(s, NOW) == NOW  # anchor == now: fires at once
    assert first_fire(s, NOW - timedelta(hours=1)) == NOW  # anchor in the future
    assert first_fire(s, NOW + timedelta(minutes=10)) == NOW + timedelta(minutes=10)
    assert first_fire(s, NOW + timedelta(minutes=10, microseconds=1)) == NOW + timedelta(minutes=20)
    # no anchor: registration time is the anchor
    assert first_fire(every(timedelta(minutes=10), anchor=None), NOW) == NOW


def test_every_without_anchor_has_no_next() -> None:
    with pytest.raises(ValidationError) as info:
        next_fire_after(every(timedelta(minutes=1), anchor=None), NOW)
    assert info.value.field == "anchor"


def test_every_past_the_end_of_time() -> None:
    s = every(timedelta(days=10_000), anchor=datetime(9990, 1, 1, tzinfo=UTC))
    assert next_fire_after(s, datetime(9991, 1, 1, tzinfo=UTC)) is None
    assert first_fire(s, datetime(9991, 1, 1, tzinfo=UTC)) is None


# --- cron -------------------------------------------------------------------------------------


def test_cron_next_and_first() -> None:
    s = cron("30 2 * * *", "America/New_York")
    assert next_fire_after(s, NOW) == datetime(2024, 5, 2, 6, 30, tzinfo=UTC)
    assert first_fire(s, NOW) == datetime(2024, 5, 2, 6, 30, tzinfo=UTC)
    on_time = datetime(2024, 5, 2, 6, 30, tzinfo=UTC)
    assert first_fire(s, on_time) == on_time + timedelta(days=1)  # strictly after now
    assert next_fire_after(cron("0 0 30 2 *"), NOW) is None
    assert first_fire(cron("0 0 30 2 *"), NOW) is None


def test_naive_after_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire_after(cron("* * * * *"), datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        first_fire(cron("* * * * *"), datetime(2024, 1, 1))


# --- validate_schedule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        cron("*/5 * * * *"),
        cron("0 9 * * MON-FRI", "Europe/London"),
        cron("0 0 29 2 *"),  # leap years only
        cron("0 0 * 2 MON#5"),  # a few times a century
        every(timedelta(seconds=1)),
        every(timedelta(days=7), anchor=None),
        at(NOW + timedelta(days=1)),
        at(NOW - timedelta(days=1)),  # past: fires at once
        at(NOW, ScheduleKind.NOW),
    ],
)
def test_valid_schedules(schedule: Schedule) -> None:
    validate_schedule(schedule, NOW)


@pytest.mark.parametrize(
    ("schedule", "field", "reason"),
    [
        (cron("0 0 * * *", "Mars/Base"), "tz", "unknown time zone 'Mars/Base'"),
        (Schedule(kind=ScheduleKind.AT, at=NOW, tz=""), "tz", "unknown time zone ''"),
        (cron("61 * * * *"), "cron", "minute field '61' is invalid"),
        (cron(""), "cron", "needs a cron expression"),
        (Schedule(kind=ScheduleKind.CRON), "cron", "needs a cron expression"),
        (cron("0 0 0 * * * *"), "cron", "7 fields given"),
        (
            cron("0 0 30 2 *"),
            "cron",
            "schedule never fires ('0 0 30 2 *': February has no 30th)",
        ),
        (cron("0 0 31 4,6,9,11 *"), "cron", "schedule never fires"),
        (cron("0 0 30 2 */1"), "cron", "February has no 30th"),
        (cron("0 0 30W 2 *"), "cron", "February has no 30th"),
        (every(timedelta(0)), "every", "must be positive"),
        (every(timedelta(seconds=-5)), "every", "must be positive"),
        (every(timedelta(milliseconds=500)), "every", "must be at least 1 second"),
        (Schedule(kind=ScheduleKind.EVERY), "every", "needs an interval"),
        (every(timedelta(minutes=1), anchor=datetime(2024, 1, 1)), "anchor", "time zone offset"),
        (at(datetime(2024, 6, 1, 12, 0)), "at", "needs a time zone offset"),
        (at(None), "at", "needs an instant"),
        (at(None, ScheduleKind.NOW), "at", "needs an instant"),
    ],
)
def test_invalid_schedules(schedule: Schedule, field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_schedule(schedule, NOW)
    assert info.value.field == field
    assert reason in info.value.reason


def test_invalid_schedules_raise_from_every_entry_point() -> None:
    for fn in (next_fire_after, first_fire):
        with pytest.raises(ValidationError) as info:
            fn(every(timedelta(0)), NOW)
        assert info.value.field == "every"
        with pytest.raises(ValidationError) as info:
            fn(at(datetime(2024, 6, 1)), NOW)
        assert (info.value.field, info.value.reason) == ("at", "needs a time zone offset")


# --- zones ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Base",
        "",
        " UTC",
        "utc",
        "America",
        "../etc/passwd",
        "/etc/localtime",
        "localtime",
        "right/UTC",
        "Europe/London\x00",
    ],
)
def test_load_zone_refuses(name: str) -> None:
    with pytest.raises(ValidationError) as info:
        load_zone(name)
    assert info.value.field == "tz"
    assert info.value.reason == f"unknown time zone {name!r}"


def test_load_zone() -> None:
    assert load_zone("Europe/London").key == "Europe/London"
    assert load_zone("UTC").key == "UTC"
    assert load_zone("Asia/Kolkata") is load_zone("Asia/Kolkata")


def test_wall_mapping() -> None:
    ny = load_zone("America/New_York")
    gap = datetime(2024, 3, 10, 2, 30)
    fold = datetime(2024, 11, 3, 1, 30)
    plain = datetime(2024, 7, 1, 12, 0)
    assert wall_to_instant(gap, ny) == (datetime(2024, 3, 10, 7, 0, tzinfo=UTC), WallKind.GAP)
    assert wall_to_instant(fold, ny) == (datetime(2024, 11, 3, 5, 30, tzinfo=UTC), WallKind.FOLD)
    assert wall_to_instant(plain, ny) == (datetime(2024, 7, 1, 16, 0, tzinfo=UTC), WallKind.NORMAL)
    assert wall_instants(gap, ny) == ()
    assert wall_instants(fold, ny) == (
        datetime(2024, 11, 3, 5, 30, tzinfo=UTC),
        datetime(2024, 11, 3, 6, 30, tzinfo=UTC),
    )
    assert wall_instants(plain, ny) == (datetime(2024, 7, 1, 16, 0, tzinfo=UTC),)
    # the fold attribute of the wall time is ignored
    assert wall_to_instant(fold.replace(fold=1), ny)[0] == datetime(2024, 11, 3, 5, 30, tzinfo=UTC)
    lord_howe = load_zone("Australia/Lord_Howe")
    assert wall_to_instant(datetime(2024, 10, 6, 2, 0), lord_howe) == (
        datetime(2024, 10, 5, 15, 30, tzinfo=UTC),
        WallKind.GAP,
    )


def test_transition_between() -> None:
    london = load_zone("Europe/London")
    t = transition_between(
        london, datetime(2024, 3, 30, tzinfo=UTC), datetime(2024, 4, 2, 0, 0, 0, 5, tzinfo=UTC)
    )
    assert t == datetime(2024, 3, 31, 1, 0, tzinfo=UTC)
