"""``to_jsonable`` and the option parsers of ``duetime.cli._output`` (durations:
tests/unit/test_durations.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from duetime._types import (
    Attempt,
    AttemptOutcome,
    JobStatus,
    Occurrence,
    Page,
    RetryPolicy,
    Schedule,
    ScheduleKind,
)
from duetime.cli._output import format_instant, to_jsonable

T0 = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)


def test_instants_are_utc_with_z() -> None:
    assert format_instant(T0) == "2026-03-08T07:00:00Z"
    assert format_instant(T0.replace(microsecond=250)) == "2026-03-08T07:00:00.000250Z"
    paris = datetime(2026, 3, 8, 8, 0, tzinfo=ZoneInfo("Europe/Paris"))
    assert to_jsonable(paris) == "2026-03-08T07:00:00Z"
    with pytest.raises(ValueError, match="naive"):
        to_jsonable(datetime(2026, 3, 8))


def test_plain_values() -> None:
    some = uuid.uuid4()
    assert to_jsonable(some) == str(some)
    assert to_jsonable(JobStatus.PAUSED) == "paused"
    assert to_jsonable(timedelta(minutes=1, milliseconds=500)) == 60.5
    assert to_jsonable(("a", 1, None, True)) == ["a", 1, None, True]
    assert to_jsonable({"at": T0, 1: [some]}) == {"at": "2026-03-08T07:00:00Z", "1": [str(some)]}
    assert to_jsonable(RetryPolicy()) == {
        "max_attempts": 3,
        "backoff_base": 1.0,
        "backoff_factor": 2.0,
        "backoff_cap": 600.0,
        "within": None,
        "permanent_on": [],
        "retry_on": [],
        "permanent_on_status": [],
        "retry_on_status": [],
    }
    with pytest.raises(TypeError, match="object"):
        to_jsonable(object())


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        (
            Schedule(ScheduleKind.CRON, cron="0 3 * * *", tz="Europe/Paris"),
            {
                "kind": "cron",
                "cron": "0 3 * * *",
                "tz": "Europe/Paris",
                "at": None,
                "every_seconds": None,
                "every_calendar": None,
                "anchor": None,
            },
        ),
        (
            Schedule(ScheduleKind.AT, at=T0),
            {
                "kind": "at",
                "cron": None,
                "tz": "UTC",
                "at": "2026-03-08T07:00:00Z",
                "every_seconds": None,
                "every_calendar": None,
                "anchor": None,
            },
        ),
        (
            Schedule(ScheduleKind.EVERY, every=timedelta(seconds=90), anchor=T0),
            {
                "kind": "every",
                "cron": None,
                "tz": "UTC",
                "at": None,
                "every_seconds": 90.0,
                "every_calendar": None,
                "anchor": "2026-03-08T07:00:00Z",
            },
        ),
    ],
)
def test_schedules_are_flattened(schedule: Schedule, expected: dict) -> None:
    assert to_jsonable(schedule) == expected


def test_occurrence_keeps_the_local_offset() -> None:
    local = T0.astimezone(ZoneInfo("America/New_York"))
    occurrence = Occurrence(T0, local, "moved from 02:30 (DST gap)")
    assert to_jsonable(occurrence) == {
        "utc": "2026-03-08T07:00:00Z",
        "local": "2026-03-08T03:00:00-04:00",
        "dst_note": "moved from 02:30 (DST gap)",
    }


def test_attempt_gets_its_duration_and_page_its_cursor() -> None:
    attempt = Attempt(
        run_id=uuid.uuid4(),
        job_id=uuid.uuid4(),
        tenant="t",
        number=1,
        token=1,
        worker_id="w",
        claimed_at=T0,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=2.5),
        outcome=AttemptOutcome.FAILED,
        error_class="E",
        error_message="m",
    )
    data = to_jsonable(attempt)
    assert data["duration_seconds"] == 2.5
    assert data["outcome"] == "failed"
    assert data["finished_at"] == "2026-03-08T07:00:02.500000Z"
    never = to_jsonable(Attempt(**{**data_fields(attempt), "started_at": None}))
    assert never["duration_seconds"] is None
    assert to_jsonable(Page([attempt], "c1")) == {"items": [data], "next_cursor": "c1"}


def data_fields(attempt: Attempt) -> dict:
    return {name: getattr(attempt, name) for name in Attempt.__dataclass_fields__}


def test_offsets_other_than_utc_are_converted() -> None:
    plus_two = datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    assert to_jsonable(plus_two) == "2026-01-01T00:00:00Z"
