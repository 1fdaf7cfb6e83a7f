"""Schedules: pure time math (no I/O) — cron grammar, time zones and DST, fire instants.

- :func:`load_zone` — IANA zone by name (``ValidationError("tz")`` if unknown).
- :class:`CronExpression` — compiled cron expression in a zone, with cronie's DST rule.
- :func:`next_fire_after`, :func:`first_fire`, :func:`first_fire_after_change`,
  :func:`preview`, :func:`validate_schedule` — for every :class:`~duetime._types.ScheduleKind`.
- :func:`parse_every`, :func:`every_schedule` — ``every`` intervals as text (``"1 day"``),
  fixed or in calendar units.

Every instant returned is an aware UTC ``datetime``.
"""

from duetime.schedules.compute import (
    MAX_PREVIEW,
    MIN_EVERY,
    first_fire,
    first_fire_after_change,
    next_fire_after,
    preview,
    validate_schedule,
)
from duetime.schedules.cron import ALIASES, FIELD_NAMES, CronExpression, parse_cron
from duetime.schedules.every import every_schedule, parse_every
from duetime.schedules.jitter import jitter_offset
from duetime.schedules.zones import WallKind, load_zone, wall_instants, wall_to_instant

__all__ = [
    "ALIASES",
    "FIELD_NAMES",
    "MAX_PREVIEW",
    "MIN_EVERY",
    "CronExpression",
    "WallKind",
    "every_schedule",
    "first_fire",
    "first_fire_after_change",
    "jitter_offset",
    "load_zone",
    "next_fire_after",
    "parse_cron",
    "parse_every",
    "preview",
    "validate_schedule",
    "wall_instants",
    "wall_to_instant",
]
