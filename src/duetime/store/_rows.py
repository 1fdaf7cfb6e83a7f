"""Turning database rows into the value types of ``duetime._types``, for every dialect.

A dialect supplies a :class:`Codec` that decodes its own representation of instants, ids and
JSON; the mapping from columns to fields lives here once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, cast

from duetime import _json
from duetime._records import positional_builder
from duetime._types import (
    ApiKey,
    ApiRole,
    Attempt,
    AttemptOutcome,
    CalendarInterval,
    CalendarUnit,
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
    TenantLimits,
    TenantQueueStats,
    WorkerInfo,
    job_hash_seed,
)
from duetime.policies.fairness import FairItem, TenantQuota, bucket_refill
from duetime.policies.overlap import Candidate, StartCandidate
from duetime.policies.retry_rules import with_rules
from duetime.store._lifecycle_rows import lifecycle_fields
from duetime.store.base import ClaimedRun, PlannedSkip

Row = Mapping[str, Any]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# value → member by dict: calling an Enum class to look a value up costs more than the rest of
# a row's decoding on the claim path
_RUN_STATES = {member.value: member for member in RunState}
_TRIGGERS = {member.value: member for member in RunTrigger}
_DELIVERIES = {member.value: member for member in DeliveryMode}
_RETRY_POLICIES: dict[tuple[int, float, float, float], RetryPolicy] = {}


def _retry_policy(max_attempts: int, base: float, factor: float, cap: float) -> RetryPolicy:
    """Equal policies shared (they are frozen); at most a few thousand distinct ones kept."""
    key = (max_attempts, base, factor, cap)
    policy = _RETRY_POLICIES.get(key)
    if policy is None:
        policy = RetryPolicy(max_attempts, base, factor, cap)
        if len(_RETRY_POLICIES) < 4096:
            _RETRY_POLICIES[key] = policy
    return policy


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
        if value is None or value.tzinfo is UTC:  # UTC sessions (store/postgres/store.py)
            return cast(datetime | None, value)
        return cast(datetime, value.astimezone(UTC))

    @staticmethod
    def uuid(value: Any) -> uuid.UUID:
        return cast(uuid.UUID, value)

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


def _calendar(row: Row) -> CalendarInterval | None:
    """An ``every`` in calendar units (v16 columns); None for a fixed one, as on old rows."""
    unit = row["every_unit"]
    return None if unit is None else CalendarInterval(row["every_count"], CalendarUnit(unit))


def schedule_from_row(row: Row, c: Codec) -> Schedule:
    every = row["every_us"]
    return Schedule(
        kind=ScheduleKind(row["schedule_kind"]),
        cron=row["cron"],
        tz=row["tz"],
        at=c.instant(row["at_instant"]),
        every=None if every is None else timedelta(microseconds=every),
        anchor=c.instant(row["anchor"]),
        every_calendar=_calendar(row),
        hash_seed=job_hash_seed(row["tenant"], row["name"], row["cron"]),
    )


def optional_json(c: Codec, value: Any) -> Any:
    """A nullable JSON column's value (None for NULL)."""
    return None if value is None else c.json(value)


def _target(row: Row, c: Codec) -> Any:
    """The ``target`` column (JSON, NULL for Python tasks)."""
    return optional_json(c, row["target"])


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
        retry=with_rules(
            RetryPolicy(
                max_attempts=row["max_attempts"],
                backoff_base=row["backoff_base"],
                backoff_factor=row["backoff_factor"],
                backoff_cap=row["backoff_cap"],
            ),
            _rules(row, c),
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
        max_concurrency=row["max_concurrency"],
        concurrency_key=row["concurrency_key"],
        max_backfill=row["max_backfill"],
        sla=row["sla_s"],
        expected_duration=row["expected_duration_s"],
        jitter=row["jitter_s"],
        declared_delay=_delay(row["declared_delay_us"]),
        start_at=c.instant(row["start_at"]),
        end_at=c.instant(row["end_at"]),
        max_runs=row["max_runs"],
        runs_created=row["runs_created"],
        replace_timeout=row["replace_timeout_s"],
        max_waiting=row["max_waiting"],
        calendars=_calendars(row, c),
        calendar_shift=row["calendar_shift"],
        next_occurrence_at=_next_occurrence(row, c),
        **lifecycle_fields(row, c),
    )


