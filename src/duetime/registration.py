"""Turning what a user asks for (``app.schedule(...)``, ``POST /jobs``) into a validated job.

Every rejection is a :class:`~duetime.errors.ValidationError` naming the field and the reason.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import operator
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from duetime import _json
from duetime._config import Settings
from duetime._types import (
    DeliveryMode,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    Schedule,
    ScheduleKind,
    job_hash_seed,
)
from duetime.errors import ValidationError
from duetime.schedules import first_fire, validate_schedule
from duetime.store.base import BulkJob, JobUpsertParams
from duetime.targets.http import HTTP_TASK, validate_target

PARTITIONS = 256
MAX_NAME = 200
PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
"""Priorities (higher first) are whole numbers in this range (docs/fairness.md)."""
MAX_JITTER = 3600.0


def check_priority(value: object, field_name: str = "priority") -> int:
    """``value`` if it is a priority, else ValidationError naming ``field_name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not PRIORITY_MIN <= value <= PRIORITY_MAX
    ):
        raise ValidationError(
            field_name, f"must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return value


def _jitter(value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_JITTER
    ):
        raise ValidationError("jitter", f"must be 0 to {MAX_JITTER:g} seconds")
    return float(value)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """The user's request, before validation. Exactly one of cron/at/every/now is set."""

    name: str
    task: str | None = None
    target: dict[str, Any] | None = None
    cron: str | None = None
    at: datetime | timedelta | None = None
    every: timedelta | float | None = None
    now: bool = False
    tz: str = "UTC"
    anchor: datetime | None = None
    payload: Any = None
    retry: RetryPolicy | None = None
    priority: int = 0
    timeout: float | None = None
    misfire: MisfirePolicy | str = MisfirePolicy.FIRE_ONCE
    misfire_grace: float | None = None
    overlap: OverlapPolicy | str = OverlapPolicy.SKIP
    delivery: DeliveryMode | str = DeliveryMode.AT_LEAST_ONCE
    queue: str = "default"
    tags: tuple[str, ...] = field(default_factory=tuple)
    metadata: dict[str, Any] = field(default_factory=dict)
    max_concurrency: int | None = None
    """Runs at once for ``allow`` (default unlimited, 0); the others run one at a time."""
    concurrency_key: str | None = None
    max_backfill: int = 100
    sla: float | timedelta | None = None
    """Seconds after each scheduled instant within which a run must succeed (alerts)."""
    expected_duration: float | timedelta | None = None
    """Seconds a run normally takes (stuck-run alerts); default: learnt from history."""
    jitter: float | timedelta = 0.0
    """Seconds: each run becomes available up to this long after its instant (stable per
    occurrence); its ``scheduled_for`` stays the instant."""


def partition_of(job_id: uuid.UUID) -> int:
    """The job's virtual partition (0-255): a stable hash of its id, fixed at creation."""
    return hashlib.sha256(job_id.bytes).digest()[0] % PARTITIONS


def _valid_tag(tag: object) -> bool:
    return isinstance(tag, str) and 0 < len(tag) <= 100 and tag.isprintable()


def _enum(kind: type[Any], value: Any, field_name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(v) for v in kind)
        raise ValidationError(field_name, f"{value!r} is not one of: {allowed}") from None


def _schedule(spec: JobSpec, now: datetime) -> Schedule:
    cron, at, every = spec.cron, spec.at, spec.every
    if (cron is not None) + (at is not None) + (every is not None) + bool(spec.now) != 1:
        given = [k for k, v in (("cron", cron), ("at", at), ("every", every)) if v is not None]
        given += ["now"] if spec.now else []
        what = "none" if not given else " and ".join(given)
        raise ValidationError(
            "schedule", f"give exactly one of cron, at, every or now (got {what})"
        )
    kind = "cron" if cron is not None else "at" if at is not None else "every"
    kind = "now" if spec.now else kind
    if kind == "now":
        return Schedule(ScheduleKind.NOW, at=now)
    if kind == "cron":
        if not isinstance(spec.cron, str):
            raise ValidationError("cron", "must be a string such as '*/5 * * * *'")
        return Schedule(ScheduleKind.CRON, cron=spec.cron.strip(), tz=spec.tz)
    if kind == "at":
        at = spec.at
        if isinstance(at, timedelta):
            at = now + at
        if not isinstance(at, datetime):
            raise ValidationError("at", "must be a datetime with a time zone, or a timedelta")
        return Schedule(ScheduleKind.AT, at=at, tz=spec.tz)
    every = spec.every
    if isinstance(every, int | float) and not isinstance(every, bool):
        every = timedelta(seconds=every)
    if not isinstance(every, timedelta):
        raise ValidationError("every", "must be a timedelta or a number of seconds")
    return Schedule(ScheduleKind.EVERY, every=every, anchor=spec.anchor, tz=spec.tz)


def equivalent_schedules(requested: Schedule) -> Any:
    """A predicate: is a stored schedule the same as ``requested`` (so re-declaring a job keeps
    its next fire instant)? ``now`` jobs are equal to any ``now`` job; an ``every`` job with no
    explicit anchor is equal to any stored one of the same interval."""

    def same(stored: Schedule) -> bool:
        if requested.kind is ScheduleKind.NOW:
            return stored.kind is ScheduleKind.NOW
        if requested.kind is ScheduleKind.EVERY and requested.anchor is None:
            return stored.kind is ScheduleKind.EVERY and stored.every == requested.every
        return stored == requested

    return same


def _retry(retry: RetryPolicy | None, settings: Settings) -> RetryPolicy:
    """The validated policy with its values as the store keeps them (an int and three
    floats): ``max_attempts`` a whole number 1-1000, the backoffs finite real numbers."""
    policy = retry
    if policy is None:
        policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            backoff_base=settings.backoff_base,
            backoff_factor=settings.backoff_factor,
            backoff_cap=settings.backoff_cap,
        )
    if not isinstance(policy, RetryPolicy):
        raise ValidationError("retry", "must be a duetime.Retry(...)")
    attempts = policy.max_attempts
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        raise ValidationError(
            "retry.max_attempts", f"must be a whole number from 1 to 1000, got {attempts!r}"
        )
    base, factor, cap = (
        _finite(v) for v in (policy.backoff_base, policy.backoff_factor, policy.backoff_cap)
    )
    if base is None or factor is None or cap is None or base < 0 or cap < 0 or factor < 1:
        raise ValidationError(
            "retry.backoff", "base and cap must be finite numbers >= 0 and factor one >= 1"
        )
    return RetryPolicy(int(attempts), base, factor, cap)


