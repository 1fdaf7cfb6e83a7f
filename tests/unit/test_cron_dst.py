"""cronie's DST rule, table by table, in zones with 1 h, 30 min and no DST.

2024 transitions used below:

- America/New_York: 03-10 02:00 EST → 03:00 EDT (07:00Z); 11-03 02:00 EDT → 01:00 EST (06:00Z).
- Europe/London: 03-31 01:00 GMT → 02:00 BST (01:00Z); 10-27 02:00 BST → 01:00 GMT (01:00Z).
- Australia/Lord_Howe (+10:30 / +11): 04-07 02:00 → 01:30 (04-06 15:00Z);
  10-06 02:00 → 02:30 (10-05 15:30Z).
- Asia/Kolkata: +05:30 all year.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice

import pytest

from duetime.schedules import CronExpression

Row = tuple[str, str | None]  # (UTC instant "MM-DD HH:MM[:SS]", dst_note)

GAP = "moved from {} (DST gap)"
FIRST = "first of a repeated hour"
PASS1 = "repeated hour (first pass)"
PASS2 = "repeated hour (second pass)"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(f"2024-{text}").replace(tzinfo=UTC)


def table(expr: str, tz: str, after: str, n: int) -> list[Row]:
    out: list[Row] = []
    for occ in islice(CronExpression.parse(expr, tz).iter_after(utc(after)), n):
        fmt = "%m-%d %H:%M:%S" if occ.instant.second else "%m-%d %H:%M"
        out.append((occ.instant.strftime(fmt), occ.dst_note))
    return out


CASES: list[tuple[str, str, str, list[Row]]] = [
    # ---- New York, spring forward (02:00-02:59 do not exist) ----
    ("30 2 * * *", "America/New_York", "03-09 12:00", [
        ("03-10 07:00", GAP.format("02:30")),  # 03:00 EDT, the end of the gap
        ("03-11 06:30", None),
    ]),
    ("0 2 * * *", "America/New_York", "03-09 12:00", [
        ("03-10 07:00", GAP.format("02:00")),
        ("03-11 06:00", None),
    ]),
    # several gap wall times and the gap end itself land on one instant: one fire
    ("0,30 2,3 * * *", "America/New_York", "03-10 06:00", [
        ("03-10 07:00", GAP.format("02:00, 02:30")),
        ("03-10 07:30", None),
        ("03-11 06:00", None),
    ]),
    ("30 1 * * *", "America/New_York", "03-09 12:00", [
        ("03-10 06:30", None),
        ("03-11 05:30", None),
    ]),
    ("*/15 * * * *", "America/New_York", "03-10 06:20", [
        ("03-10 06:30", None),  # 01:30 EST
        ("03-10 06:45", None),  # 01:45 EST
        ("03-10 07:00", None),  # 03:00 EDT: 02:00-02:45 are simply absent
        ("03-10 07:15", None),
    ]),
    ("0 * * * *", "America/New_York", "03-10 05:30", [
        ("03-10 06:00", None),  # 01:00 EST
        ("03-10 07:00", None),  # 03:00 EDT
        ("03-10 08:00", None),
    ]),
    ("30 * * * *", "America/New_York", "03-10 05:45", [
        ("03-10 06:30", None),  # 01:30 EST
        ("03-10 07:30", None),  # 03:30 EDT; 02:30 absent
    ]),
    ("0 30 2 * * *", "America/New_York", "03-09 12:00", [
        ("03-10 07:00", GAP.format("02:30")),
        ("03-11 06:30", None),
    ]),
    ("15 30 2 * * *", "America/New_York", "03-09 12:00", [
        ("03-10 07:00", GAP.format("02:30:15")),
        ("03-11 06:30:15", None),
    ]),
    ("*/20 30 2 * * *", "America/New_York", "03-09 12:00", [
        ("03-11 06:30", None),  # no 02:30 on 03-10 at all
        ("03-11 06:30:20", None),
        ("03-11 06:30:40", None),
    ]),
    # ---- New York, fall back (01:00-01:59 happen twice) ----
    ("30 1 * * *", "America/New_York", "11-02 12:00", [
        ("11-03 05:30", FIRST),  # 01:30 EDT only
        ("11-04 06:30", None),
    ]),
    ("30 2 * * *", "America/New_York", "11-02 12:00", [
        ("11-03 07:30", None),  # 02:30 EST: happens once
        ("11-04 07:30", None),
    ]),
    ("0 2 * * *", "America/New_York", "11-02 12:00", [
        ("11-03 07:00", None),
        ("11-04 07:00", None),
    ]),
    ("0 1,2 * * *", "America/New_York", "11-03 00:00", [
        ("11-03 05:00", FIRST),
        ("11-03 07:00", None),
    ]),
    ("*/15 * * * *", "America/New_York", "11-03 05:20", [
        ("11-03 05:30", PASS1),
        ("11-03 05:45", PASS1),
        ("11-03 06:00", PASS2),  # 01:00 EST
        ("11-03 06:15", PASS2),
        ("11-03 06:30", PASS2),
        ("11-03 06:45", PASS2),
        ("11-03 07:00", None),  # 02:00 EST
    ]),
    ("0 * * * *", "America/New_York", "11-03 03:30", [
        ("11-03 04:00", None),
        ("11-03 05:00", PASS1),
        ("11-03 06:00", PASS2),
        ("11-03 07:00", None),
    ]),
    ("30 * * * *", "America/New_York", "11-03 04:45", [
        ("11-03 05:30", PASS1),
        ("11-03 06:30", PASS2),
        ("11-03 07:30", None),
    ]),
    ("0 30 1 * * *", "America/New_York", "11-02 12:00", [
        ("11-03 05:30", FIRST),
        ("11-04 06:30", None),
    ]),
    ("*/20 30 1 * * *", "America/New_York", "11-03 05:00", [
        ("11-03 05:30", PASS1),
        ("11-03 05:30:20", PASS1),
        ("11-03 05:30:40", PASS1),
        ("11-03 06:30", PASS2),
        ("11-03 06:30:20", PASS2),
        ("11-03 06:30:40", PASS2),
        ("11-04 06:30", None),
    ]),
    # ---- London (transitions at 01:00 UTC) ----
    ("30 1 * * *", "Europe/London", "03-30 00:00", [
        ("03-30 01:30", None),  # 01:30 GMT
        ("03-31 01:00", GAP.format("01:30")),  # 02:00 BST
        ("04-01 00:30", None),  # 01:30 BST
    ]),
    ("30 * * * *", "Europe/London", "03-30 23:45", [
        ("03-31 00:30", None),  # 00:30 GMT
        ("03-31 01:30", None),  # 02:30 BST; 01:30 absent
    ]),
    ("30 1 * * *", "Europe/London", "10-26 12:00", [
        ("10-27 00:30", FIRST),  # 01:30 BST
        ("10-28 01:30", None),  # 01:30 GMT
    ]),
    ("30 * * * *", "Europe/London", "10-26 23:00", [
        ("10-26 23:30", None),  # 00:30 BST
        ("10-27 00:30", PASS1),  # 01:30 BST
        ("10-27 01:30", PASS2),  # 01:30 GMT
        ("10-27 02:30", None),
    ]),
    ("0 1 * * *", "Europe/London", "03-30 12:00", [
        ("03-31 01:00", GAP.format("01:00")),
        ("04-01 00:00", None),
    ]),
    # ---- Lord Howe: a 30-minute shift ----
    ("15 2 * * *", "Australia/Lord_Howe", "10-04 12:00", [
        ("10-04 15:45", None),  # 02:15 +10:30
        ("10-05 15:30", GAP.format("02:15")),  # 02:30 +11, the end of the half-hour gap
        ("10-06 15:15", None),  # 02:15 +11
    ]),
    ("45 2 * * *", "Australia/Lord_Howe", "10-05 12:00", [
        ("10-05 15:45", None),  # 02:45 +11: after the gap, untouched
    ]),
    ("15 2 * * *", "Australia/Lord_Howe", "04-06 12:00", [
        ("04-06 15:45", None),  # 02:15 +10:30: not repeated
    ]),
    ("45 1 * * *", "Australia/Lord_Howe", "04-05 12:00", [
        ("04-05 14:45", None),  # 01:45 +11
        ("04-06 14:45", FIRST),  # 01:45 +11, the first of two
        ("04-07 15:15", None),  # 01:45 +10:30
    ]),
    ("*/15 * * * *", "Australia/Lord_Howe", "04-06 14:20", [
        ("04-06 14:30", PASS1),  # 01:30 +11
        ("04-06 14:45", PASS1),  # 01:45 +11
        ("04-06 15:00", PASS2),  # 01:30 +10:30
        ("04-06 15:15", PASS2),  # 01:45 +10:30
        ("04-06 15:30", None),  # 02:00 +10:30
    ]),
    ("*/15 * * * *", "Australia/Lord_Howe", "10-05 15:00", [
        ("10-05 15:15", None),  # 01:45 +10:30
        ("10-05 15:30", None),  # 02:30 +11: 02:00 and 02:15 absent
        ("10-05 15:45", None),
    ]),
    ("0 * * * *", "Australia/Lord_Howe", "10-05 13:00", [
        ("10-05 13:30", None),  # 00:00 +10:30
        ("10-05 14:30", None),  # 01:00 +10:30
        ("10-05 16:00", None),  # 03:00 +11: 90 minutes later
    ]),
    ("30 * * * *", "Australia/Lord_Howe", "10-05 13:30", [
        ("10-05 14:00", None),  # 00:30 +10:30
        ("10-05 15:00", None),  # 01:30 +10:30
        ("10-05 15:30", None),  # 02:30 +11: exists (the gap is 02:00-02:29)
        ("10-05 16:30", None),
    ]),
    # ---- Kolkata: no DST ----
    ("30 2 * * *", "Asia/Kolkata", "03-09 12:00", [
        ("03-09 21:00", None),
        ("03-10 21:00", None),
    ]),
    ("*/15 * * * *", "Asia/Kolkata", "11-03 05:20", [
        ("11-03 05:30", None),
        ("11-03 05:45", None),
    ]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    CASES,
    ids=[f"{tz.split('/')[-1]}:{expr}@{after}" for expr, tz, after, _ in CASES],
)
def test_dst_table(expr: str, tz: str, after: str, expected: list[Row]) -> None:
    assert table(expr, tz, after, len(expected)) == expected
    cron = CronExpression.parse(expr, tz)
    # next_after agrees with the first occurrence, and chained calls walk the same list
    x = utc(after)
    for row in expected:
        x_next = cron.next_after(x)
        assert x_next is not None
        assert table(expr, tz, x.strftime("%m-%d %H:%M:%S.%f"), 1)[0] == row
        x = x_next


@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    [
        # starting inside the repeated hour, on its second pass
        ("*/15 * * * *", "America/New_York", "11-03 06:10", ["11-03 06:15", "11-03 06:30"]),
        # ... on the first pass: the second pass of earlier wall times is still to come
        ("50 * * * *", "America/New_York", "11-03 05:55", ["11-03 06:50", "11-03 07:50"]),
        ("0 * * * *", "America/New_York", "11-03 05:59", ["11-03 06:00", "11-03 07:00"]),
        # a fixed-time job started on the second pass waits for the next day
        ("30 1 * * *", "America/New_York", "11-03 06:10", ["11-04 06:30"]),
        ("30 1 * * *", "America/New_York", "11-03 05:29", ["11-03 05:30", "11-04 06:30"]),
        # exactly on an occurrence: strictly after
        ("30 2 * * *", "America/New_York", "03-10 07:00", ["03-11 06:30"]),
        ("30 * * * *", "America/New_York", "11-03 05:30", ["11-03 06:30", "11-03 07:30"]),
    ],
)
def test_starting_inside_a_transition(expr: str, tz: str, after: str, expected: list[str]) -> None:
    assert [row[0] for row in table(expr, tz, after, len(expected))] == expected


def test_local_time_is_in_the_zone() -> None:
    occ = next(
        CronExpression.parse("*/15 * * * *", "America/New_York").iter_after(utc("11-03 06:10"))
    )
    assert occ.local.isoformat() == "2024-11-03T01:15:00-05:00"
    assert occ.local.fold == 1
    assert occ.instant.tzinfo is UTC


def test_a_seven_hour_fold() -> None:
    """Antarctica/Vostok set its clock back 7 h (+07 → +00) at 1994-01-31 17:00Z: a wildcard job
    started just before sees 17:00-23:00 twice; a fixed-time job does not fire again."""
    after = datetime(1994, 1, 31, 15, 0, tzinfo=UTC)  # 22:00 +07, an hour before
    hourly = CronExpression.parse("0 * * * *", "Antarctica/Vostok")
    got = [(o.instant.hour, o.local.hour, o.dst_note) for o in islice(hourly.iter_after(after), 9)]
    assert got == [
        (16, 23, PASS1),
        *[(h, h, PASS2) for h in range(17, 24)],
        (0, 0, None),
    ]
    fixed = CronExpression.parse("0 22 * * *", "Antarctica/Vostok")
    assert fixed.next_after(after) == datetime(1994, 2, 1, 22, 0, tzinfo=UTC)
    late = CronExpression.parse("0 23 * * *", "Antarctica/Vostok")
    occ = next(late.iter_after(after))
    assert (occ.instant, occ.dst_note) == (datetime(1994, 1, 31, 16, 0, tzinfo=UTC), FIRST)
    assert late.next_after(occ.instant) == datetime(1994, 2, 1, 23, 0, tzinfo=UTC)
