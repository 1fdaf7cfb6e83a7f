"""The ``job_paused_on_failure`` alert (decision 0023): one incident per job paused by pause
on failure, open while it stays paused, resolved when it is resumed (or deleted). Its facts
are the store's ``jobs_paused_on_failure``; :func:`paused_conditions` is pure."""

from __future__ import annotations

from collections.abc import Sequence

from duetime._monitoring import AlertCondition, AlertKind
from duetime._types import Job

__all__ = ["RESOLUTION", "paused_conditions"]

RESOLUTION = "the job was resumed (or deleted)"


def paused_conditions(jobs: Sequence[Job]) -> list[AlertCondition]:
    return [
        AlertCondition(
            AlertKind.JOB_PAUSED_ON_FAILURE,
            str(job.id),
            f"job {job.name!r} (tenant {job.tenant}) paused itself: "
            f"{job.pause.note if job.pause and job.pause.note else 'consecutive dead runs'}",
            tenant=job.tenant,
            job_id=job.id,
            details={"job": job.name, "pause_after_dead": job.pause_after_dead},
        )
        for job in jobs
    ]
