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
from typing import Any, Protocol

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
    def utc_row(self, instant: Any) -> bool:
        """True when ``instant`` (a NOT NULL instant column of a row) says every instant of its
        row is a UTC datetime already, to be used as it comes (:func:`run_from_tuple` then
        converts none of them)."""
        ...


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

    @staticmethod
    def utc_row(instant: Any) -> bool:
        return False


class NativeCodec:
    """PostgreSQL: the driver already returns datetimes, UUIDs and decoded JSON."""

    # no typing.cast here: these run ~10 times per claimed run, and ``cast(datetime | None, …)``
    # builds the union anew at each call
    @staticmethod
    def instant(value: Any) -> datetime | None:
        if value is None or value.tzinfo is UTC:  # UTC sessions (store/postgres/store.py)
            return value  # type: ignore[no-any-return]
        return value.astimezone(UTC)  # type: ignore[no-any-return]

    @staticmethod
    def uuid(value: Any) -> uuid.UUID:
        return value  # type: ignore[no-any-return]

    @staticmethod
    def json(value: Any) -> Any:
        return value

    @staticmethod
    def utc_row(instant: Any) -> bool:
        # the driver gives every instant of a result the session's zone
        return instant.tzinfo is UTC


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
"""The order :func:`run_from_tuple` passes :class:`Run`'s fields in (checked at import: a field
added to ``Run`` must be added here and there); each field is the ``runs`` column of its name."""

_CLAIMED_FIELDS = ("run", "timeout", "retry", "delivery", "one_shot", "retry_from")
"""Likewise for :class:`ClaimedRun` and :func:`claimed_from_tuple`."""

for _cls, _order in ((Run, _RUN_FIELDS), (ClaimedRun, _CLAIMED_FIELDS)):
    if tuple(f.name for f in dataclasses.fields(_cls)) != _order:  # pragma: no cover
        raise ImportError(f"duetime.store._rows: {_cls.__name__}'s fields changed; update it here")

CLAIMED_COLUMNS = (
    *_RUN_FIELDS,
    "timeout_s", "backoff_base", "backoff_factor", "backoff_cap", "retry_rules", "delivery",
    "one_shot", "retry_from",
)  # fmt: skip
"""The ``runs`` columns a claim returns, in this order (each dialect's ``claimed_columns``
query fragment; tests/store check the two agree): a claimed row is decoded by position
(:func:`claimed_from_tuple`), with no dict or name lookup per row. The columns of a
:class:`Run` first (:func:`run_from_tuple` reads those); a statement may return more after
them (the fair claim's flags, :data:`CLAIM_FLAGS`)."""

CLAIM_FLAGS = {
    name: index for index, name in enumerate(("deferred", "capped", "wide"), len(CLAIMED_COLUMNS))
}
"""Where PostgreSQL's fair claim returns its flags after :data:`CLAIMED_COLUMNS`."""

CLAIMED_INDEX = {name: index for index, name in enumerate(CLAIMED_COLUMNS)}
"""A claimed row's column positions by name (for the few columns read beside the decoding)."""

_RUN_WIDTH = len(_RUN_FIELDS)
_CLAIMED_WIDTH = len(CLAIMED_COLUMNS)
_MAX_ATTEMPTS = CLAIMED_INDEX["max_attempts"]
_NAMED_RUN_COLUMNS = _RUN_FIELDS[:-1]
"""Every column of a run but ``origin`` (last), which a row may lack."""

_new_run = positional_builder(Run)
_new_claimed = positional_builder(ClaimedRun)


def run_from_row(row: Row, c: Codec) -> Run:
    """A run from its row with named columns (every ``runs`` column; ``origin`` may be
    absent)."""
    return run_from_tuple([row[name] for name in _NAMED_RUN_COLUMNS] + [_origin(row)], c)


def run_from_tuple(row: Sequence[Any], c: Codec) -> Run:
    """A run from the first ``len(Run fields)`` values of ``row``, in :data:`_RUN_FIELDS`
    order (the columns of the same names). Built without ``Run.__init__``
    (``duetime._records``): the claim decodes hundreds of rows per call."""
    (
        id_, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
        priority, attempt, max_attempts, token, lease_owner, lease_expires_at, claimed_at,
        started_at, finished_at, trigger, idempotency_key, reason, last_error_class,
        last_error_message, replays, created_at, target, progress, progress_message, checkpoint,
        cancel_requested, result, origin,
    ) = row[:_RUN_WIDTH]  # fmt: skip
    json = c.json
    if not c.utc_row(scheduled_for):  # else every instant is used as it comes (no call each)
        instant = c.instant
        scheduled_for = instant(scheduled_for)  # NOT NULL: never None
        available_at = instant(available_at)  # NOT NULL
        lease_expires_at = instant(lease_expires_at)
        claimed_at = instant(claimed_at)
        started_at = instant(started_at)
        finished_at = instant(finished_at)
        created_at = instant(created_at)  # NOT NULL
    return _new_run(
        c.uuid(id_),
        c.uuid(job_id),
        tenant,
        job_name,
        task,
        queue,
        json(payload),
        scheduled_for,
        available_at,
        _RUN_STATES[state],
        priority,
        attempt,
        max_attempts,
        token,
        lease_owner,
        lease_expires_at,
        claimed_at,
        started_at,
        finished_at,
        _TRIGGERS[trigger],
        idempotency_key,
        reason,
        last_error_class,
        last_error_message,
        replays,
        created_at,
        None if target is None else json(target),
        progress,
        progress_message,
        None if checkpoint is None else json(checkpoint),
        bool(cancel_requested),
        None if result is None else json(result),
        origin,
    )


def _origin(row: Row) -> str | None:
    """The ``origin`` column; rows of statements that do not return it read as None."""
    keys = row.keys()
    return row["origin"] if "origin" in keys else None


def claimed_from_row(row: Row, c: Codec) -> ClaimedRun:
    """:func:`claimed_from_tuple` of a row with named columns (every ``runs`` column;
    ``origin`` may be absent)."""
    values = [_origin(row) if name == "origin" else row[name] for name in CLAIMED_COLUMNS]
    return claimed_from_tuple(values, c)


def claimed_from_tuple(row: Sequence[Any], c: Codec) -> ClaimedRun:
    """A claimed run from a row of :data:`CLAIMED_COLUMNS` (by position; values after them
    are not read)."""
    (
        timeout_s, backoff_base, backoff_factor, backoff_cap, retry_rules, delivery, one_shot,
        retry_from,
    ) = row[_RUN_WIDTH:_CLAIMED_WIDTH]  # fmt: skip
    return _new_claimed(  # in _CLAIMED_FIELDS order
        run_from_tuple(row, c),
        timeout_s,
        with_rules(
            _retry_policy(row[_MAX_ATTEMPTS], backoff_base, backoff_factor, backoff_cap),
            None if retry_rules is None else c.json(retry_rules),
        ),
        _DELIVERIES[delivery],
        bool(one_shot),
        c.instant(retry_from),
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