def _finite(value: object) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _retry_types(retry: object) -> tuple[type, ...] | None:
    """The types of a retry policy's values (its equality does not tell ``True`` from ``1``)."""
    if not isinstance(retry, RetryPolicy):
        return None
    values = (retry.max_attempts, retry.backoff_base, retry.backoff_factor, retry.backoff_cap)
    return tuple(map(type, values))


def task_and_target(spec: JobSpec) -> tuple[str, dict[str, Any] | None]:
    """The task a job runs under, and its validated target: a target (``{"type": "http",
    …}``) runs under the built-in task ``duetime.http``; otherwise ``task`` names a function."""
    if spec.target is not None:
        if spec.task is not None and spec.task != HTTP_TASK:
            raise ValidationError(
                "target", f"give either task or target, not both (task {spec.task!r})"
            )
        return HTTP_TASK, validate_target(spec.target)
    if spec.task == HTTP_TASK:
        raise ValidationError(
            "target", f"{HTTP_TASK} needs a target such as {{'type': 'http', 'url': ...}}"
        )
    if not isinstance(spec.task, str) or not spec.task:
        raise ValidationError(
            "task", "must name a task, e.g. 'billing.settle' (or give a target instead)"
        )
    return spec.task, None


CronTimes = dict[tuple[str, str, datetime], tuple[Schedule, datetime | None]]
"""(cron expression as given, zone, now) → its validated schedule and first fire instant,
for cron expressions without ``H`` (see :func:`build_upsert`)."""

CRON_TIMES_MAX = 4096
"""Entries a :data:`CronTimes` cache keeps before it starts over."""


def build_upsert(
    spec: JobSpec,
    *,
    tenant: str,
    settings: Settings,
    now: datetime,
    create_only: bool = False,
    cron_times: CronTimes | None = None,
) -> JobUpsertParams:
    """Validate ``spec`` and build the store's upsert params. Raises ValidationError.

    ``cron_times``: a cache of validated cron schedules and their first instants, for many
    specs at once (bulk registration repeats a few thousand expressions over millions of
    jobs); a schedule is only cached once it validated, so an invalid one is checked, and
    refused, every time."""
    _check_name(spec.name)
    shared = _shared_fields(spec, settings)
    payload = _json.encode_payload(spec.payload, limit=settings.payload_limit)
    _metadata(spec.metadata, settings)
    requested, resolved, next_fire_at = _job_schedule(spec, tenant, now, cron_times)
    job_id = new_job_id()
    return JobUpsertParams(
        tenant=tenant,
        name=spec.name,
        payload=payload,
        schedule=resolved,
        next_fire_at=next_fire_at,
        equivalent=equivalent_schedules(requested),
        metadata=dict(spec.metadata),
        partition=partition_of(job_id),
        job_id=job_id,
        create_only=create_only,
        **shared,
    )


