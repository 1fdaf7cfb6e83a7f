"""``every`` intervals: how they are written, and the instants of calendar ones. Pure.

An interval is either a fixed duration (a ``timedelta``; seconds, minutes and hours in words)
or a :class:`~duetime._types.CalendarInterval` (days, weeks and months in words). A fixed
duration steps real time from the anchor, so a DST change moves its wall time; a calendar one
steps the anchor's *wall time* in the schedule's zone, so "1 day" from 09:00 Europe/Paris is
09:00 local every day, 23 or 25 hours apart across DST changes (docs/decisions/0018).

Occurrence k of a calendar interval (k >= 0) is the anchor itself for k = 0, else the anchor's
local wall time moved k * count days (weeks: 7 days; months: calendar months, the anchor's day
of the month clamped to the month's length — Jan 31 → Feb 28 or 29 → Mar 31), mapped to an
instant by the fixed-time DST rule of cron schedules (decision 0002): a wall time in a gap →
the end of the gap, a repeated one → its first pass.
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from duetime._durations import interval_words, parse_duration
from duetime._types import CalendarInterval, CalendarUnit, Occurrence, Schedule, ScheduleKind
from duetime.errors import ValidationError
from duetime.schedules.zones import WallKind, dst_note, wall_to_instant

__all__ = [
    "CALENDAR_COUNT_MAX",
    "FIXED_WORD_SECONDS",
    "calendar_after",
    "calendar_at_or_after",
    "calendar_occurrence",
    "calendar_preview",
    "check_anchor",
    "check_calendar",
    "every_schedule",
    "parse_every",
]

FIXED_WORD_SECONDS: Final = {"second": 1, "minute": 60, "hour": 3600}
"""Seconds per fixed unit in words; days, weeks and months are calendar units."""
CALENDAR_COUNT_MAX: Final = 1200
"""Largest count of a calendar interval (1200 months: a century)."""

_DAYS: Final = {CalendarUnit.DAY: 1, CalendarUnit.WEEK: 7}
_HINT: Final = (
    "give seconds, a duration (90s, PT15M), or a count of seconds, minutes, hours, days, "
    "weeks or months such as '1 day' or '2 weeks'"
)


def parse_every(text: str, *, short_forms: bool = True) -> timedelta | CalendarInterval:
    """An interval written as text: ``"1 day"``, ``"2 weeks"``, ``"1 month"`` (calendar, a
    whole count from 1 to :data:`CALENDAR_COUNT_MAX`), ``"90 seconds"``, ``"5 minutes"``,
    ``"1.5 hours"`` (fixed), or a duration :func:`~duetime._durations.parse_duration` reads
    (``PT15M``; with ``short_forms`` also ``90s``, ``1h30m`` — ``1d`` and ``P1D`` stay fixed
    24-hour durations). Raises ``ValidationError("every")`` saying what is wrong."""
    if not isinstance(text, str):
        raise ValidationError("every", f"must be text, got {type(text).__name__}")
    words = interval_words(text)
    if words is None:
        duration = parse_duration(text, short_forms=short_forms)
        if duration is None:
            raise ValidationError("every", f"{text.strip()[:80]!r} is not an interval: {_HINT}")
        return duration
    number, unit = words
    if number <= 0:
        raise ValidationError("every", f"must be positive, got {text.strip()!r}")
    if unit in FIXED_WORD_SECONDS:
        try:
            return timedelta(seconds=number * FIXED_WORD_SECONDS[unit])
        except OverflowError:
            raise ValidationError("every", f"{text.strip()!r} is too long") from None
    if number != int(number) or number > CALENDAR_COUNT_MAX:
        raise ValidationError(
            "every",
            f"{unit}s are counted whole, from 1 to {CALENDAR_COUNT_MAX}, got {text.strip()!r}",
        )
    return CalendarInterval(int(number), CalendarUnit(unit))


def check_calendar(interval: object) -> CalendarInterval:
    """``interval`` if it is a valid :class:`CalendarInterval`, else ``ValidationError``
    saying what a calendar interval takes."""
    if not isinstance(interval, CalendarInterval):
        raise ValidationError("every", f"must be a CalendarInterval, got {type(interval).__name__}")
    if not isinstance(interval.unit, CalendarUnit):
        raise ValidationError(
            "every",
            f"a calendar interval's unit is day, week or month (CalendarUnit or its name), got "
            f"{str(interval.unit)[:40]!r}; seconds, minutes and hours are fixed durations: "
            "give a timedelta or text such as '90 seconds'",
        )
    count = interval.count
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or not 1 <= count <= CALENDAR_COUNT_MAX
    ):
        raise ValidationError(
            "every",
            f"a calendar interval needs a whole count from 1 to {CALENDAR_COUNT_MAX}, got "
            f"{str(count)[:40]!r}",
        )
    return interval


def check_anchor(anchor: datetime, zone: ZoneInfo) -> None:
    """``ValidationError("anchor")`` unless ``anchor``'s wall time in ``zone`` is within
    datetime's range at its low end (a calendar interval steps that wall time; one before
    year 1 has none). An anchor whose wall time is past year 9999 is kept: it fires once."""
    try:
        anchor.astimezone(zone)
    except OverflowError:
        if anchor.year == 1:  # else the high end
            raise ValidationError(
                "anchor",
                f"{anchor.isoformat()} is before year 1 in {zone.key}'s local time, where a "
                "calendar interval counts: give a later anchor",
            ) from None


def _wall(start: datetime, interval: CalendarInterval, k: int) -> datetime | None:
    """The naive wall time ``k`` intervals after ``start``; None past year 9999."""
    try:
        if interval.unit is CalendarUnit.MONTH:
            months = start.year * 12 + start.month - 1 + k * interval.count
            year, month = divmod(months, 12)
            if year > 9999:
                return None
            day = min(start.day, calendar.monthrange(year, month + 1)[1])
            return start.replace(year=year, month=month + 1, day=day)
        return start + timedelta(days=k * interval.count * _DAYS[interval.unit])
    except (OverflowError, ValueError):
        return None


def calendar_occurrence(
    anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, k: int
) -> tuple[datetime, WallKind] | None:
    """Occurrence ``k`` (see the module docstring) in UTC with the kind of its wall time;
    None past year 9999. ``ValidationError("anchor")`` for k >= 1 when the anchor's wall time
    is before year 1 (:func:`check_anchor`)."""
    if k == 0:
        return anchor, WallKind.NORMAL
    try:
        local = anchor.astimezone(zone)
    except OverflowError:  # at the low end an error (check_anchor raises), not "past 9999"
        check_anchor(anchor, zone)
        return None
    try:  # a wall time at the high end of datetime's range overflows a zone's offset
        wall = _wall(local.replace(tzinfo=None), interval, k)
        return None if wall is None else wall_to_instant(wall, zone)
    except OverflowError:
        return None


def _estimate(anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, bound: datetime) -> int:
    """A k whose occurrence is near ``bound`` (within a few steps)."""
    if interval.unit is CalendarUnit.MONTH:
        a, b = anchor.astimezone(zone), bound.astimezone(zone)
        months = (b.year - a.year) * 12 + b.month - a.month
        return max(0, months // interval.count)
    step = timedelta(days=interval.count * _DAYS[interval.unit])
    return max(0, (bound - anchor) // step)


def _first_index(
    anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, bound: datetime, strict: bool
) -> int | None:
    """The k of the first occurrence > ``bound`` (``strict``) or >= ``bound``; None past 9999.
    Occurrences only grow with k, and the estimate is off by a few steps at most (a zone's
    offsets differ by less than a day)."""

    def before(k: int) -> bool | None:  # is occurrence k before the wanted one?
        occurrence = calendar_occurrence(anchor, interval, zone, k)
        if occurrence is None:
            return None
        return occurrence[0] <= bound if strict else occurrence[0] < bound

    try:
        k = _estimate(anchor, interval, zone, bound)
    except OverflowError:  # a bound at the ends of datetime's range
        k = 0
    while k > 0 and before(k - 1) is False:
        k -= 1
    while (is_before := before(k)) is True:
        k += 1
    return None if is_before is None else k


def _first(
    anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, bound: datetime, strict: bool
) -> datetime | None:
    k = _first_index(anchor.astimezone(UTC), interval, zone, bound.astimezone(UTC), strict)
    found = None if k is None else calendar_occurrence(anchor.astimezone(UTC), interval, zone, k)
    return None if found is None else found[0]


def calendar_after(
    anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, after: datetime
) -> datetime | None:
    """The first occurrence strictly after ``after`` (aware, any zone); None past 9999."""
    return _first(anchor, interval, zone, after, strict=True)


def calendar_at_or_after(
    anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, bound: datetime
) -> datetime | None:
    """The first occurrence at or after ``bound``; None past year 9999."""
    return _first(anchor, interval, zone, bound, strict=False)


def calendar_preview(
    anchor: datetime, interval: CalendarInterval, zone: ZoneInfo, after: datetime, count: int
) -> list[Occurrence]:
    """The next ``count`` occurrences strictly after ``after`` (fewer past year 9999), each
    with a ``dst_note`` when its wall time fell in a DST gap (moved to the gap's end) or in a
    repeated hour (its first pass)."""
    anchor = anchor.astimezone(UTC)
    k = _first_index(anchor, interval, zone, after.astimezone(UTC), strict=True)
    out: list[Occurrence] = []
    while k is not None and len(out) < count:
        occurrence = calendar_occurrence(anchor, interval, zone, k)
        if occurrence is None:
            break
        instant, kind = occurrence
        if not out or instant > out[-1].instant:  # two walls on one instant: once
            note = dst_note(kind, [anchor.astimezone(zone)])
            out.append(Occurrence(instant, instant.astimezone(zone), note))
        k += 1
    return out


def every_schedule(
    every: timedelta | CalendarInterval, tz: str, anchor: datetime | None
) -> Schedule:
    """The ``every`` schedule of ``every`` (fixed or calendar) in ``tz`` from ``anchor``."""
    if isinstance(every, CalendarInterval):
        return Schedule(ScheduleKind.EVERY, tz=tz, every_calendar=every, anchor=anchor)
    return Schedule(ScheduleKind.EVERY, tz=tz, every=every, anchor=anchor)
