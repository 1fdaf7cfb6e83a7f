"""The pure calendar rules (schedules/calendars.py): each rule on the job's wall clock, the JSON
form round-trips, field errors name the rule, and business-day shifts keep the wall time and
never land on an excluded day (property-tested over years of instants)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import ValidationError
from duetime.schedules.calendars import (
    Calendar,
    CalendarShift,
    calendar_fields,
    exclusion,
    parse_rules,
    rule_document,
    shift_occurrence,
)

NEW_YORK = ZoneInfo("America/New_York")
TOKYO = ZoneInfo("Asia/Tokyo")


def calendar(*rules: dict[str, object], name: str = "c") -> Calendar:
    return Calendar(name, parse_rules(list(rules)))


def test_a_date_is_read_on_the_jobs_wall_clock() -> None:
    xmas = calendar({"date": "2026-12-25"})
    # 2026-12-25T02:00Z is still the 24th in New York, already the 25th in Tokyo
    at = datetime(2026, 12, 25, 2, tzinfo=UTC)
    assert xmas.excludes(at, NEW_YORK) is None
    assert xmas.excludes(at, TOKYO) == "2026-12-25"


def test_each_rule_says_why() -> None:
    rules = calendar(
        {"from": "2026-08-01", "to": "2026-08-15"},
        {"weekdays": ["Saturday", "sun"]},
        {"cron": "* 0-5 * * *"},
        {"holidays": "GB", "subdiv": "sct"},
    )
    utc = ZoneInfo("UTC")
    assert (
        rules.excludes(datetime(2026, 8, 15, 23, 59, tzinfo=UTC), utc) == "2026-08-01..2026-08-15"
    )
    assert rules.excludes(datetime(2026, 11, 28, 12, tzinfo=UTC), utc) == "sat"
    assert rules.excludes(datetime(2026, 11, 24, 5, 59, tzinfo=UTC), utc) == "cron * 0-5 * * *"
    assert rules.excludes(datetime(2026, 11, 24, 6, tzinfo=UTC), utc) is None
    assert "Andrew" in (rules.excludes(datetime(2026, 11, 30, 12, tzinfo=UTC), utc) or "")


def test_the_json_form_round_trips() -> None:
    raw = [
        {"date": "2026-12-25"},
        {"from": "2026-12-24", "to": "2027-01-01"},
        {"weekdays": ["sat", "sun"]},
        {"cron": "* 0-5 * * *"},
        {"holidays": "US", "subdiv": "CA"},
    ]
    assert [rule_document(r) for r in parse_rules(raw)] == raw


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ([], "rules"),
        ([{"date": "2026-02-30"}], "rules[0].date"),
        ([{"date": "2026-01-01", "weekdays": ["sat"]}], "rules[0]"),
        ([{"from": "2026-01-02"}], "rules[0].to"),
        ([{"weekdays": []}], "rules[0].weekdays"),
        ([{"cron": "* * * *"}], "rules[0].cron"),
        ([{"cron": "61 * * * *"}], "rules[0].cron"),
        ([{"holidays": "XX"}], "rules[0].holidays"),
        ([{"holidays": "US", "subdiv": "ZZ"}], "rules[0].subdiv"),
        ([{"date": "2026-01-01", "note": "x"}], "rules[0].note"),
        (["2026-01-01"], "rules[0]"),
    ],
)
def test_bad_rules_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(ValidationError) as bad:
        parse_rules(raw)
    assert bad.value.field == field


def test_a_jobs_calendar_fields() -> None:
    assert calendar_fields(["a", "b", "a"], None) == {
        "calendars": ("a", "b"),
        "calendar_shift": None,
    }
    assert (
        calendar_fields(["a"], "previous_business_day")["calendar_shift"] == "previous_business_day"
    )
    for names, shift, field in (
        ("a", None, "calendars"),
        (["bad name"], None, "calendars"),
        ([], "next_business_day", "calendar_shift"),
        (["a"], "tomorrow", "calendar_shift"),
    ):
        with pytest.raises(ValidationError) as bad:
            calendar_fields(names, shift)
        assert bad.value.field == field


def test_a_shift_keeps_the_wall_time_across_a_dst_change() -> None:
    weekend = [calendar({"weekdays": ["sat", "sun"]})]
    saturday = datetime(2026, 10, 31, 9, 30, tzinfo=NEW_YORK)  # EDT; DST ends Sunday
    moved = shift_occurrence(saturday, NEW_YORK, weekend, CalendarShift.NEXT_BUSINESS_DAY)
    assert moved is not None
    assert moved.astimezone(NEW_YORK) == datetime(2026, 11, 2, 9, 30, tzinfo=NEW_YORK)  # EST
    assert moved - saturday == timedelta(days=2, hours=1)


def test_a_shift_with_no_business_day_within_a_year_gives_up() -> None:
    always = [calendar({"weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]})]
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert shift_occurrence(at, NEW_YORK, always, CalendarShift.NEXT_BUSINESS_DAY) is None


@settings(max_examples=200, deadline=None)
@given(
    at=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1)),
    shift=st.sampled_from(list(CalendarShift)),
)
def test_a_shifted_occurrence_never_lands_on_an_excluded_day(
    at: datetime, shift: CalendarShift
) -> None:
    calendars = [calendar({"weekdays": ["sat", "sun"]}), calendar({"holidays": "US"}, name="h")]
    instant = at.replace(tzinfo=UTC)
    moved = shift_occurrence(instant, NEW_YORK, calendars, shift)
    assert moved is not None
    assert exclusion(moved, NEW_YORK, calendars) is None
    before, after = sorted((instant, moved))
    assert timedelta(0) < after - before < timedelta(days=7)
    if shift is CalendarShift.NEXT_BUSINESS_DAY:
        assert moved > instant
    else:
        assert moved < instant