SHARED_SPEC_FIELDS = (
    "task", "target", "priority", "retry", "timeout", "misfire", "misfire_grace", "overlap",
    "delivery", "queue", "tags", "max_concurrency", "concurrency_key", "max_backfill", "sla",
    "expected_duration", "jitter",
)  # fmt: skip
"""The spec fields :func:`_shared_fields` reads: the part of a job many jobs of a bulk
registration have in common (everything but name, schedule, payload and metadata)."""


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise ValidationError("name", f"must be 1-{MAX_NAME} characters")
    if not name.isprintable():
        raise ValidationError("name", "must contain only printable characters")


def _metadata(metadata: object, settings: Settings) -> str:
    """The encoded metadata object."""
    if not isinstance(metadata, dict):
        raise ValidationError("metadata", "must be a JSON object")
    return _json.encode_payload(metadata, limit=settings.payload_limit, field="metadata")


def _shared_fields(spec: JobSpec, settings: Settings) -> dict[str, Any]:
    """The validated :class:`JobUpsertParams` fields that depend only on the spec's
    :data:`SHARED_SPEC_FIELDS` (and the settings)."""
    check_priority(spec.priority)
    if spec.timeout is not None and not (
        isinstance(spec.timeout, int | float) and spec.timeout > 0
    ):
        raise ValidationError("timeout", "must be a positive number of seconds")
    grace = settings.misfire_grace if spec.misfire_grace is None else spec.misfire_grace
    if not isinstance(grace, int | float) or not grace >= 0:  # NaN is refused too
        raise ValidationError("misfire_grace", "must be a non-negative number of seconds")
    if not isinstance(spec.queue, str) or not 0 < len(spec.queue) <= 100:
        raise ValidationError("queue", "must be 1-100 characters")
    if not spec.queue.isprintable():
        raise ValidationError("queue", "must contain only printable characters")
    if not all(_valid_tag(t) for t in spec.tags):
        raise ValidationError(
            "tags", "must be non-empty printable strings of at most 100 characters"
        )
    task, target = task_and_target(spec)
    return {
        "task": task,
        "target": target,
        "priority": spec.priority,
        "retry": _retry(spec.retry, settings),
        "timeout": None if spec.timeout is None else float(spec.timeout),
        "misfire_policy": _enum(MisfirePolicy, spec.misfire, "misfire"),
        "misfire_grace": float(grace),
        "overlap_policy": _enum(OverlapPolicy, spec.overlap, "overlap"),
        "delivery": _enum(DeliveryMode, spec.delivery, "delivery"),
        "queue": spec.queue,
        "tags": tuple(spec.tags),
        "sla": _seconds_or_none(spec.sla, "sla"),
        "expected_duration": _seconds_or_none(spec.expected_duration, "expected_duration"),
        "jitter": _jitter(spec.jitter),
        **_overlap_fields(spec),
    }


def _job_schedule(
    spec: JobSpec, tenant: str, now: datetime, cron_times: CronTimes | None
) -> tuple[Schedule, Schedule, datetime | None]:
    """The validated schedule as requested, as stored (an ``every`` anchor filled in), and
    its first instant."""
    cron, tz = spec.cron, spec.tz
    # only well-typed cron-only specs are looked up (a bad one must reach validation's error)
    cacheable = (
        cron_times is not None
        and type(cron) is str
        and type(tz) is str
        and spec.at is None
        and spec.every is None
        and not spec.now
    )
    if cron_times is not None and cacheable:
        known = cron_times.get((cast(str, cron), tz, now))
        if known is not None:
            return known[0], known[0], known[1]
    requested = _schedule(spec, now)
    if requested.kind is ScheduleKind.CRON:  # what its H values hash (docs/fairness.md)
        seed = job_hash_seed(tenant, spec.name, requested.cron)
        if seed is not None:
            requested = replace(requested, hash_seed=seed)
    validate_schedule(requested, now)
    resolved = requested
    if requested.kind is ScheduleKind.EVERY and requested.anchor is None:
        resolved = Schedule(ScheduleKind.EVERY, every=requested.every, anchor=now, tz=requested.tz)
    next_fire_at = first_fire(resolved, now)
    if cron_times is not None and cacheable and requested.hash_seed is None:
        if len(cron_times) >= CRON_TIMES_MAX:
            cron_times.clear()
        cron_times[(cast(str, cron), tz, now)] = (requested, next_fire_at)
    return requested, resolved, next_fire_at


