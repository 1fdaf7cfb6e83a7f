"""Rows of the observability queries → the value types of ``duetime._monitoring``, once for every
dialect (each passes its :class:`~duetime.store._rows.Codec`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime._monitoring import (
    LAG_BOUNDS_MS,
    AlertKind,
    ClusterStats,
    DeadRunFact,
    Incident,
    QueueDepth,
    RunningFact,
    SlaFact,
    TaskDue,
    TenantCounts,
    Timeline,
    TimelineBucket,
)
from duetime._types import Leadership, NodeInfo, WorkerInfo
from duetime.store._rows import Codec, Row


def cluster_stats(
    c: Codec,
    *,
    now: datetime,
    due: Iterable[Row],
    running: Iterable[Row],
    dead: Iterable[Row],
    expired: Row | None,
    overdue: Row | None,
    workers: list[WorkerInfo],
    nodes: list[NodeInfo],
    leader: Leadership | None,
) -> ClusterStats:
    tenants: dict[str, dict[str, Any]] = {}

    def of(tenant: str) -> dict[str, Any]:
        return tenants.setdefault(tenant, {"due": 0, "oldest": None, "running": 0, "dead": 0})

    tasks_due = []
    for row in due:
        oldest = c.instant(row["oldest"])
        assert oldest is not None
        tasks_due.append(TaskDue(row["tenant"], row["task"], int(row["n"]), oldest))
        entry = of(row["tenant"])
        entry["due"] += int(row["n"])
        entry["oldest"] = oldest if entry["oldest"] is None else min(entry["oldest"], oldest)
    for row in running:
        of(row["tenant"])["running"] += int(row["n"])
    for row in dead:
        of(row["tenant"])["dead"] += int(row["n"])
    return ClusterStats(
        now=now,
        tenants=[
            TenantCounts(t, v["due"], v["oldest"], v["running"], v["dead"])
            for t, v in sorted(tenants.items())
        ],
        tasks_due=tasks_due,
        expired_leases=0 if expired is None else int(expired["n"]),
        overdue_jobs=0 if overdue is None else int(overdue["n"]),
        oldest_overdue_at=None if overdue is None else c.instant(overdue["oldest"]),
        workers=workers,
        nodes=nodes,
        leader=leader,
    )


def timeline(
    *,
    since: datetime,
    step: float,
    buckets: int,
    runs: Iterable[Row],
    attempts: Iterable[Row],
) -> Timeline:
    out = [TimelineBucket(start=since + timedelta(seconds=step * i)) for i in range(buckets)]
    for row in runs:
        index = int(row["bucket"])
        if not 0 <= index < buckets:
            continue
        bucket = out[index]
        n = int(row["n"])
        if row["state"] == "succeeded":
            bucket.succeeded += n
        else:
            bucket.dead += n
        lag = int(row["lag"])
        if 0 <= lag <= len(LAG_BOUNDS_MS):
            bucket.lag_histogram[lag] += n
    for row in attempts:
        index = int(row["bucket"])
        if not 0 <= index < buckets:
            continue
        if row["outcome"] == "lost":
            out[index].lost_attempts += int(row["n"])
        else:
            out[index].failed_attempts += int(row["n"])
    return Timeline(since=since, step=step, buckets=out)


def _optional_uuid(c: Codec, value: Any) -> uuid.UUID | None:
    return None if value is None else c.uuid(value)


def incident_from_row(row: Row, c: Codec) -> Incident:
    opened = c.instant(row["opened_at"])
    assert opened is not None
    return Incident(
        id=c.uuid(row["id"]),
        kind=AlertKind(row["kind"]),
        subject=row["subject"],
        summary=row["summary"],
        tenant=row["tenant"],
        job_id=_optional_uuid(c, row["job_id"]),
        run_id=_optional_uuid(c, row["run_id"]),
        details=c.json(row["details"]) or {},
        opened_at=opened,
        resolved_at=c.instant(row["resolved_at"]),
        resolution=row["resolution"],
        fired_sent_at=c.instant(row["fired_sent_at"]),
        resolved_sent_at=c.instant(row["resolved_sent_at"]),
        delivered=tuple(c.json(row["delivered"]) or ()),
        delivery_attempts=int(row["delivery_attempts"]),
        next_delivery_at=c.instant(row["next_delivery_at"]),
        last_delivery_error=row["last_delivery_error"],
    )


def dead_fact(row: Row, c: Codec) -> DeadRunFact:
    return DeadRunFact(
        run_id=c.uuid(row["id"]),
        tenant=row["tenant"],
        job_id=c.uuid(row["job_id"]),
        job_name=row["job_name"],
        task=row["task"],
        reason=row["reason"],
        error_class=row["last_error_class"],
        error_message=row["last_error_message"],
        finished_at=c.instant(row["finished_at"]),
        attempt=int(row["attempt"]),
    )


def sla_fact(row: Row, c: Codec) -> SlaFact:
    due = row["due"]
    return SlaFact(
        job_id=c.uuid(row["id"]),
        tenant=row["tenant"],
        job_name=row["name"],
        sla=float(row["sla_s"] or 0.0),
        due=None if due is None or due == -1 else c.instant(due),
        met=bool(row["met"]),
        active=row["status"] == "active" and row["sla_s"] is not None,
    )


def running_fact(row: Row, c: Codec) -> RunningFact:
    started = c.instant(row["started_at"])
    assert started is not None
    return RunningFact(
        run_id=c.uuid(row["id"]),
        tenant=row["tenant"],
        job_id=c.uuid(row["job_id"]),
        job_name=row["job_name"],
        task=row["task"],
        started_at=started,
        attempt=int(row["attempt"]),
        expected_duration=row["expected_duration_s"],
        lost_attempts=int(row["lost"]),
    )


def durations(rows: Sequence[Row], c: Codec) -> list[float]:
    out = []
    for row in rows:
        started, finished = c.instant(row["started_at"]), c.instant(row["finished_at"])
        if started is not None and finished is not None:
            out.append(max(0.0, (finished - started).total_seconds()))
    return out


def queue_depth(row: Row, c: Codec) -> QueueDepth:
    at = c.instant(row["at"])
    assert at is not None
    return QueueDepth(at, int(row["due"]), int(row["running"]), int(row["dead"]))