def _calendars(row: Row, c: Codec) -> tuple[str, ...]:
    """The ``calendars`` column (a JSON list of names, NULL for none)."""
    value = row["calendars"]
    return () if value is None else tuple(c.json(value))


def _delay(micros: int | None) -> timedelta | None:
    return None if micros is None else timedelta(microseconds=micros)


def _next_occurrence(row: Row, c: Codec) -> datetime | None:
    """The job reads' computed ``next_occurrence_at``; rows without it (a lock, an insert, the
    scheduler's own reads) fall back to ``next_fire_at``."""
    keys = row.keys()
    return c.instant(row["next_occurrence_at" if "next_occurrence_at" in keys else "next_fire_at"])


_RUN_FIELDS = (
    "id", "job_id", "tenant", "job_name", "task", "queue", "payload", "scheduled_for",
    "available_at", "state", "priority", "attempt", "max_attempts", "token", "lease_owner",
    "lease_expires_at", "claimed_at", "started_at", "finished_at", "trigger", "idempotency_key",
    "reason", "last_error_class", "last_error_message", "replays", "created_at", "target",
    "progress", "progress_message", "checkpoint", "cancel_requested", "result", "origin",
)  # fmt: skip
"""The order :func:`run_from_row` passes :class:`Run`'s fields in (checked at import: a field
added to ``Run`` must be added here and there)."""

_CLAIMED_FIELDS = ("run", "timeout", "retry", "delivery", "one_shot", "retry_from")
"""Likewise for :class:`ClaimedRun` and :func:`claimed_from_row`."""

for _cls, _order in ((Run, _RUN_FIELDS), (ClaimedRun, _CLAIMED_FIELDS)):
    if tuple(f.name for f in dataclasses.fields(_cls)) != _order:  # pragma: no cover
        raise ImportError(f"duetime.store._rows: {_cls.__name__}'s fields changed; update it here")

_new_run = positional_builder(Run)
_new_claimed = positional_builder(ClaimedRun)


def run_from_row(row: Row, c: Codec) -> Run:
    """A run from its row (every ``runs`` column; ``origin`` may be absent). Built without
    ``Run.__init__`` (``duetime._records``): the claim decodes hundreds of rows per call."""
    instant = c.instant
    return _new_run(
        c.uuid(row["id"]),
        c.uuid(row["job_id"]),
        row["tenant"],
        row["job_name"],
        row["task"],
        row["queue"],
        c.json(row["payload"]),
        _required(c, row["scheduled_for"]),
        _required(c, row["available_at"]),
        _RUN_STATES[row["state"]],
        row["priority"],
        row["attempt"],
        row["max_attempts"],
        row["token"],
        row["lease_owner"],
        instant(row["lease_expires_at"]),
        instant(row["claimed_at"]),
        instant(row["started_at"]),
        instant(row["finished_at"]),
        _TRIGGERS[row["trigger"]],
        row["idempotency_key"],
        row["reason"],
        row["last_error_class"],
        row["last_error_message"],
        row["replays"],
        _required(c, row["created_at"]),
        _target(row, c),
        row["progress"],
        row["progress_message"],
        optional_json(c, row["checkpoint"]),
        bool(row["cancel_requested"]),
        optional_json(c, row["result"]),
        _origin(row),
    )


def _origin(row: Row) -> str | None:
    """The ``origin`` column; rows of statements that do not return it read as None."""
    keys = row.keys()
    return row["origin"] if "origin" in keys else None


def claimed_from_row(row: Row, c: Codec) -> ClaimedRun:
    return _new_claimed(  # in _CLAIMED_FIELDS order
        run_from_row(row, c),
        row["timeout_s"],
        with_rules(
            _retry_policy(
                row["max_attempts"], row["backoff_base"], row["backoff_factor"], row["backoff_cap"]
            ),
            _rules(row, c),
        ),
        _DELIVERIES[row["delivery"]],
        bool(row["one_shot"]),
        c.instant(row["retry_from"]),
    )


