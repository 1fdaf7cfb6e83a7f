"""Property tests of cron occurrences over 2020–2035 in zones with 1 h, 30 min and no DST.

References are independent of the code under test:

- wildcard jobs: walk real time minute by minute (UTC) and keep the instants whose local wall
  fields match the expression;
- fixed-time jobs: each matching local wall time w fires at the first instant whose local wall
  clock reads >= w (its first pass in a fold, the end of the gap in a gap), once per distinct
  instant.

Hypothesis profiles: ``ci`` (few examples, used when CI=true) and ``dev``; they are applied to
these tests only, so loading them does not change other test modules' settings.
"""

from __future__ import annotations

import bisect
import functools
import os
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from duetime.schedules import CronExpression

ZONES = ("America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata")
MINUTE = timedelta(minutes=1)


def _profile(name: str, **kwargs: object) -> None:
    try:
        settings.get_profile(name)
    except InvalidArgument:
        settings.register_profile(name, **kwargs)  # type: ignore[arg-type]


_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


# --- zones ----------------------------------------------------------------------------------------


@functools.cache
def transitions(tz: str, year: int) -> tuple[datetime, ...]:
    """UTC instants at which ``tz``'s offset changes during ``year`` (to the minute)."""
    zone = ZoneInfo(tz)
    found: list[datetime] = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=6)
    while t < end:
        if t.astimezone(zone).utcoffset() != (t + step).astimezone(zone).utcoffset():
            lo, hi = t, t + step
            while hi - lo > MINUTE:
                mid = lo + (hi - lo) / 2
                mid = mid.replace(second=0, microsecond=0)
                if mid.astimezone(zone).utcoffset() == lo.astimezone(zone).utcoffset():
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
        t += step
    return tuple(found)


def local(t: datetime, zone: ZoneInfo) -> datetime:
    return t.astimezone(zone).replace(tzinfo=None, fold=0)


# --- expressions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    weekdays: frozenset[int] | None  # cron numbering (0 = Sunday); None = '*'
    wildcard: bool

    def matches(self, wall: datetime) -> bool:
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and self.matches_day(wall.date())
        )

    def matches_day(self, day: date) -> bool:
        return self.weekdays is None or (day.weekday() + 1) % 7 in self.weekdays


