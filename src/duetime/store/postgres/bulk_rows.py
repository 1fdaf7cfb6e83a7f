"""The COPY text lines of a bulk insert into ``jobs`` (see :mod:`copy_text`).

A line is a job's own columns (:data:`OWN_COLUMNS`, encoded per job) followed by its shape's
shared columns (everything else :func:`~duetime.store._values.job_values` gives, encoded once
per shape) and the row's status and creation instants.
"""

from __future__ import annotations

from datetime import datetime

from duetime.store._values import job_values
from duetime.store.base import BulkJob, JobUpsertParams
from duetime.store.postgres import copy_text

OWN_COLUMNS = (
    "id", "name", "payload", "metadata", "partition_key",
    "schedule_kind", "cron", "tz", "at_instant", "every_us", "anchor", "next_fire_at",
    "every_count", "every_unit",
)  # fmt: skip
TAIL_COLUMNS = ("status", "created_at", "updated_at")


def _shared_values(shape: JobUpsertParams) -> dict[str, object]:
    values = job_values(shape, shape.job_id, shape.schedule, shape.next_fire_at)
    return {name: value for name, value in values.items() if name not in OWN_COLUMNS}


def columns(shape: JobUpsertParams) -> list[str]:
    """The COPY column list, in the order :class:`Lines` writes them."""
    return [*OWN_COLUMNS, *_shared_values(shape), *TAIL_COLUMNS]


class Lines:
    """Builds the lines of one COPY. The shared text of each shape, and the schedule columns of
    each (schedule, first instant) pair, are encoded on first use: bulk registration hands
    many jobs the same objects. Caches are keyed by ``id()``; the jobs being written keep
    those objects alive, so one ``Lines`` serves one sequence of jobs."""

    def __init__(self, now: datetime) -> None:
        instant = copy_text.instant(now)
        self._tail = f"\tactive\t{instant}\t{instant}\n"
        self._shared: dict[int, str] = {}
        self._schedules: dict[tuple[int, int], str] = {}

    def line(self, job: BulkJob) -> str:
        shared = self._shared.get(id(job.shape))
        if shared is None:
            values = _shared_values(job.shape).values()
            shared = "\t".join(copy_text.field(v) for v in values) + self._tail
            self._shared[id(job.shape)] = shared
        key = (id(job.schedule), id(job.next_fire_at))
        timing = self._schedules.get(key)
        if timing is None:
            timing = self._schedules[key] = _timing_text(job)
        escapes = copy_text.ESCAPES
        # a uuid's 32 hex digits without hyphens are a valid uuid input, and cheaper than str()
        return (
            f"{job.job_id.hex}\t{job.name.translate(escapes)}\t{job.payload.translate(escapes)}"
            f"\t{job.metadata.translate(escapes)}\t{job.partition}\t{timing}\t{shared}"
        )


def _timing_text(job: BulkJob) -> str:
    """The fields from ``schedule_kind`` to ``every_unit``."""
    schedule = job.schedule
    calendar = schedule.every_calendar
    return "\t".join((
        schedule.kind.value,
        copy_text.NULL if schedule.cron is None else copy_text.text(schedule.cron),
        copy_text.text(schedule.tz),
        copy_text.instant(schedule.at),
        copy_text.field(schedule.every),
        copy_text.instant(schedule.anchor),
        copy_text.instant(job.next_fire_at),
        copy_text.field(None if calendar is None else calendar.count),
        copy_text.field(None if calendar is None else str(calendar.unit)),
    ))  # fmt: skip
