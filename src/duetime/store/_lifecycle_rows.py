"""Row ↔ value types of a job's lifecycle (decision 0023): its pause note, pause on failure,
declared source and tzdata release, written once for both dialects. Rows without the columns
(a migration older than v23 cannot happen at run time, but explicit column lists can) read as
none set."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from duetime._types import JobEvent, JobPause

if TYPE_CHECKING:
    from duetime.store._rows import Codec, Row

__all__ = ["job_event_from_row", "lifecycle_fields"]


def lifecycle_fields(row: Row, c: Codec) -> dict[str, Any]:
    """The :class:`~duetime._types.Job` keyword arguments the v23 columns give."""
    keys = row.keys()  # a sqlite3.Row's `in` looks at its values
    if "paused_by" not in keys:
        return {}
    pause = None
    if row["status"] == "paused":
        pause = JobPause(
            by=row["paused_by"],
            note=row["pause_note"],
            until=c.instant(row["paused_until"]),
        )
    return {
        "pause": pause,
        "pause_after_dead": row["pause_after_dead"],
        "declared_source": row["declared_source"],
        "tzdata_version": row["tzdata_version"],
    }


def job_event_from_row(row: Row, c: Codec) -> JobEvent:
    at = c.instant(row["at"])
    assert at is not None  # NOT NULL column
    return JobEvent(
        id=int(row["id"]),
        job_id=c.uuid(row["job_id"]),
        at=at,
        kind=row["kind"],
        actor=row["actor"],
        detail=c.json(row["detail"]),
    )
