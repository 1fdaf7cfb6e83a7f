"""Cron grammar (SPEC §1): every construct, aliases, Vixie day semantics, and error messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice

import pytest

from duetime.errors import ValidationError
from duetime.schedules import ALIASES, CronExpression, parse_cron

# 2024-01-01 is a Monday; 2024 is a leap year.
JAN1 = datetime(2024, 1, 1, tzinfo=UTC)


def fires(expr: str, after: datetime = JAN1, n: int = 4, tz: str = "UTC") -> list[str]:
    """The next ``n`` fire instants as compact UTC strings."""
    cron = CronExpression.parse(expr, tz)
    return [o.instant.strftime("%Y-%m-%d %H:%M:%S") for o in islice(cron.iter_after(after), n)]


def days(expr: str, after: datetime = JAN1, n: int = 4) -> list[str]:
    return [f[:10] for f in fires(expr, after, n)]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # plain, lists, ranges, steps
        ("0 0 * * *", ["2024-01-02", "2024-01-03", "2024-01-04"]),
        ("0 0 10,20 * *", ["2024-01-10", "2024-01-20", "2024-02-10"]),
        ("0 0 10-12 * *", ["2024-01-10", "2024-01-11", "2024-01-12", "2024-02-10"]),
        ("0 0 1-31/10 * *", ["2024-01-11", "2024-01-21", "2024-01-31", "2024-02-01"]),
        ("0 0 5/10 * *", ["2024-01-05", "2024-01-15", "2024-01-25", "2024-02-05"]),
        # names, case-insensitive
        ("0 0 1 jan,Jul *", ["2024-07-01", "2025-01-01", "2025-07-01"]),
        ("0 0 1 FEB-APR *", ["2024-02-01", "2024-03-01", "2024-04-01", "2025-02-01"]),
        ("0 0 * * mon-wed", ["2024-01-02", "2024-01-03", "2024-01-08"]),
        ("0 0 * * MON-FRI/2", ["2024-01-03", "2024-01-05", "2024-01-08"]),
        # day-of-week 0 and 7 are both Sunday (2024-01-07 is a Sunday)
        ("0 0 * * 0", ["2024-01-07", "2024-01-14"]),
        ("0 0 * * 7", ["2024-01-07", "2024-01-14"]),
        ("0 0 * * SUN", ["2024-01-07", "2024-01-14"]),
        ("0 0 * * 5-7", ["2024-01-05", "2024-01-06", "2024-01-07", "2024-01-12"]),
        # L and LW
        ("0 0 L * *", ["2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30"]),
        ("0 0 L 2 *", ["2024-02-29", "2025-02-28"]),
        # LW: 2024-03-31 is a Sunday -> Fri 29th; 2024-08-31 is a Saturday -> Fri 30th
        ("0 0 LW 3,8 *", ["2024-03-29", "2024-08-30", "2025-03-31"]),
        # nW: 2024-06-01 is a Saturday -> Mon 3rd (never back into May);
        # 2024-09-01 is a Sunday -> Mon 2nd
        ("0 0 1W 6,9 *", ["2024-06-03", "2024-09-02", "2025-06-02"]),
        # 2024-03-31 is a Sunday -> Fri 29th (never forward into April); months without a
        # 31st have no 31W
        ("0 0 31W * *", ["2024-01-31", "2024-03-29", "2024-05-31", "2024-07-31"]),
        # month end: 2024-06-30 is a Sunday and the last day -> Fri 28th; Sat 2024-03-30 ->
        # Fri 29th; February has no 30th
        (
            "0 0 30W 1-6 *",
            ["2024-01-30", "2024-03-29", "2024-04-30", "2024-05-30", "2024-06-28"],
        ),
        # 15W: Sat 2024-06-15 -> Fri 14th, Sun 2024-09-15 -> Mon 16th
        ("0 0 15W 6,9 *", ["2024-06-14", "2024-09-16", "2025-06-16"]),
        ("0 0 1W,15 1 *", ["2024-01-15", "2025-01-01", "2025-01-15"]),
        # nL and n#k
        ("0 0 * * 5L", ["2024-01-26", "2024-02-23", "2024-03-29"]),
        ("0 0 * * 0L", ["2024-01-28", "2024-02-25", "2024-03-31"]),
        ("0 0 * * 7L", ["2024-01-28", "2024-02-25", "2024-03-31"]),
        ("0 0 * * MON#1", ["2024-02-05", "2024-03-04", "2024-04-01"]),
        ("0 0 * * 2#3", ["2024-01-16", "2024-02-20", "2024-03-19"]),
        ("0 0 * 2 MON#5", ["2044-02-29"]),
        # Vixie: both day fields restricted -> OR
        (
            "0 0 1,15 * MON",
            ["2024-01-08", "2024-01-15", "2024-01-22", "2024-01-29", "2024-02-01"],
        ),
        ("0 0 13 * FRI", ["2024-01-05", "2024-01-12", "2024-01-13", "2024-01-19"]),
        # ... one starts with '*' -> AND: Mondays that are odd days
        ("0 0 */2 * 1", ["2024-01-15", "2024-01-29", "2024-02-05", "2024-02-19"]),
        ("0 0 1 * */1", ["2024-02-01", "2024-03-01"]),
        # '?' counts as '*', so these are ANDs too
        ("0 0 ? * MON", ["2024-01-08", "2024-01-15"]),
        ("0 0 1 * ?", ["2024-02-01", "2024-03-01"]),
        ("0 0 13 * ?", ["2024-01-13", "2024-02-13"]),
    ],
)
def test_day_grammar(expr: str, expected: list[str]) -> None:
    assert days(expr, n=len(expected)) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("*/20 * * * * *", ["2024-01-01 00:00:20", "2024-01-01 00:00:40", "2024-01-01 00:01:00"]),
        ("30 0 0 * * *", ["2024-01-01 00:00:30", "2024-01-02 00:00:30"]),
        ("15,45 0 12 * * *", ["2024-01-01 12:00:15", "2024-01-01 12:00:45"]),
        ("5/20 * * * *", ["2024-01-01 00:05:00", "2024-01-01 00:25:00", "2024-01-01 00:45:00"]),
        ("10-30/10 1 * * *", ["2024-01-01 01:10:00", "2024-01-01 01:20:00", "2024-01-01 01:30:00"]),
        ("0 */6 * * *", ["2024-01-01 06:00:00", "2024-01-01 12:00:00", "2024-01-01 18:00:00"]),
        ("  0   12 * * *  ", ["2024-01-01 12:00:00"]),
        ("0\t12\t*\t*\t*", ["2024-01-01 12:00:00"]),
    ],
)
def test_time_grammar(expr: str, expected: list[str]) -> None:
    assert fires(expr, n=len(expected)) == expected


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("@yearly", ["2025-01-01 00:00:00", "2026-01-01 00:00:00"]),
        ("@annually", ["2025-01-01 00:00:00", "2026-01-01 00:00:00"]),
        ("@monthly", ["2024-02-01 00:00:00", "2024-03-01 00:00:00"]),
        ("@weekly", ["2024-01-07 00:00:00", "2024-01-14 00:00:00"]),
        ("@daily", ["2024-01-02 00:00:00", "2024-01-03 00:00:00"]),
        ("@midnight", ["2024-01-02 00:00:00", "2024-01-03 00:00:00"]),
        ("@hourly", ["2024-01-01 01:00:00", "2024-01-01 02:00:00"]),
        ("@HOURLY", ["2024-01-01 01:00:00", "2024-01-01 02:00:00"]),
    ],
)
def test_aliases(alias: str, expected: list[str]) -> None:
    assert fires(alias, n=2) == expected
    assert fires(ALIASES[alias.lower()], n=2) == expected


@pytest.mark.parametrize(
    ("expr", "wildcard"),
    [
        ("0 2 * * *", False),
        ("30 2 * * *", False),
        ("0,30 1-3 * * *", False),
        ("0 */2 * * *", True),
        ("*/15 * * * *", True),
        ("0 * * * *", True),
        ("30 * * * *", True),
        ("* 2 * * *", True),
        ("@hourly", True),
        ("@daily", False),
        ("0 30 2 * * *", False),
        ("*/20 30 2 * * *", True),
        ("* 30 2 * * *", True),
        ("0 * 2 * * *", True),
        ("0 0 * * * *", True),
        ("0-59 2 * * *", False),  # cronie: only a leading '*' makes a field wildcard
    ],
)
def test_wildcard_flag(expr: str, wildcard: bool) -> None:
    assert CronExpression.parse(expr).wildcard is wildcard


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("61 * * * *", "minute field '61' is invalid: 61 is out of range 0-59"),
        ("0 24 * * *", "hour field '24' is invalid: 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month field '0' is invalid: 0 is out of range 1-31"),
        ("0 0 32 * *", "day-of-month field '32' is invalid"),
        ("0 0 1 13 *", "month field '13' is invalid: 13 is out of range 1-12"),
        ("0 0 1 0 *", "month field '0' is invalid"),
        ("0 0 * * 8", "day-of-week field '8' is invalid: 8 is out of range 0-7"),
        ("60 0 0 * * *", "second field '60' is invalid: 60 is out of range 0-59"),
        ("0 0 * * MONDAY", "day-of-week field 'MONDAY' is invalid: unknown day-of-week name"),
        ("0 0 1 JANUARY *", "month field 'JANUARY' is invalid: unknown month name"),
        ("0 MON * * *", "hour field 'MON' is invalid: 'MON' is not a number"),
        ("*/0 * * * *", "minute field '*/0' is invalid: step must be at least 1"),
        ("*/x * * * *", "minute field '*/x' is invalid: step 'x' is not a whole number"),
        ("5-1 * * * *", "minute field '5-1' is invalid: range '5-1' runs backwards"),
        ("0 0 * * FRI-MON", "day-of-week field 'FRI-MON' is invalid: range 'FRI-MON' runs"),
        ("1,,2 * * * *", "minute field '1,,2' is invalid: empty list item"),
        ("1,61 * * * *", "minute field '1,61' is invalid: 61 is out of range"),
        ("-1 * * * *", "minute field '-1' is invalid"),
        ("0 0 * * MON#6", "day-of-week field 'MON#6' is invalid: '#6' must be #1 to #5"),
        ("0 0 * * MON#0", "day-of-week field 'MON#0' is invalid"),
        ("0 0 * * FRIL", "day-of-week field 'FRIL' is invalid"),
        ("0 0 * * L", "day-of-week field 'L' is invalid"),
        ("0 0 0W * *", "day-of-month field '0W' is invalid"),
        ("0 0 32W * *", "day-of-month field '32W' is invalid"),
        ("0 0 W * *", "day-of-month field 'W' is invalid"),
        ("0 0 1-5W * *", "day-of-month field '1-5W' is invalid"),
        ("0 0 5L * *", "day-of-month field '5L' is invalid"),
        ("0 0 L-2 * *", "day-of-month field 'L-2' is invalid"),
        ("0 0 1 L *", "month field 'L' is invalid"),
        # H (hashed) only in the seconds, minute and hour fields (tests/unit/test_hashed_cron.py)
        ("0 0 H * *", "day-of-month field 'H' is invalid: 'H' is only allowed in the second"),
        # '?' only in the two day fields, and only alone
        ("? * * * *", "minute field '?' is invalid: '?' is only allowed in the day-of-month"),
        ("0 ? * * *", "hour field '?' is invalid"),
        ("0 0 * ? *", "month field '?' is invalid"),
        ("? 0 0 * * *", "second field '?' is invalid"),
        ("0 0 ?,1 * *", "day-of-month field '?,1' is invalid: '?' must stand alone"),
        ("0 0 * * ?/2", "day-of-week field '?/2' is invalid: '?' must stand alone"),
        # field counts
        (
            "0 0 0 * * * 2024",
            "7 fields given; expected 5 (minute hour day-of-month month day-of-week) "
            "or 6 (with leading seconds)",
        ),
        ("* * * *", "4 fields given; expected 5"),
        ("*", "1 field given; expected 5"),
        ("", "expression is empty"),
        ("   ", "expression is empty"),
        ("@reboot", "unknown alias '@reboot'"),
        ("@daily 0", "unknown alias"),
        ("0 " * 600, "longer than 1024 characters"),
    ],
)
def test_errors_name_the_field(expr: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        CronExpression.parse(expr)
    assert info.value.field == "cron"
    assert message in info.value.reason
    assert str(info.value).startswith("cron: ")


def test_unknown_zone_is_a_tz_error() -> None:
    with pytest.raises(ValidationError) as info:
        CronExpression.parse("0 0 * * *", "Mars/Base")
    assert (info.value.field, info.value.reason) == ("tz", "unknown time zone 'Mars/Base'")


def test_non_string_expression() -> None:
    with pytest.raises(ValidationError) as info:
        CronExpression.parse(5)  # type: ignore[arg-type]
    assert info.value.field == "cron"


def test_never_firing_expression_parses_and_has_no_next() -> None:
    cron = CronExpression.parse("0 0 30 2 *")
    assert cron.next_after(JAN1) is None
    assert list(cron.iter_after(JAN1)) == []
    assert cron.never_fires_reason() == "February has no 30th"
    assert CronExpression.parse("0 0 31 4,6 *").never_fires_reason() == (
        "none of the chosen months has a 31st"
    )
    assert CronExpression.parse("0 0 31W 2 *").next_after(JAN1) is None
    # the fallback, for whatever the heuristics cannot explain
    assert CronExpression.parse("0 0 * 2 */1").never_fires_reason() == (
        "no occurrence in the next 50 years"
    )


def test_parse_is_cached_frozen_and_hashable() -> None:
    a = CronExpression.parse("*/5 * * * *", "Europe/London")
    assert CronExpression.parse("*/5 * * * *", "Europe/London") is a
    assert parse_cron(" */5 * * * * ", "Europe/London") == a
    assert hash(parse_cron(" */5 * * * * ", "Europe/London")) == hash(a)
    assert a != CronExpression.parse("*/5 * * * *", "UTC")
    assert {a: 1}[a] == 1
    with pytest.raises(AttributeError):
        a.expression = "x"  # type: ignore[misc]
    assert a.fields == ("0", "*/5", "*", "*", "*", "*")
    assert CronExpression.parse("0 0 ? * mon").fields == ("0", "0", "0", "*", "*", "MON")


def test_reuse_is_independent() -> None:
    """The compiled expression keeps no iteration state between calls."""
    cron = CronExpression.parse("0 12 * * *")
    later = datetime(2030, 6, 1, tzinfo=UTC)
    assert cron.next_after(later) == datetime(2030, 6, 1, 12, tzinfo=UTC)
    assert cron.next_after(JAN1) == datetime(2024, 1, 1, 12, tzinfo=UTC)
    first = cron.iter_after(JAN1)
    second = cron.iter_after(later)
    assert next(first).instant == datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert next(second).instant == datetime(2030, 6, 1, 12, tzinfo=UTC)
    assert next(first).instant == datetime(2024, 1, 2, 12, tzinfo=UTC)


def test_next_after_is_strict_and_accepts_any_zone() -> None:
    cron = CronExpression.parse("0 12 * * *")
    noon = datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert cron.next_after(noon) == noon + timedelta(days=1)
    assert cron.next_after(noon - timedelta(microseconds=1)) == noon
    in_paris = noon.astimezone(CronExpression.parse("0 0 * * *", "Europe/Paris").zone)
    result = cron.next_after(in_paris)
    assert result == noon + timedelta(days=1)
    assert result is not None
    assert result.tzinfo is UTC


def test_naive_after_is_refused() -> None:
    cron = CronExpression.parse("0 12 * * *")
    with pytest.raises(ValueError, match="timezone-aware"):
        cron.next_after(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        next(cron.iter_after(datetime(2024, 1, 1)))


def test_end_of_time_is_never_again() -> None:
    near_end = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    assert CronExpression.parse("0 0 1 1 *").next_after(near_end) is None
    assert CronExpression.parse("*/5 * * * *").next_after(near_end) is None
    assert list(CronExpression.parse("0 0 1 1 *").iter_after(near_end)) == []
