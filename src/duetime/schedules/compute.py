"""Fire instants of any :class:`~duetime._types.Schedule`: next fire, first fire, preview,
validation. Pure: no I/O, no clock (``now``/``after`` are always passed in).

All ``datetime`` arguments must be timezone-aware (any zone; ``ValueError`` otherwise, except
where a schedule's own field is naive, which is a ``ValidationError`` naming that field). All
instants returned are aware UTC.

Kinds:

- ``now`` / ``at``: one instant, ``schedule.at``.
- ``every``: ``anchor + k * every`` for k >= 0, in real (UTC) time — DST does not move them;
  in calendar units (``every_calendar``: days, weeks, months) the anchor's wall time in
  ``schedule.tz`` stepped by the calendar (:mod:`duetime.schedules.every`).
- ``cron``: :class:`~duetime.schedules.cron.CronExpression` in ``schedule.tz``.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from duetime._types import CalendarInterval, Occurrence, Schedule, ScheduleKind
from duetime.errors import ValidationError
from duetime.schedules.cron import CronExpression
from duetime.schedules.every import (
    calendar_after,
    calendar_at_or_after,
    calendar_preview,
    check_anchor,
    check_calendar,
)
from duetime.schedules.zones import load_zone, to_utc

__all__ = [
    "MAX_PREVIEW",
    "MIN_EVERY",
    "first_fire",
    "first_fire_after_change",
    "next_fire_after",
    "preview",
    "validate_schedule",
]

MAX_PREVIEW = 1000
"""Largest ``count`` :func:`preview` accepts."""
MIN_EVERY = timedelta(seconds=1)
"""Shortest interval of an ``every`` schedule."""


def _cron(schedule: Schedule) -> CronExpression:
    if not schedule.cron:
        raise ValidationError("cron", "a cron schedule needs a cron expression")
    return CronExpression.parse(schedule.cron, schedule.tz, schedule.hash_seed)


def _at(schedule: Schedule) -> datetime:
    if schedule.at is None:
        raise ValidationError("at", f"a {schedule.kind} schedule needs an instant")
    if schedule.at.tzinfo is None or schedule.at.utcoffset() is None:
        raise ValidationError("at", "needs a time zone offset")
    return schedule.at.astimezone(UTC)


def _every(schedule: Schedule) -> timedelta | CalendarInterval:
    if schedule.every_calendar is not None:
        if schedule.every is not None:
            raise ValidationError("every", "give a duration or calendar units, not both")
        return check_calendar(schedule.every_calendar)
    every = schedule.every
    if every is None:
        raise ValidationError("every", "an every schedule needs an interval")
    if every <= timedelta(0):
        raise ValidationError("every", f"must be positive, got {every.total_seconds():g} s")
    if every < MIN_EVERY:
        raise ValidationError("every", f"must be at least 1 second, got {every.total_seconds()} s")
    return every


def _anchor(schedule: Schedule) -> datetime | None:
    anchor = schedule.anchor
    if anchor is None:
        return None
    if anchor.tzinfo is None or anchor.utcoffset() is None:
        raise ValidationError("anchor", "needs a time zone offset")
    return anchor.astimezone(UTC)


def _every_at_or_after(
    schedule: Schedule, anchor: datetime, every: timedelta | CalendarInterval, bound: datetime
) -> datetime | None:
    """The first ``anchor + k*every`` (k >= 0) that is >= ``bound``; None past year 9999."""
    if isinstance(every, CalendarInterval):
        return calendar_at_or_after(anchor, every, load_zone(schedule.tz), bound)
    if bound <= anchor:
        return anchor
    k = -((anchor - bound) // every)  # ceil((bound - anchor) / every), exact integer arithmetic
    try:
        return anchor + k * every
    except OverflowError:
        return None


def _every_after(
    schedule: Schedule, anchor: datetime, every: timedelta | CalendarInterval, after: datetime
) -> datetime | None:
    """The first ``anchor + k*every`` (k >= 0) strictly after ``after``."""
    if isinstance(every, CalendarInterval):
        return calendar_after(anchor, every, load_zone(schedule.tz), after)
    if after < anchor:
        return anchor
    k = (after - anchor) // every + 1
    try:
        return anchor + k * every
    except OverflowError:
        return None


def next_fire_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire instant of ``schedule`` strictly after ``after``; None if there is none.

    - ``now``/``at``: ``schedule.at`` if it is after ``after``, else None.
    - ``every``: the first occurrence (``anchor + k*every``, k >= 0, or its calendar
      counterpart) > ``after``; the anchor must be set
      (``ValidationError("anchor")`` otherwise).
    - ``cron``: :meth:`CronExpression.next_after`.

    Raises ``ValidationError`` for an invalid schedule (see :func:`validate_schedule`).
    """
    after = to_utc(after, "after")
    kind = schedule.kind
    if kind is ScheduleKind.CRON:
        return _cron(schedule).next_after(after)
    if kind is ScheduleKind.EVERY:
        every = _every(schedule)
        anchor = _anchor(schedule)
        if anchor is None:
            raise ValidationError("anchor", "an every schedule needs an anchor instant")
        return _every_after(schedule, anchor, every, after)
    if kind in (ScheduleKind.NOW, ScheduleKind.AT):
        at = _at(schedule)
        return at if at > after else None
    raise ValidationError("kind", f"unknown schedule kind {kind!r}")  # pragma: no cover


