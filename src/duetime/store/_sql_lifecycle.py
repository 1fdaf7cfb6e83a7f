"""A job's lifecycle in the store (docs/decisions/0023-job-lifecycle.md), written once for both
dialects over the connection surface (``queries/lifecycle.sql``); mixed into
:class:`~duetime.store._sql.SQLStore`.

- Pause notes: ``job_set_status`` writes who, why and until when with the move, and records
  every move in ``job_events`` in the same transaction (:meth:`SQLLifecycle._job_moved`).
- Auto-resume and pause on failure are found here (``jobs_pause_due``, ``jobs_failing``) and
  applied by the leader's lifecycle pass through ``job_set_status``, guarded so a pause
  changed meanwhile is left alone.
- The tenant's cap on registered jobs is checked inside the registration's transaction, the
  capped tenant's row locked (:func:`jobs_cap_check`; a bulk batch: :func:`bulk_cap_check`).
- A zoned job's next instant is recomputed with a newer tzdata release in a transaction of its
  own, with its runs not yet due withdrawn (:meth:`SQLLifecycle.job_tz_recompute`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime import _json
from duetime._audit import note
from duetime._types import JSON, Job, JobEvent, JobStatus
from duetime.errors import JobCapReached
from duetime.store import _rows
from duetime.store._lifecycle_rows import job_event_from_row
from duetime.store._sql_surface import SQLSurface
from duetime.store._values import new_webhook_secret
from duetime.store.base import BulkJob, JobRef, JobSetStatusParams, JobTzRecomputeParams

__all__ = [
    "SQLLifecycle",
    "bulk_cap_check",
    "jobs_cap_check",
    "move_columns",
    "pause_expected",
]

_EVENT_OF_STATUS = {
    JobStatus.PAUSED: "paused",
    JobStatus.ACTIVE: "resumed",
    JobStatus.CANCELLED: "cancelled",
    JobStatus.COMPLETED: "completed",
}


def move_columns(params: JobSetStatusParams) -> dict[str, Any]:
    """What ``job_set_status`` writes beside the status: the pause's note (cleared by any
    other move) and, with a resume's new ``next_fire_at``, the tzdata release of it."""
    pause = params.pause if params.status is JobStatus.PAUSED else None
    return {
        "paused_by": None if pause is None else pause.by,
        "pause_note": None if pause is None else pause.note,
        "paused_until": None if pause is None else pause.until,
        "tzdata_version": params.tzdata_version,
    }


def pause_expected(current: Job, params: JobSetStatusParams) -> bool:
    """False when an auto-resume (``expect_until``) finds the pause changed since it read it."""
    if params.expect_until is None:
        return True
    return current.pause is not None and current.pause.until == params.expect_until


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _detail(params: JobSetStatusParams) -> dict[str, JSON]:
    pause = params.pause
    if params.status is not JobStatus.PAUSED or pause is None:
        return {}
    return {
        "by": pause.by,
        "note": pause.note,
        "until": _iso(pause.until),
    }


async def jobs_cap_check(store: SQLLifecycle, conn: Any, tenant: str, name: str) -> None:
    """Refuse a new job of a tenant at its ``max_jobs`` (cancelled jobs do not count; a name it
    already has is an update, never refused). The capped tenant's row stays locked until the
    caller's transaction ends (SQLite: BEGIN IMMEDIATE holds the database), so concurrent
    registrations count one after the other. Uncapped tenants: one read, no lock."""
    capped = await store._one(conn, "tenant_max_jobs_lock", tenant=tenant)
    if capped is None:
        return
    counts = await store._one(conn, "tenant_jobs_count", tenant=tenant, name=name)
    if not counts["taken"] and counts["registered"] >= capped["max_jobs"]:
        raise JobCapReached(tenant, int(capped["max_jobs"]))


