"""Turning database rows into the value types of ``duetime._types``, for every dialect.

A dialect supplies a :class:`Codec` that decodes its own representation of instants, ids and
JSON; the mapping from columns to fields lives here once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from duetime import _json
from duetime._types import (
    ApiKey,
    ApiRole,
    Attempt,
    AttemptOutcome,
    DeliveryMode,
    Job,
    JobStatus,
    Leadership,
    MisfirePolicy,
    NodeInfo,
    OverlapPolicy,
    RetryPolicy,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
    WorkerInfo,
)
from duetime.store.base import ClaimedRun, PlannedSkip

Row = Mapping[str, Any]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Codec(Protocol):
    def instant(self, value: Any) -> datetime | None: ...
    def uuid(self, value: Any) -> uuid.UUID: ...
    def json(self, value: Any) -> Any: ...


class SQLiteCodec:
    """Instants are integer microseconds since the epoch; ids and JSON are text."""

    @staticmethod
    def instant(value: Any) -> datetime | None:
        return None if value is None else EPOCH + timedelta(microseconds=value)

    @staticmethod
    def uuid(value: Any) -> uuid.UUID:
        return uuid.UUID(value)

    @staticmethod
    def json(value: Any) -> Any:
        return _json.loads(value)


class NativeCodec:
    """PostgreSQL: the driver already returns datetimes, UUIDs and decoded JSON."""

    @staticmethod
    def instant(value: Any) -> datetime | None:
        return None if value is None else value.astimezone(UTC)

    @staticmethod
    def uuid(value: Any) -> uuid.UUID:
        return value

    @staticmethod
    def json(value: Any) -> Any:
        return value


def to_micros(at: datetime) -> int:
    delta = at - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _required(c: Codec, value: Any) -> datetime:
    at = c.instant(value)
    assert at is not None
    return at


def schedule_from_row(row: Row, c: Codec) -> Schedule:
    every = row["every_us"]
    return Schedule(
        kind=ScheduleKind(row["schedule_kind"]),
        cron=row["cron"],
        tz=row["tz"],
        at=c.instant(row["at_instant"]),
        every=None if every is None else timedelta(microseconds=every),
        anchor=c.instant(row["anchor"]),
    )


def _target(row: Row, c: Codec) -> Any:
    """The ``target`` column (JSON, NULL for Python tasks)."""
    value = row["target"]
    return None if value is None else c.json(value)


def job_from_row(row: Row, c: Codec) -> Job:
    return Job(
        id=c.uuid(row["id"]),
        tenant=row["tenant"],
        name=row["name"],
        task=row["task"],
        payload=c.json(row["payload"]),
        schedule=schedule_from_row(row, c),
        status=JobStatus(row["status"]),
        priority=row["priority"],
        retry=RetryPolicy(
            max_attempts=row["max_attempts"],
            backoff_base=row["backoff_base"],
            backoff_factor=row["backoff_factor"],
            backoff_cap=row["backoff_cap"],
        ),
        timeout=row["timeout_s"],
        misfire_policy=MisfirePolicy(row["misfire_policy"]),
        misfire_grace=row["misfire_grace_s"],
        overlap_policy=OverlapPolicy(row["overlap_policy"]),
        delivery=DeliveryMode(row["delivery"]),
        queue=row["queue"],
        tags=tuple(c.json(row["tags"])),
        metadata=c.json(row["metadata"]),
        partition=row["partition_key"],
        next_fire_at=c.instant(row["next_fire_at"]),
        created_at=_required(c, row["created_at"]),
        updated_at=_required(c, row["updated_at"]),
        target=_target(row, c),
    )


def run_from_row(row: Row, c: Codec) -> Run:
    return Run(
        id=c.uuid(row["id"]),
        job_id=c.uuid(row["job_id"]),
        tenant=row["tenant"],
        job_name=row["job_name"],
        task=row["task"],
        queue=row["queue"],
        payload=c.json(row["payload"]),
        scheduled_for=_required(c, row["scheduled_for"]),
        available_at=_required(c, row["available_at"]),
        state=RunState(row["state"]),
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        token=row["token"],
        lease_owner=row["lease_owner"],
        lease_expires_at=c.instant(row["lease_expires_at"]),
        claimed_at=c.instant(row["claimed_at"]),
        started_at=c.instant(row["started_at"]),
        finished_at=c.instant(row["finished_at"]),
        trigger=RunTrigger(row["trigger"]),
        idempotency_key=row["idempotency_key"],
        reason=row["reason"],
        last_error_class=row["last_error_class"],
        last_error_message=row["last_error_message"],
        replays=row["replays"],
        created_at=_required(c, row["created_at"]),
        target=_target(row, c),
    )


def claimed_from_row(row: Row, c: Codec) -> ClaimedRun:
    return ClaimedRun(
        run=run_from_row(row, c),
        timeout=row["timeout_s"],
        retry=RetryPolicy(
            max_attempts=row["max_attempts"],
            backoff_base=row["backoff_base"],
            backoff_factor=row["backoff_factor"],
            backoff_cap=row["backoff_cap"],
        ),
        delivery=DeliveryMode(row["delivery"]),
        one_shot=bool(row["one_shot"]),
    )


def attempt_from_row(row: Row, c: Codec) -> Attempt:
    return Attempt(
        run_id=c.uuid(row["run_id"]),
        job_id=c.uuid(row["job_id"]),
        tenant=row["tenant"],
        number=row["number"],
        token=row["token"],
        worker_id=row["worker_id"],
        claimed_at=_required(c, row["claimed_at"]),
        started_at=c.instant(row["started_at"]),
        finished_at=_required(c, row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]),
        error_class=row["error_class"],
        error_message=row["error_message"],
    )


def skip_from_row(row: Row, c: Codec) -> PlannedSkip:
    return PlannedSkip(
        first=_required(c, row["first_at"]),
        last=_required(c, row["last_at"]),
        count=row["count"],
        reason=row["reason"],
    )


def worker_from_row(row: Row, c: Codec) -> WorkerInfo:
    return WorkerInfo(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        tasks=tuple(c.json(row["tasks"])),
        queues=tuple(c.json(row["queues"])),
        started_at=_required(c, row["started_at"]),
        heartbeat_at=_required(c, row["heartbeat_at"]),
    )


def node_from_row(row: Row, c: Codec) -> NodeInfo:
    return NodeInfo(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        roles=tuple(c.json(row["roles"])),
        partitions=row["partitions"],
        started_at=_required(c, row["started_at"]),
        heartbeat_at=_required(c, row["heartbeat_at"]),
    )


def leadership_from_row(row: Row, c: Codec) -> Leadership:
    return Leadership(
        node_id=row["node_id"],
        term=row["term"],
        elected_at=_required(c, row["elected_at"]),
        expires_at=_required(c, row["expires_at"]),
    )


def api_key_from_row(row: Row, c: Codec) -> ApiKey:
    return ApiKey(
        id=c.uuid(row["id"]),
        tenant=row["tenant"],
        role=ApiRole(row["role"]),
        name=row["name"],
        prefix=row["prefix"],
        created_at=_required(c, row["created_at"]),
        revoked_at=c.instant(row["revoked_at"]),
        last_used_at=c.instant(row["last_used_at"]),
    )


def lease_lost_decision(run: Run, delivery: DeliveryMode) -> tuple[RunState, str | None]:
    """Where a run whose lease expired goes: retry, or dead when out of attempts or when it is
    at-most-once (it may have started, so it must not start again)."""
    if delivery is DeliveryMode.AT_MOST_ONCE and run.started_at is not None:
        return RunState.DEAD, "lease_lost"
    if run.attempt >= run.max_attempts:
        return RunState.DEAD, "attempts_exhausted"
    return RunState.SCHEDULED, None
