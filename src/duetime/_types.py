"""Plain, frozen value types shared by every layer: jobs, runs, attempts, policies, states.

Nothing here does I/O. Instants are timezone-aware ``datetime`` objects in UTC.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

T = TypeVar("T")

JSON = Any
"""A value that round-trips through JSON (dict, list, str, int, float, bool, None)."""


class ScheduleKind(enum.StrEnum):
    NOW = "now"
    AT = "at"
    CRON = "cron"
    EVERY = "every"


class JobStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    COMPLETED = "completed"


class RunState(enum.StrEnum):
    SCHEDULED = "scheduled"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_RUN_STATES


_TERMINAL_RUN_STATES = frozenset(
    {RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED, RunState.SKIPPED}
)


class AttemptOutcome(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    STALE = "stale"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class RunTrigger(enum.StrEnum):
    """Why a run exists: its job's schedule, or an explicit trigger."""

    SCHEDULE = "schedule"
    MANUAL = "manual"


class MisfirePolicy(enum.StrEnum):
    SKIP = "skip"
    FIRE_ONCE = "fire_once"
    BACKFILL = "backfill"


class OverlapPolicy(enum.StrEnum):
    SKIP = "skip"
    ALLOW = "allow"
    SERIALIZE = "serialize"
    REPLACE = "replace"


class DeliveryMode(enum.StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"
    EXACTLY_ONCE = "exactly_once"


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job fires. Exactly the fields of its ``kind`` are set.

    - ``now``: one run at ``at`` (the registration instant).
    - ``at``: one run at ``at``.
    - ``cron``: ``cron`` expression evaluated in IANA zone ``tz``.
    - ``every``: ``anchor + k * every`` for k ≥ 0.
    """

    kind: ScheduleKind
    cron: str | None = None
    tz: str = "UTC"
    at: datetime | None = None
    every: timedelta | None = None
    anchor: datetime | None = None

    @property
    def one_shot(self) -> bool:
        return self.kind in (ScheduleKind.NOW, ScheduleKind.AT)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one run. ``max_attempts`` counts the first try.

    Backoff before attempt n+1 is ``uniform(0, min(cap, base * factor**(n-1)))`` (full jitter).
    """

    max_attempts: int = 3
    backoff_base: float = 1.0
    backoff_factor: float = 2.0
    backoff_cap: float = 600.0


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One fire instant of a schedule, for previews."""

    instant: datetime
    """UTC."""
    local: datetime
    """The same instant in the schedule's zone."""
    dst_note: str | None = None
    """Set when a DST change moved or doubled this occurrence (e.g. ``"moved from 02:30"``)."""


@dataclass(frozen=True, slots=True)
class Job:
    id: uuid.UUID
    tenant: str
    name: str
    task: str
    payload: JSON
    schedule: Schedule
    status: JobStatus
    priority: int
    retry: RetryPolicy
    timeout: float | None
    misfire_policy: MisfirePolicy
    misfire_grace: float
    overlap_policy: OverlapPolicy
    delivery: DeliveryMode
    queue: str
    tags: tuple[str, ...]
    metadata: dict[str, JSON]
    partition: int
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    target: dict[str, JSON] | None = None
    """Where a run is sent when it is not a Python task: ``{"type": "http", "url": …}``."""


@dataclass(frozen=True, slots=True)
class Run:
    id: uuid.UUID
    job_id: uuid.UUID
    tenant: str
    job_name: str
    task: str
    queue: str
    payload: JSON
    scheduled_for: datetime
    available_at: datetime
    state: RunState
    priority: int
    attempt: int
    """Attempts started so far (the current one while running)."""
    max_attempts: int
    """Attempt number beyond which no retry is made (raised by a replay)."""
    token: int
    """Fencing token of the current (or last) lease."""
    lease_owner: str | None
    lease_expires_at: datetime | None
    claimed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    trigger: RunTrigger
    idempotency_key: str | None
    reason: str | None
    """Why it is skipped, cancelled or dead (``attempts_exhausted``, ``permanent_error`` …)."""
    last_error_class: str | None
    last_error_message: str | None
    replays: int
    created_at: datetime
    target: dict[str, JSON] | None = None
    """The job's target when the run was created (None for a Python task)."""


@dataclass(frozen=True, slots=True)
class Attempt:
    run_id: uuid.UUID
    job_id: uuid.UUID
    tenant: str
    number: int
    token: int
    worker_id: str
    claimed_at: datetime
    started_at: datetime | None
    finished_at: datetime
    outcome: AttemptOutcome
    error_class: str | None = None
    error_message: str | None = None

    @property
    def duration(self) -> timedelta | None:
        return None if self.started_at is None else self.finished_at - self.started_at


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    tasks: tuple[str, ...]
    queues: tuple[str, ...]
    started_at: datetime
    heartbeat_at: datetime


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A running duetime process: its roles (``scheduler``, ``worker``, ``api``) and liveness."""

    id: str
    host: str
    pid: int
    roles: tuple[str, ...]
    partitions: str | None
    started_at: datetime
    heartbeat_at: datetime


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who leads, in which term, until when (database clock)."""

    node_id: str
    term: int
    elected_at: datetime
    expires_at: datetime


class ApiRole(enum.StrEnum):
    """What an API key may do: ``viewer`` reads; ``operator`` also writes within its tenant
    (remote workers included); ``admin`` also acts on any tenant and manages keys."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"

    def allows(self, needed: ApiRole) -> bool:
        order = (ApiRole.VIEWER, ApiRole.OPERATOR, ApiRole.ADMIN)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key as stored: the secret itself is never kept, only its SHA-256 hash."""

    id: uuid.UUID
    tenant: str
    role: ApiRole
    name: str
    prefix: str
    """The first characters of the secret (``dt_AbCd…``), to recognise a key in listings."""
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a keyset-paginated listing; ``next_cursor`` is None on the last page."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None
