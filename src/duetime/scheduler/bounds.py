"""A recurring job's bounds — ``start_at``, ``end_at``, ``max_runs`` — as time math: pure, no
I/O. The planner, registration, resume and the previews all ask here, so they agree.

- No occurrence before ``start_at`` or after ``end_at`` fires (both inclusive bounds).
- At most ``max_runs`` scheduled runs are created (``Job.runs_created`` counts them; manual
  triggers do not count).
- A job with no occurrence left within its bounds is *exhausted*: it becomes ``completed``
  (docs/decisions/0019-schedule-bounds.md).

One-shot jobs have no bounds (registration refuses them): every function here leaves a
one-shot's instants alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime._types import Job, Occurrence, Schedule, ScheduleKind
from duetime.errors import ValidationError
from duetime.schedules import first_fire, next_fire_after, preview

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Bounds:
    """When a recurring schedule may fire, and how many more runs it may create."""

    start_at: datetime | None = None
    end_at: datetime | None = None
    runs_left: int | None = None
    """None: no ``max_runs``."""

    @classmethod
    def of(cls, job: Job) -> Bounds:
        return cls(job.start_at, job.end_at, job.runs_left)

    @property
    def unbounded(self) -> bool:
        return self.start_at is None and self.end_at is None and self.runs_left is None

    def next_occurrence(self, schedule: Schedule, candidate: datetime | None) -> datetime | None:
        """``candidate`` (an occurrence of ``schedule``, or None) moved up to the first
        occurrence at or after ``start_at``; None when that is past ``end_at`` or no run is
        left. One-shots: ``candidate``."""
        if schedule.one_shot or candidate is None:
            return candidate
        if self.runs_left is not None and self.runs_left <= 0:
            return None
        if self.start_at is not None and candidate < self.start_at:
            candidate = next_fire_after(schedule, self.start_at - _TICK)
        if candidate is not None and self.end_at is not None and candidate > self.end_at:
            return None
        return candidate

    def preview(
        self,
        schedule: Schedule,
        after: datetime,
        count: int,
        *,
        created_before: datetime | None = None,
    ) -> list[Occurrence]:
        """:func:`duetime.schedules.preview` within the bounds: the next ``count`` instants
        strictly after ``after`` and at or after ``start_at``, none past ``end_at``, and at
        most ``runs_left`` of them beyond the runs already created — those before
        ``created_before`` (a job's ``next_fire_at``: runs written ahead of it exist)."""
        if schedule.one_shot:
            return preview(schedule, after, count)
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - _TICK
        end = self.end_at
        shown: list[Occurrence] = []
        new = 0
        for o in preview(schedule, after, count):
            if end is not None and o.instant > end:
                break
            if created_before is None or o.instant >= created_before:
                if self.runs_left is not None and new >= self.runs_left:
                    break
                new += 1
            shown.append(o)
        return shown


def is_bounded(job: Job) -> bool:
    """Whether ``job`` is recurring with any bound set."""
    return not job.schedule.one_shot and not Bounds.of(job).unbounded


MAX_RUNS_LIMIT = 2**31 - 1


def _instant(value: object, field_name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field_name, "must be a datetime with a time zone (or None)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(field_name, "is out of range") from None


def validated_bounds(start_at: object, end_at: object, max_runs: object) -> dict[str, Any]:
    """The bounds as a job stores them (instants in UTC), or ValidationError naming the field:
    instants must carry a time zone, ``end_at`` must be after ``start_at``, ``max_runs`` a
    whole number of at least 1."""
    start, end = _instant(start_at, "start_at"), _instant(end_at, "end_at")
    if start is not None and end is not None and end <= start:
        raise ValidationError(
            "end_at",
            f"must be after start_at ({end.isoformat()} is not after {start.isoformat()})",
        )
    if max_runs is not None and (
        isinstance(max_runs, bool)
        or not isinstance(max_runs, int)
        or not 1 <= max_runs <= MAX_RUNS_LIMIT
    ):
        raise ValidationError(
            "max_runs", f"must be a whole number of at least 1 (or None), got {max_runs!r}"
        )
    return {"start_at": start, "end_at": end, "max_runs": max_runs}


def bounded_first(
    requested: Schedule,
    resolved: Schedule,
    first: datetime | None,
    bounds: dict[str, Any],
    now: datetime,
) -> tuple[Schedule, datetime | None]:
    """A new job's schedule and first instant within its (validated) ``bounds``. A one-shot
    with a bound is a ValidationError naming it; an ``every`` declared without an anchor
    counts from ``start_at`` when given (``every=3600, start_at=09:00`` fires on the hour).
    The first instant is None when no occurrence falls within the bounds."""
    if resolved.one_shot:
        for name in ("start_at", "end_at", "max_runs"):
            if bounds.get(name) is not None:
                raise ValidationError(
                    name,
                    "only a recurring schedule (cron, every) has bounds; a one-shot fires "
                    "once, at its instant (leave it out, or clear it with None)",
                )
        return resolved, first
    start = bounds.get("start_at")
    if resolved.kind is ScheduleKind.EVERY and requested.anchor is None and start is not None:
        resolved = replace(resolved, anchor=start)
        first = first_fire(resolved, now)
    limits = Bounds(start, bounds.get("end_at"), bounds.get("max_runs"))
    return resolved, limits.next_occurrence(resolved, first)