def first_fire(schedule: Schedule, now: datetime) -> datetime | None:
    """The first instant a job with ``schedule`` fires when registered at ``now``.

    - ``now``/``at``: ``schedule.at``, even if it is in the past (the run is then due at once).
    - ``every``: the first ``anchor + k*every`` (k >= 0) that is >= ``now``, so an anchor in the
      future is the first fire, and an anchor equal to ``now`` fires at once; no anchor means
      ``now`` (the registration instant is the default anchor).
    - ``cron``: the first occurrence strictly after ``now``; None if it never fires.
    """
    now = to_utc(now, "now")
    kind = schedule.kind
    if kind is ScheduleKind.EVERY:
        every = _every(schedule)
        anchor = _anchor(schedule)
        return now if anchor is None else _every_at_or_after(schedule, anchor, every, now)
    if kind in (ScheduleKind.NOW, ScheduleKind.AT):
        return _at(schedule)
    return next_fire_after(schedule, now)  # cron: its first fire is its next one


def preview(schedule: Schedule, after: datetime, count: int) -> list[Occurrence]:
    """The next ``count`` fire instants strictly after ``after`` (fewer if the schedule ends).

    Each :class:`Occurrence` carries the local time in ``schedule.tz`` and, for cron schedules
    and calendar ``every`` ones, a ``dst_note`` on occurrences a DST change moved or doubled.
    ``count`` must be 1 to :data:`MAX_PREVIEW` (``ValidationError("count")`` otherwise).
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PREVIEW:
        raise ValidationError("count", f"must be a whole number from 1 to {MAX_PREVIEW}")
    after = to_utc(after, "after")
    zone = load_zone(schedule.tz)
    if schedule.kind is ScheduleKind.CRON:
        return list(itertools.islice(_cron(schedule).iter_after(after), count))
    instants: list[datetime] = []
    if schedule.kind is ScheduleKind.EVERY:
        every = _every(schedule)
        if isinstance(every, CalendarInterval):
            anchor = _anchor(schedule)
            if anchor is None:
                raise ValidationError("anchor", "an every schedule needs an anchor instant")
            return calendar_preview(anchor, every, zone, after, count)
        nxt = next_fire_after(schedule, after)
        while nxt is not None and len(instants) < count:
            instants.append(nxt)
            try:
                nxt = nxt + every
            except OverflowError:
                nxt = None
    else:
        nxt = next_fire_after(schedule, after)
        if nxt is not None:
            instants.append(nxt)
    return [Occurrence(i, i.astimezone(zone)) for i in instants]


def validate_schedule(schedule: Schedule, now: datetime) -> None:
    """Raise ``ValidationError`` (naming the field) unless ``schedule`` is usable at ``now``.

    - ``tz``: unknown time zone (checked for every kind: local times are shown in it);
    - ``cron``: missing, invalid (the message names the cron field), or never fires (no
      occurrence after ``now``, e.g. ``0 0 30 2 *``);
    - ``every``: missing, not positive, or under 1 second (a calendar interval: a whole count
      of 1 to 1200 days, weeks or months); ``anchor``: naive, or (calendar units) its wall
      time in ``tz`` before year 1;
    - ``at``: missing (``now``/``at`` kinds) or naive (``"needs a time zone offset"``).

    An ``at`` in the past is valid (it fires at once), as is an ``every`` without an anchor
    (registration sets it).
    """
    now = to_utc(now, "now")
    load_zone(schedule.tz)
    kind = schedule.kind
    if kind is ScheduleKind.CRON:
        expression = _cron(schedule)
        if expression.next_after(now) is None:
            reason = expression.never_fires_reason()
            raise ValidationError(
                "cron", f"schedule never fires ({expression.expression!r}: {reason})"
            )
    elif kind is ScheduleKind.EVERY:
        every = _every(schedule)
        anchor = _anchor(schedule)
        if isinstance(every, CalendarInterval) and anchor is not None:
            check_anchor(anchor, load_zone(schedule.tz))
    elif kind in (ScheduleKind.NOW, ScheduleKind.AT):
        _at(schedule)
    else:  # pragma: no cover - ScheduleKind is closed
        raise ValidationError("kind", f"unknown schedule kind {kind!r}")


def first_fire_after_change(
    schedule: Schedule, now: datetime, last_fired: datetime | None = None
) -> datetime | None:
    """The first instant of a job's schedule once it is *changed* at ``now`` (registration
    computes the anchor: the stored one kept for an ``every`` without a new anchor).

    A change takes effect from the next occurrence and never fires at the instant of the
    change, nor catches up: for ``cron`` and ``every`` it is the first occurrence of the new
    schedule strictly after ``now`` and after ``last_fired`` (the latest occurrence of the
    job that already fired, when known: a start written ahead of its instant counts), e.g.
    every 60 s changed to every 120 s 3.5 s after a run at ``anchor + 60n`` first fires at
    ``anchor + 120k``, the first such instant after the change. ``now``/``at``: as
    :func:`first_fire` (a one-shot fires at its instant, at once if it is past).
    """
    now = to_utc(now, "now")
    if schedule.one_shot:
        return first_fire(schedule, now)
    bound = now if last_fired is None else max(now, to_utc(last_fired, "last_fired"))
    if schedule.kind is ScheduleKind.EVERY and _anchor(schedule) is None:
        schedule = replace(schedule, anchor=now)
    return next_fire_after(schedule, bound)