def new_job_id() -> uuid.UUID:
    """A new job id: a version-7 UUID (RFC 9562: milliseconds since the Unix epoch, then 74
    random bits), so new jobs land at the right edge of the primary key's index instead of on
    a random page of it (docs/decisions/0007)."""
    return _version_7(time.time_ns() // 1_000_000, int.from_bytes(os.urandom(16)))


_RANDOM_BITS = ((1 << 62) - 1) | (((1 << 12) - 1) << 64)
_VERSION_7 = (7 << 76) | (0b10 << 62)


def _version_7(millis: int, random: int) -> uuid.UUID:
    return uuid.UUID(int=(millis & ((1 << 48) - 1)) << 80 | random & _RANDOM_BITS | _VERSION_7)


class _JobIds:
    """Job ids (:func:`new_job_id`) with their partitions, the randomness drawn from
    ``os.urandom`` a block at a time. Not shared across processes."""

    BLOCK = 256

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self) -> tuple[uuid.UUID, int]:
        if self._at >= len(self._pool):
            self._pool, self._at = os.urandom(16 * self.BLOCK), 0
        random = int.from_bytes(self._pool[self._at : self._at + 16])
        self._at += 16
        job_id = _version_7(time.time_ns() // 1_000_000, random)
        return job_id, partition_of(job_id)


class BulkValidator:
    """Validates the specs of one bulk registration (:meth:`AsyncApp.schedule_many`) into
    :class:`BulkJob` rows, as :func:`build_upsert` would.

    Specs whose :data:`SHARED_SPEC_FIELDS` are equal — value and type — share one *shape*:
    the first is validated whole and becomes the shape; the rest only have their name,
    schedule, payload and metadata checked. A spec with an unhashable shared field (a target,
    a list of tags) is validated whole on its own. Not thread-safe; one per call."""

    SHAPES_MAX = 1024
    """Shapes kept before the cache starts over."""

    _shared_of = operator.attrgetter(*SHARED_SPEC_FIELDS)

    def __init__(self, *, tenant: str, settings: Settings, now: datetime) -> None:
        self.tenant, self.settings, self.now = tenant, settings, now
        self._shapes: dict[tuple[Any, ...], JobUpsertParams] = {}
        self._cron_times: CronTimes = {}
        self._ids = _JobIds()

    def job(self, spec: JobSpec) -> BulkJob:
        """``spec`` validated; raises ValidationError naming the field."""
        values = self._shared_of(spec)
        key = (values, tuple(map(type, values)), _retry_types(spec.retry))
        try:
            shape = self._shapes.get(key)
        except TypeError:  # an unhashable shared field
            return BulkJob.of(self._whole(spec))
        if shape is None:
            shape = self._whole(spec)
            if len(self._shapes) >= self.SHAPES_MAX:
                self._shapes.clear()
            self._shapes[key] = shape
            return BulkJob.of(shape)
        _check_name(spec.name)
        payload = _json.encode_payload(spec.payload, limit=self.settings.payload_limit)
        metadata = _metadata(spec.metadata, self.settings)
        _, resolved, next_fire_at = _job_schedule(spec, self.tenant, self.now, self._cron_times)
        job_id, partition = self._ids.next()
        name = spec.name
        return BulkJob(shape, job_id, name, payload, metadata, resolved, next_fire_at, partition)

    def _whole(self, spec: JobSpec) -> JobUpsertParams:
        return build_upsert(
            spec,
            tenant=self.tenant,
            settings=self.settings,
            now=self.now,
            create_only=True,
            cron_times=self._cron_times,
        )


def _seconds_or_none(value: object, field_name: str) -> float | None:
    """An optional positive number of seconds (a timedelta is accepted too)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= 10 * 366 * 86400
    ):
        raise ValidationError(field_name, "must be a positive number of seconds (at most 10 years)")
    return float(value)


def _overlap_fields(spec: JobSpec) -> dict[str, Any]:
    policy = _enum(OverlapPolicy, spec.overlap, "overlap")
    limit = spec.max_concurrency
    if limit is None:
        limit = 0 if policy is OverlapPolicy.ALLOW else 1
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 10_000:
        raise ValidationError("max_concurrency", "must be a whole number from 0 to 10000")
    if limit != 1 and policy is not OverlapPolicy.ALLOW:
        raise ValidationError(
            "max_concurrency", f"only overlap 'allow' runs several at once (overlap is {policy})"
        )
    key = spec.concurrency_key
    if key is not None and not (isinstance(key, str) and 0 < len(key) <= 200 and key.isprintable()):
        raise ValidationError("concurrency_key", "must be 1-200 printable characters")
    if key is not None and limit == 0:
        raise ValidationError("max_concurrency", "a concurrency key needs a limit of at least 1")
    backfill = spec.max_backfill
    if isinstance(backfill, bool) or not isinstance(backfill, int) or not 1 <= backfill <= 10_000:
        raise ValidationError("max_backfill", "must be a whole number from 1 to 10000")
    return {"max_concurrency": limit, "concurrency_key": key, "max_backfill": backfill}


def request_hash(payload: Any, priority: int | None) -> str:
    """Fingerprint of a trigger request: the same idempotency key must carry the same request."""
    return hashlib.sha256(
        _json.dumps({"payload": payload, "priority": priority}).encode()
    ).hexdigest()