def _render(values: frozenset[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


@st.composite
def fixed_fields(draw: st.DrawFn, top: int, hot: list[int]) -> tuple[str, frozenset[int]]:
    values = draw(st.frozensets(st.sampled_from(hot) | st.integers(0, top), min_size=1, max_size=3))
    return _render(values), values


@st.composite
def step_fields(draw: st.DrawFn, top: int, star: bool) -> tuple[str, frozenset[int]]:
    """``*/k`` (wildcard) if ``star``, else ``a/k`` (fixed: does not start with ``*``)."""
    start = None if star else draw(st.sampled_from([0, 1, 5, 15, 30]))
    step = draw(st.integers(1, 30) if top == 59 else st.integers(1, 8))
    text = f"*/{step}" if start is None else f"{start}/{step}"
    return text, frozenset(range(start or 0, top + 1, step))


@st.composite
def weekday_fields(draw: st.DrawFn) -> tuple[str, frozenset[int] | None]:
    if draw(st.integers(0, 3)):
        return "*", None
    days = draw(st.frozensets(st.integers(0, 6), min_size=1, max_size=4))
    # 7 is Sunday too
    text = ",".join("7" if d == 0 and draw(st.booleans()) else str(d) for d in sorted(days))
    return text, days


# Minutes at 0/15/30/45 and hours 0-3 hit the transitions of all chosen zones.
_HOT_MINUTES = [0, 15, 30, 45, 59]
_HOT_HOURS = [0, 1, 2, 3]


@st.composite
def fixed_exprs(draw: st.DrawFn) -> Expr:
    minute, minutes = draw(fixed_fields(59, _HOT_MINUTES) | step_fields(59, star=False))
    hour, hours = draw(fixed_fields(23, _HOT_HOURS))
    dow, weekdays = draw(weekday_fields())
    return Expr(f"{minute} {hour} * * {dow}", minutes, hours, weekdays, wildcard=False)


@st.composite
def wildcard_exprs(draw: st.DrawFn) -> Expr:
    shape = draw(st.sampled_from(["step-minute", "star-hour", "both"]))
    if shape == "star-hour":
        minute, minutes = draw(fixed_fields(59, _HOT_MINUTES) | step_fields(59, star=False))
    else:
        minute, minutes = draw(step_fields(59, star=True))
    if shape == "step-minute":
        hour, hours = draw(fixed_fields(23, _HOT_HOURS))
    else:
        every_hour = st.just(("*", frozenset(range(24))))
        hour, hours = draw(every_hour | step_fields(23, star=True))
    dow, weekdays = draw(weekday_fields())
    return Expr(f"{minute} {hour} * * {dow}", minutes, hours, weekdays, wildcard=True)


@st.composite
def starts(draw: st.DrawFn, tz: str) -> datetime:
    """An instant in 2020-2035, usually within a day and a half of a DST transition."""
    year = draw(st.integers(2020, 2035))
    near = transitions(tz, year)
    near_a_transition = draw(st.integers(0, 4)) > 0
    if near and near_a_transition:
        base = draw(st.sampled_from(near))
        offset = timedelta(minutes=draw(st.integers(-36 * 60, 12 * 60)))
    else:
        base = datetime(year, 1, 1, tzinfo=UTC)
        offset = timedelta(minutes=draw(st.integers(0, 365 * 24 * 60)))
    jitter = timedelta(seconds=draw(st.sampled_from([0, 0, 0, 1, 30, 59])))
    micro = timedelta(microseconds=draw(st.sampled_from([0, 0, 1, 999_999])))
    return base + offset + jitter + micro


@st.composite
def cases(draw: st.DrawFn, exprs: st.SearchStrategy[Expr]) -> tuple[Expr, str, datetime]:
    tz = draw(st.sampled_from(ZONES))
    return draw(exprs), tz, draw(starts(tz))


# --- references -----------------------------------------------------------------------------------


def minute_walk(start: datetime, end: datetime) -> list[datetime]:
    """Whole UTC minutes in ``[start, end]``."""
    t = start.replace(second=0, microsecond=0)
    if t < start:
        t += MINUTE
    out = []
    while t <= end:
        out.append(t)
        t += MINUTE
    return out


def real_time_reference(expr: Expr, zone: ZoneInfo, after: datetime, end: datetime) -> list:
    return [t for t in minute_walk(after, end) if t > after and expr.matches(local(t, zone))]


def fixed_time_reference(expr: Expr, zone: ZoneInfo, after: datetime, end: datetime) -> list:
    walk = minute_walk(after - timedelta(days=1), end + timedelta(days=1))
    # running maximum of the local wall clock: monotone, so "first instant whose wall clock
    # reads >= w" is a bisection
    high: list[datetime] = []
    for t in walk:
        wall = local(t, zone)
        high.append(wall if not high or wall > high[-1] else high[-1])
    first_day = local(after, zone).date() - timedelta(days=1)
    last_day = local(end, zone).date() + timedelta(days=1)
    expected: set[datetime] = set()
    day = first_day
    while day <= last_day:
        if expr.matches_day(day):
            for h in expr.hours:
                for m in expr.minutes:
                    wall = datetime(day.year, day.month, day.day, h, m)
                    i = bisect.bisect_left(high, wall)
                    if i < len(walk) and after < walk[i] <= end:
                        expected.add(walk[i])
        day += timedelta(days=1)
    return sorted(expected)


def occurrences_until(cron: CronExpression, after: datetime, end: datetime) -> list[datetime]:
    out = []
    for occ in cron.iter_after(after):
        if occ.instant > end:
            break
        out.append(occ.instant)
    return out


# --- properties -----------------------------------------------------------------------------------

WINDOW = timedelta(days=3)


@PROFILE
@given(cases(wildcard_exprs()))
def test_wildcard_follows_real_time(case: tuple[Expr, str, datetime]) -> None:
    """(b) a wildcard job fires exactly when the local clock shows a matching time."""
    expr, tz, after = case
    cron = CronExpression.parse(expr.text, tz)
    assert cron.wildcard
    end = after + WINDOW
    assert occurrences_until(cron, after, end) == real_time_reference(expr, cron.zone, after, end)


@PROFILE
@given(cases(fixed_exprs()))
def test_fixed_time_fires_each_wall_time_once(case: tuple[Expr, str, datetime]) -> None:
    """(c) one fire per matching wall time per day (gap merges aside), never a repeat."""
    expr, tz, after = case
    cron = CronExpression.parse(expr.text, tz)
    assert not cron.wildcard
    end = after + WINDOW
    got = occurrences_until(cron, after, end)
    assert got == fixed_time_reference(expr, cron.zone, after, end)
    walls = [local(t, cron.zone) for t in got]
    assert len(set(walls)) == len(walls)
    # every fire shows a matching wall time, except those moved out of a gap
    for occ in islice(cron.iter_after(after), 50):
        wall = occ.local.replace(tzinfo=None, fold=0)
        assert expr.matches(wall) or (occ.dst_note or "").startswith("moved from")


@PROFILE
@given(cases(wildcard_exprs() | fixed_exprs()), st.integers(1, 40))
def test_next_after_agrees_with_iteration(case: tuple[Expr, str, datetime], n: int) -> None:
    """(d) next_after(x) is the first of iter_after(x); chaining next_after walks the same
    list; (a) every result is strictly increasing and after the start."""
    expr, tz, after = case
    cron = CronExpression.parse(expr.text, tz)
    listed = [occ.instant for occ in islice(cron.iter_after(after), n)]
    chained: list[datetime] = []
    x = after
    for _ in range(n):
        nxt = cron.next_after(x)
        if nxt is None:
            break
        chained.append(nxt)
        x = nxt
    assert chained == listed
    assert all(t.tzinfo is UTC for t in listed)
    assert all(a < b for a, b in zip([after, *listed], listed, strict=False))
    # restarting from any intermediate point continues the same sequence
    for k in range(min(len(listed) - 1, 5)):
        assert cron.next_after(listed[k]) == listed[k + 1]
        assert cron.next_after(listed[k] - timedelta(microseconds=1)) == listed[k]


@settings(PROFILE, max_examples=min(PROFILE.max_examples, 12))
@given(cases(wildcard_exprs() | fixed_exprs()))
def test_strictly_increasing_over_a_year(case: tuple[Expr, str, datetime]) -> None:
    """(a) over a whole year (capped at 3000 fires): strictly increasing, all after start."""
    expr, tz, after = case
    cron = CronExpression.parse(expr.text, tz)
    end = after + timedelta(days=366)
    previous = after
    for occ in islice(cron.iter_after(after), 3000):
        if occ.instant > end:
            break
        assert occ.instant > previous
        # the same instant in the local zone (compared in UTC: PEP 495 makes an aware
        # datetime in a fold unequal to every datetime of another zone)
        assert occ.local.astimezone(UTC) == occ.instant
        assert occ.local.tzinfo is cron.zone
        previous = occ.instant


# --- whole years, deterministic -------------------------------------------------------------------


def test_whole_years_fixed_time_is_daily_once() -> None:
    """Every local day of 2020-2027 gets exactly one 01:30 / 02:30 fire, in every zone."""
    for tz in ZONES:
        zone = ZoneInfo(tz)
        for expr in ("30 1 * * *", "30 2 * * *"):
            cron = CronExpression.parse(expr, tz)
            start = datetime(2020, 1, 1, tzinfo=zone).astimezone(UTC)
            end = datetime(2028, 1, 1, tzinfo=zone).astimezone(UTC)
            days = [o.local.date() for o in islice(cron.iter_after(start), 3000) if o.instant < end]
            expected = (date(2028, 1, 1) - date(2020, 1, 1)).days
            assert len(days) == len(set(days)) == expected, (tz, expr)


def test_whole_year_wildcard_matches_brute_force() -> None:
    """A whole year of quarter-hour wildcard fires equals a brute-force walk of real time
    (15-minute steps suffice: every fire and every transition is on a quarter hour)."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = datetime(2025, 1, 1, tzinfo=UTC)
    steps = int((end - start) / timedelta(minutes=15))
    instants = [start + timedelta(minutes=15 * i) for i in range(1, steps)]
    for tz in ZONES:
        zone = ZoneInfo(tz)
        walls = [(t, t.astimezone(zone)) for t in instants]
        for text, minutes, hours in (
            ("30 * * * *", {30}, set(range(24))),
            ("*/15 0-3 * * *", {0, 15, 30, 45}, {0, 1, 2, 3}),
        ):
            cron = CronExpression.parse(text, tz)
            expected = [t for t, w in walls if w.minute in minutes and w.hour in hours]
            got = [o.instant for o in islice(cron.iter_after(start), 9000) if o.instant < end]
            assert got == expected, (tz, text)