async def bulk_cap_check(store: SQLLifecycle, conn: Any, jobs: Sequence[BulkJob]) -> None:
    """:func:`jobs_cap_check` for a bulk batch, inside its transaction: the batch's new names
    (those its tenant has not) must fit under the cap, or none is written."""
    by_tenant: dict[str, list[str]] = {}
    for job in jobs:
        by_tenant.setdefault(job.shape.tenant, []).append(job.name)
    for tenant, names in by_tenant.items():
        capped = await store._one(conn, "tenant_max_jobs_lock", tenant=tenant)
        if capped is None:
            continue
        unique = sorted(set(names))
        taken = await store._one(conn, "tenant_names_taken", tenant=tenant, names=unique)
        counts = await store._one(conn, "tenant_jobs_count", tenant=tenant, name="")
        if counts["registered"] + len(unique) - taken["taken"] > capped["max_jobs"]:
            raise JobCapReached(tenant, int(capped["max_jobs"]))


class SQLLifecycle(SQLSurface):
    """Pause notes, job history, auto-resume and pause-on-failure reads, declared jobs and the
    tenants' job caps."""

    if TYPE_CHECKING:  # SQLAudit's, beside this mixin in SQLStore (a stub here would hide it)

        async def _audit(self, conn: Any, now: datetime | None = None) -> None: ...

    async def _job_row(self, conn: Any, ref: JobRef, *, lock: bool = False) -> Any:
        raise NotImplementedError  # SQLStore's

    def _fixed_now(self, now: datetime | None) -> datetime | None:
        raise NotImplementedError  # the dialect's

    async def _event_insert(
        self,
        conn: Any,
        job_id: uuid.UUID,
        kind: str,
        actor: str,
        detail: dict[str, JSON],
        now: datetime,
    ) -> None:
        await self._exec(
            conn,
            "job_event_insert",
            job_id=job_id,
            kind=kind,
            actor=actor,
            detail=_json.dumps(detail),
            now=now,
        )

    async def _pause_note_again(
        self, conn: Any, current: Job, params: JobSetStatusParams, now: datetime
    ) -> Job:
        """A move to the status the job has already: pausing a paused job with another note
        replaces the note (recorded); anything else changes nothing — nor does a move of
        duetime's own (``event`` given: pause on failure, a sync's retirement), which never
        rewrites the note of a pause already in place."""
        pause = params.pause
        if (
            params.status is not JobStatus.PAUSED
            or current.status is not JobStatus.PAUSED
            or pause is None
            or pause == current.pause
            or params.expect_until is not None
            or params.event is not None
        ):
            return current
        row = await self._one(
            conn, "job_pause_note_set", id=current.id, now=now, **move_columns(params)
        )
        await self._event_insert(
            conn,
            current.id,
            "pause_changed",
            params.actor or pause.by or "unknown",
            _detail(params),
            now,
        )
        old = current.pause
        before = {} if old is None else {"by": old.by, "note": old.note, "until": _iso(old.until)}
        note(change={"before": before, "after": _detail(params)})
        await self._audit(conn, now)
        return _rows.job_from_row(row, self.codec)

    async def _job_moved(
        self, conn: Any, current: Job, params: JobSetStatusParams, now: datetime
    ) -> None:
        """In ``job_set_status``'s transaction, after the move: the history entry, and a
        resumed job's dead-run streak restarted (pause on failure counts from the resume)."""
        actor = params.actor or (params.pause.by if params.pause else None) or "unknown"
        kind = params.event or _EVENT_OF_STATUS[params.status]
        await self._event_insert(conn, current.id, kind, actor, _detail(params), now)
        if params.status is JobStatus.ACTIVE:
            await self._exec(conn, "job_dead_count_restart", id=current.id, now=now)

    # --- history ------------------------------------------------------------------------

    async def job_events_list(
        self, ref: JobRef, *, limit: int = 50, before: int | None = None
    ) -> list[JobEvent]:
        async with self._read() as conn:
            row = await self._job_row(conn, ref)
            rows = await self._all(
                conn,
                "job_events_list",
                tenant=ref.tenant,
                job_id=self.codec.uuid(row["id"]),
                before=before,
                limit=limit,
            )
        return [job_event_from_row(r, self.codec) for r in rows]

    # --- the leader's lifecycle pass ----------------------------------------------------

    async def jobs_pause_due(self, now: datetime | None = None, limit: int = 100) -> list[Job]:
        rows = await self._read_all("jobs_pause_due", now=self._fixed_now(now), limit=limit)
        return [_rows.job_from_row(r, self.codec) for r in rows]

    async def jobs_failing(self, limit: int = 100) -> list[tuple[Job, int]]:
        rows = await self._read_all("jobs_failing", limit=limit)
        return [(_rows.job_from_row(r, self.codec), int(r["dead"])) for r in rows]

    async def jobs_paused_on_failure(self, limit: int = 1000) -> list[Job]:
        rows = await self._read_all("jobs_paused_on_failure", limit=limit)
        return [_rows.job_from_row(r, self.codec) for r in rows]

    async def job_pause_on_failure_set(
        self, ref: JobRef, after: int | None, now: datetime | None = None
    ) -> Job:
        async with self._tx() as conn:
            at = await self._now(conn, now)
            row = await self._job_row(conn, ref, lock=True)
            row = await self._one(
                conn,
                "job_pause_on_failure_set",
                tenant=ref.tenant,
                id=row["id"],
                after=after,
                now=at,
            )
            job = _rows.job_from_row(row, self.codec)
            note(subject_id=job.id, subject_name=job.name)
            await self._audit(conn, at)
            return job

    # --- tzdata upgrades (SPEC §5) -------------------------------------------------------

    async def jobs_tz_stale(
        self, version: str, *, after_id: uuid.UUID | None = None, limit: int = 500
    ) -> list[Job]:
        rows = await self._read_all(
            "jobs_tz_stale", version=version, after_id=after_id, limit=limit
        )
        return [_rows.job_from_row(r, self.codec) for r in rows]

    async def job_tz_recompute(self, params: JobTzRecomputeParams) -> bool:
        """One transaction, the job locked: unless its release changed since it was read
        (another process recomputed it) or it is no longer active, its scheduled runs not
        yet due and never started are withdrawn (deleted; given back to ``max_runs``), its
        ``next_fire_at`` and release set, and a ``tzdata_recomputed`` event recorded.
        True when it did."""
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            row = await self._job_row(conn, JobRef(params.tenant, id=params.job_id), lock=True)
            job = _rows.job_from_row(row, self.codec)
            if job.status is not JobStatus.ACTIVE or job.tzdata_version != params.expect_version:
                return False
            withdrawn = await self._exec(conn, "runs_withdraw_pending", job_id=job.id, now=now)
            if withdrawn and job.max_runs is not None:
                await self._exec(conn, "jobs_uncount_runs", id=job.id, count=withdrawn)
            await self._one(
                conn,
                "job_tz_recompute",
                id=job.id,
                next_fire_at=params.next_fire_at,
                version=params.version,
                now=now,
            )
            detail: dict[str, JSON] = {
                "from": params.expect_version,
                "to": params.version,
                "next_fire_at_before": _iso(job.next_fire_at),
                "next_fire_at": _iso(params.next_fire_at),
                "runs_withdrawn": withdrawn,
            }
            await self._event_insert(conn, job.id, "tzdata_recomputed", "duetime", detail, now)
            return True

    # --- declared jobs (app.sync) ---------------------------------------------------------

    async def jobs_declared(self, tenant: str, source: str) -> list[Job]:
        rows = await self._read_all("jobs_declared", tenant=tenant, source=source)
        return [_rows.job_from_row(r, self.codec) for r in rows]

    async def jobs_declare(self, tenant: str, source: str, names: Sequence[str]) -> int:
        if not names:
            return 0
        async with self._tx() as conn:
            count = await self._exec(
                conn, "jobs_declare", tenant=tenant, source=source, names=list(names)
            )
            await self._audit(conn)
            return count

    # --- tenants' job caps --------------------------------------------------------------

    async def _tenant_max_jobs_set(self, tenant: str, max_jobs: int, now: datetime | None) -> None:
        await self._write_exec(
            "tenant_max_jobs_set",
            tenant=tenant,
            secret=new_webhook_secret(),
            max_jobs=max_jobs,
            now=self._fixed_now(now),
        )
