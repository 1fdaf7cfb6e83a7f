"""preview(): count bounds, every kind, local times and DST notes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from duetime._types import Occurrence, Schedule, ScheduleKind
from duetime.errors import ValidationError
from duetime.schedules import MAX_PREVIEW, preview

AFTER = datetime(2024, 3, 9, 12, 0, tzinfo=UTC)


def cron(expr: str, tz: str = "UTC") -> Schedule:
    return Schedule(kind=ScheduleKind.CRON, cron=expr, tz=tz)


@pytest.mark.parametrize("count", [0, -1, MAX_PREVIEW + 1, True, 2.0, "3"])
def test_count_bounds(count: object) -> None:
    with pytest.raises(ValidationError) as info:
        preview(cron("* * * * *"), AFTER, count)  # type: ignore[arg-type]
    assert info.value.field == "count"
    assert "1 to 1000" in info.value.reason


@pytest.mark.parametrize("count", [1, 7, MAX_PREVIEW])
def test_count_is_honoured(count: int) -> None:
    result = preview(cron("* * * * *"), AFTER, count)
    assert len(result) == count
    assert result[0].instant == AFTER + timedelta(minutes=1)
    assert all(a.instant < b.instant for a, b in itertools.pairwise(result))


def test_cron_preview_marks_dst_moves() -> None:
    result = preview(cron("30 2 * * *", "America/New_York"), AFTER - timedelta(hours=12), 3)
    assert result == [
        Occurrence(
            datetime(2024, 3, 9, 7, 30, tzinfo=UTC),
            datetime(2024, 3, 9, 7, 30, tzinfo=UTC).astimezone(result[0].local.tzinfo),
            None,
        ),
        Occurrence(
            datetime(2024, 3, 10, 7, 0, tzinfo=UTC),
            datetime(2024, 3, 10, 7, 0, tzinfo=UTC).astimezone(result[0].local.tzinfo),
            "moved from 02:30 (DST gap)",
        ),
        Occurrence(
            datetime(2024, 3, 11, 6, 30, tzinfo=UTC),
            datetime(2024, 3, 11, 6, 30, tzinfo=UTC).astimezone(result[0].local.tzinfo),
            None,
        ),
    ]
    assert [o.local.isoformat() for o in result] == [
        "2024-03-09T02:30:00-05:00",
        "2024-03-10T03:00:00-04:00",
        "2024-03-11T02:30:00-04:00",
    ]


def test_cron_preview_marks_repeats() -> None:
    fall = datetime(2024, 11, 3, 4, 30, tzinfo=UTC)
    fixed = preview(cron("30 1 * * *", "America/New_York"), fall, 2)
    assert [(o.local.isoformat(), o.dst_note) for o in fixed] == [
        ("2024-11-03T01:30:00-04:00", "first of a repeated hour"),
        ("2024-11-04T01:30:00-05:00", None),
    ]
    wild = preview(cron("30 * * * *", "America/New_York"), fall, 3)
    assert [(o.local.isoformat(), o.dst_note) for o in wild] == [
        ("2024-11-03T01:30:00-04:00", "repeated hour (first pass)"),
        ("2024-11-03T01:30:00-05:00", "repeated hour (second pass)"),
        ("2024-11-03T02:30:00-05:00", None),
    ]


def test_cron_preview_stops_when_schedule_ends() -> None:
    assert preview(cron("0 0 30 2 *"), AFTER, 5) == []


def test_every_preview() -> None:
    anchor = datetime(2024, 3, 10, 5, 0, tzinfo=UTC)
    s = Schedule(
        kind=ScheduleKind.EVERY, every=timedelta(hours=1), anchor=anchor, tz="America/New_York"
    )
    result = preview(s, anchor - timedelta(hours=5), 4)
    assert [o.instant for o in result] == [anchor + timedelta(hours=h) for h in range(4)]
    # real time: 02:00 EST does not exist, so the local clock jumps from 01:00 to 03:00
    assert [o.local.strftime("%H:%M") for o in result] == ["00:00", "01:00", "03:00", "04:00"]
    assert all(o.dst_note is None for o in result)
    assert [o.instant for o in preview(s, anchor, 2)] == [
        anchor + timedelta(hours=1),
        anchor + timedelta(hours=2),
    ]


@pytest.mark.parametrize("kind", [ScheduleKind.AT, ScheduleKind.NOW])
def test_one_shot_preview(kind: ScheduleKind) -> None:
    when = AFTER + timedelta(hours=3)
    s = Schedule(kind=kind, at=when, tz="Asia/Kolkata")
    (only,) = preview(s, AFTER, 10)
    assert only.instant == when
    assert only.local.isoformat() == "2024-03-09T20:30:00+05:30"
    assert preview(s, when, 10) == []


def test_preview_validates_the_schedule() -> None:
    with pytest.raises(ValidationError) as info:
        preview(cron("0 0 * * *", "Mars/Base"), AFTER, 3)
    assert info.value.field == "tz"
    with pytest.raises(ValidationError) as info:
        preview(cron("0 0 ? ? *"), AFTER, 3)
    assert info.value.field == "cron"