def _rules(row: Row, c: Codec) -> Any:
    """The ``retry_rules`` column (JSON, NULL unless a window or classification is set)."""
    return optional_json(c, row["retry_rules"])


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
        traceback=row["traceback"],
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
        tenant=row["tenant"] or None,  # '': the installation's own worker
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


def start_candidate_from_row(row: Row, c: Codec) -> StartCandidate:
    """A keyed run of a start batch, as ``runs_start_keyed_info`` reads it (both dialects)."""
    return StartCandidate(
        c.uuid(row["id"]),
        row["token"],
        row["concurrency_key"],
        OverlapPolicy(row["overlap_policy"]),
        RunTrigger(row["trigger"]),
        row["max_concurrency"],
    )


def locked_candidate_from_row(row: Row, c: Codec, now: datetime) -> tuple[FairItem, Candidate]:
    """A candidate of the claim's locked step: how it ranks, and how overlap and quotas see it.
    A limited tenant's run without an overlap key gets a key of its own (never busy)."""
    run_id = c.uuid(row["id"])
    available_at = _required(c, row["available_at"])
    key = row["concurrency_key"]
    candidate = Candidate(
        id=run_id,
        key=f"run:{run_id}" if key is None else key,
        trigger=RunTrigger(row["trigger"]),
        policy=OverlapPolicy.ALLOW if key is None else OverlapPolicy(row["overlap_policy"]),
        max_concurrency=0 if key is None else row["max_concurrency"],
        due=available_at <= now,
        tenant=row["tenant"],
    )
    return FairItem(run_id, row["tenant"], row["priority"], available_at), candidate


def tenant_quota_from_row(row: Row, c: Codec, now: datetime) -> TenantQuota:
    """A tenant's limits and usage at ``now`` (its start bucket refilled to ``now``)."""
    rate = row["max_starts_per_second"]
    tokens = 0.0
    if rate is not None:
        tokens = bucket_refill(row["bucket_tokens"], c.instant(row["bucket_at"]), now, rate)
    return TenantQuota(
        tenant=row["id"],
        max_in_flight=row["max_in_flight"],
        max_starts_per_second=rate,
        running=row["running"],
        tokens=tokens,
    )


def tenant_limits_from_row(row: Row) -> TenantLimits:
    return TenantLimits(
        tenant=row["id"],
        max_in_flight=row["max_in_flight"],
        max_starts_per_second=row["max_starts_per_second"],
        weight=row["weight"],
        max_backfill_runs=row["max_backfill_runs"],
        max_jobs=row["max_jobs"],
    )


def tenant_stats_from_rows(
    rows: Sequence[Row], quota_rows: Sequence[Row], c: Codec
) -> list[TenantQueueStats]:
    """Per (tenant, queue) rows of ``tenant_stats`` (each carries the clock as ``now``) and the
    limited tenants' rows: a tenant whose quota leaves no room now has all its due runs
    throttled."""
    if not rows:
        return []
    now = _required(c, rows[0]["now"])
    in_flight: Counter[str] = Counter()
    for r in rows:
        in_flight[r["tenant"]] += int(r["in_flight"])
    blocked = set()
    for q in quota_rows:
        quota = tenant_quota_from_row({**dict(q), "running": in_flight[q["id"]]}, c, now)
        if quota.budget() == 0:
            blocked.add(quota.tenant)
    stats = []
    for r in rows:
        oldest = c.instant(r["oldest"])
        due = int(r["due"] or 0)
        stats.append(
            TenantQueueStats(
                tenant=r["tenant"],
                queue=r["queue"],
                due=due,
                oldest_due_age=0.0 if oldest is None else max(0.0, (now - oldest).total_seconds()),
                in_flight=int(r["in_flight"] or 0),
                throttled=due if r["tenant"] in blocked else 0,
            )
        )
    return stats
