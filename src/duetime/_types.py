"""Plain, frozen value types shared by every layer: jobs, runs, attempts, policies, states.

Nothing here does I/O. Instants are timezone-aware ``datetime`` objects in UTC.
"""

from __future__ import annotations

import enum
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from duetime.errors import ValidationError

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)

JSON = Any
"""A value that round-trips through JSON (dict, list, str, int, float, bool, None)."""


# The enums below share one shape by nature (a StrEnum of stored names): nothing to factor out.
HTTP_TASK = "duetime.http"
"""The built-in task of runs with an HTTP target (``targets/http.py`` executes them)."""


class ScheduleKind(enum.StrEnum):
    NOW = "now"
    AT = "at"
    CRON = "cron"
    EVERY = "every"


class CalendarUnit(enum.StrEnum):
    """Units of an ``every`` schedule counted on the calendar of the schedule's zone."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"


@dataclass(frozen=True, slots=True)
class CalendarInterval:
    """An ``every`` interval in calendar units (``"1 day"``, ``"2 weeks"``, ``"1 month"``):
    occurrences keep the anchor's wall time in the schedule's zone across DST changes (a
    month keeps the anchor's day of the month, clamped to the month's last day)."""

    count: int
    """Whole number of units, 1 or more."""
    unit: CalendarUnit
    """The unit; its name as a string (``"day"``, ``"week"``, ``"month"``) is taken too."""

    def __post_init__(self) -> None:
        # CalendarInterval(1, "day"): a valid unit name becomes the unit; anything else stays
        # for validation to refuse with the field's name
        if not isinstance(self.unit, CalendarUnit) and isinstance(self.unit, str):
            name = self.unit.strip().lower()
            name = name[:-1] if name.endswith("s") else name
            if name in {unit.value for unit in CalendarUnit}:
                object.__setattr__(self, "unit", CalendarUnit(name))

    def __str__(self) -> str:
        return f"{self.count} {self.unit}{'' if self.count == 1 else 's'}"

    @property
    def normalized(self) -> CalendarInterval:
        """The same interval with weeks counted as days (``1 week`` → ``7 days``): equal for
        any two ways of writing one interval. Display keeps the declared form."""
        if self.unit is CalendarUnit.WEEK:
            return CalendarInterval(self.count * 7, CalendarUnit.DAY)
        return self


class JobStatus(enum.StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class JobPause:
    """Why a job is paused (decision 0023): ``by`` who (an operator's name, ``duetime`` for
    pause on failure), ``note`` why, ``until`` when it resumes by itself (None: never)."""

    by: str | None = None
    note: str | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One entry of a job's lifecycle history: ``kind`` (``paused``, ``resumed``,
    ``paused_on_failure``, ``retired``, ``tzdata_recomputed``), ``actor`` who did it
    (``duetime`` when the system did), ``detail`` what it changed."""

    id: int
    job_id: uuid.UUID
    at: datetime
    kind: str
    actor: str
    detail: dict[str, JSON]


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
    BUFFER_ONE = "buffer_one"
    """One at a time; of the runs waiting meanwhile only the newest is kept (older ones are
    skipped ``superseded``)."""


class DeliveryMode(enum.StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"
    EXACTLY_ONCE = "exactly_once"


_HASH_TERM = re.compile(r"(?<![A-Z@])H(?![A-Z])", re.IGNORECASE)


def cron_uses_hash(cron: str | None) -> bool:
    """Whether a cron expression has a hashed value ``H`` (names such as ``THU`` do not count)."""
    return cron is not None and _HASH_TERM.search(cron) is not None


def job_hash_seed(tenant: str, name: str, cron: str | None) -> str | None:
    """What ``H`` hashes for a job: its tenant and name (joined by U+001F), or None when its
    schedule has no ``H`` (so equal expressions stay equal schedules)."""
    return f"{tenant}\x1f{name}" if cron_uses_hash(cron) else None


def enum_value(
    kind: type[E], value: object, field: str, wording: str = "{value} is not one of: {allowed}"
) -> E:
    """``kind(value)``; else ValidationError at ``field`` saying ``wording`` (``{value}``: the
    value's repr, ``{allowed}``: ``kind``'s values, comma-separated)."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(v.value) for v in kind)
        raise ValidationError(field, wording.format(value=repr(value), allowed=allowed)) from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job fires. Exactly the fields of its ``kind`` are set.

    - ``now``: one run at ``at`` (the registration instant).
    - ``at``: one run at ``at``.
    - ``cron``: ``cron`` expression evaluated in IANA zone ``tz``.
    - ``every``: ``anchor + k * every`` for k ≥ 0 (a fixed duration), or, with
      ``every_calendar`` instead, the anchor's wall time in ``tz`` stepped k calendar units.
    """

    kind: ScheduleKind
    cron: str | None = None
    tz: str = "UTC"
    at: datetime | None = None
    every: timedelta | None = None
    anchor: datetime | None = None
    every_calendar: CalendarInterval | None = None
    """An ``every`` in calendar units (then ``every`` is None)."""
    hash_seed: str | None = None
    """What ``H`` in a cron expression hashes (docs/fairness.md): a job's tenant and name, set
    when a job's schedule is built or read; None hashes the expression's own text."""

    @property
    def one_shot(self) -> bool:
        return self.kind in (ScheduleKind.NOW, ScheduleKind.AT)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one run. ``max_attempts`` counts the first try.

    Backoff before attempt n+1 is ``uniform(0, min(cap, base * factor**(n-1)))`` (full jitter).

    ``within`` (seconds, or a ``timedelta``): no retry is scheduled to start later than this
    long after the run's ``scheduled_for`` (after its replay, for a replayed run); the run goes
    dead (``retry_window_exhausted``) instead. ``permanent_on`` / ``retry_on``: exception
    classes (or their dotted names; builtins by bare name) that end the run at once, or that
    are retried even where duetime would not; the most specific class of the raised exception's
    MRO that either list names decides. ``permanent_on_status`` / ``retry_on_status``: the same
    for HTTP targets' response statuses (default: 408, 429 and 5xx retried, others permanent).
    See docs/delivery.md.
    """

    max_attempts: int = 3
    backoff_base: float = 1.0
    backoff_factor: float = 2.0
    backoff_cap: float = 600.0
    within: float | None = None
    permanent_on: tuple[str, ...] = ()
    retry_on: tuple[str, ...] = ()
    permanent_on_status: tuple[int, ...] = ()
    retry_on_status: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # convenient spellings made hashable and storable: a timedelta as seconds, lists as
        # tuples, exception classes as their dotted names; anything else is left for
        # registration to refuse with the field's name
        if isinstance(self.within, timedelta):
            object.__setattr__(self, "within", self.within.total_seconds())
        for name in ("permanent_on", "retry_on", "permanent_on_status", "retry_on_status"):
            value = getattr(self, name)
            if isinstance(value, list | tuple | set | frozenset):
                object.__setattr__(self, name, tuple(_class_name(v) for v in value))

    @property
    def has_rules(self) -> bool:
        """True when a window or a classification is set (the store keeps them apart)."""
        return bool(
            self.within is not None
            or self.permanent_on
            or self.retry_on
            or self.permanent_on_status
            or self.retry_on_status
        )


def _class_name(value: Any) -> Any:
    """An exception class as the name ``RetryPolicy`` keeps (``ValueError``,
    ``myapp.errors.Fatal``); any other value as it is."""
    if isinstance(value, type) and issubclass(value, BaseException):
        if value.__module__ == "builtins":
            return value.__qualname__
        return f"{value.__module__}.{value.__qualname__}"
    return value


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One fire instant of a schedule, for previews."""

    instant: datetime
    """UTC."""
    local: datetime
    """The same instant in the schedule's zone."""
    dst_note: str | None = None
    """Set when a DST change moved or doubled this occurrence (e.g. ``"moved from 02:30"``)."""
    calendar_note: str | None = None
    """Set when the job's calendars exclude it: ``skipped: calendar 'xmas' (Christmas Day)``
    or ``runs at 2026-12-28T12:00:00Z (next_business_day; calendar 'weekend': sat)``."""

    @property
    def note(self) -> str | None:
        """Its DST and calendar notes, joined (None: neither)."""
        notes = [n for n in (self.dst_note, self.calendar_note) if n]
        return "; ".join(notes) or None


# store.base.JobUpsertParams repeats most fields on purpose: a write's input, not a stored job.
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
    max_concurrency: int = 0
    """With overlap ``allow``: runs of this job (or key) at once, 0 = unlimited; the other
    policies run one at a time."""
    concurrency_key: str | None = None
    """Jobs sharing a key share one ``max_concurrency`` limit."""
    max_backfill: int = 100
    """With misfire policy ``backfill``: at most this many missed occurrences run."""
    sla: float | None = None
    """Seconds after each scheduled instant within which a run must succeed, else the leader
    raises a ``sla_missed`` alert; None: no SLA."""
    expected_duration: float | None = None
    """How long a run normally takes (seconds); a run running longer than this times the
    stuck factor is alerted. None: the p95 of the job's last 20 successful runs."""
    jitter: float = 0.0
    """Seconds (0 = none): each run becomes available up to this long after its scheduled
    instant, by a stable hash of (job, occurrence); ``scheduled_for`` never moves."""
    declared_delay: timedelta | None = None
    """A one-shot declared as a delay (``at=timedelta(hours=3)``): that delay. Declaring the
    job again with the same delay keeps its instant (``rearm=True`` re-arms it); None for an
    instant or any other schedule."""
    start_at: datetime | None = None
    """A recurring job's bounds (docs/api.md, "Bounds"): no occurrence before ``start_at``…"""
    end_at: datetime | None = None
    """… or after ``end_at`` fires; None: unbounded on that side."""
    max_runs: int | None = None
    """At most this many scheduled runs are created (manual triggers do not count); None:
    no limit."""
    runs_created: int = 0
    """The scheduled runs counted against ``max_runs`` so far (counted while it is set)."""
    replace_timeout: float = 30.0
    """With overlap ``replace``: seconds a replaced run gets to stop (its attempt recorded)
    before its successor starts anyway (decision 0016)."""
    max_waiting: int = 0
    """Runs that may wait for the job's overlap key while it is busy (``serialize``, or
    ``allow`` at its limit); a newer one due at the cap is skipped ``queue_full``. 0: no
    limit."""
    pause: JobPause | None = None
    """While paused: who paused it, why and until when (docs/api.md, "Pause notes")."""
    pause_after_dead: int | None = None
    """Pause on failure: this many consecutive dead runs pause the job; None: never."""
    declared_source: str | None = None
    """The ``app.sync`` source that declared the job (the only sync that may retire it)."""
    tzdata_version: str | None = None
    """The tzdata release ``next_fire_at`` was computed with (zoned cron and calendar jobs)."""
    calendars: tuple[str, ...] = ()
    """Names of the tenant's exclusion calendars (``schedules/calendars.py``): an occurrence
    one of them excludes is skipped (reason ``calendar:<name>``) or, with ``calendar_shift``,
    moved."""
    calendar_shift: str | None = None
    """``next_business_day`` / ``previous_business_day``: an excluded occurrence becomes
    available at the same wall time of the nearest day no calendar excludes; its run keeps the
    original occurrence as ``scheduled_for``. None: excluded occurrences are skipped."""
    next_occurrence_at: datetime | None = field(default=None, compare=False)
    """The earliest occurrence not fired yet, what "next fire" shows: the scheduler writes runs
    ahead of their instant and moves ``next_fire_at`` past them, so this is the earliest of
    those not started yet, else ``next_fire_at``. Read with the job (derived, never compared)."""
    created: bool = field(default=False, compare=False)
    """True on the job ``schedule`` returns when that call created it (False: it updated an
    existing job, or the job was read). Not part of the job's state: never compared."""

    @property
    def runs_left(self) -> int | None:
        """Scheduled runs ``max_runs`` still allows (0 when used up); None without a limit."""
        return None if self.max_runs is None else max(self.max_runs - self.runs_created, 0)


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
    progress: float | None = None
    """The latest ``ctx.progress`` fraction (0..1) of its attempts, None if never reported."""
    progress_message: str | None = None
    checkpoint: JSON = None
    """The latest ``ctx.checkpoint`` data; handed to the next attempt as ``ctx.last_checkpoint``."""
    cancel_requested: bool = False
    """A cancel was asked for while it was running; its worker sees it at the next heartbeat."""
    result: JSON = None
    """What the handler returned (JSON, within ``result_max_bytes``), once it succeeded."""
    origin: str | None = None
    """``backfill`` for a run a backfill created (``app.jobs.backfill``: never misfired);
    None for the scheduler's and manual runs."""


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
    traceback: str | None = None
    """A failed attempt's formatted exception (bounded, its end kept); ``None`` otherwise."""

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
    tenant: str | None = None
    """None: one of the installation's own workers (serves every tenant); a tenant name: that
    tenant's remote worker (``id`` is then its lease owner, ``tenant/worker_id``, unique only
    together with the tenant)."""


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
    """What an API key may do: ``viewer`` reads its tenant; ``operator`` also writes within it
    (remote workers included); ``admin`` also manages its tenant (keys, limits);
    ``superadmin`` manages the installation: acts on any tenant, mints any key."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
    SUPERADMIN = "superadmin"

    def allows(self, needed: ApiRole) -> bool:
        order = (ApiRole.VIEWER, ApiRole.OPERATOR, ApiRole.ADMIN, ApiRole.SUPERADMIN)
        return order.index(self) >= order.index(needed)


# api/schemas.py's KeyOut repeats these fields on purpose: the REST schema is declared apart.
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
class TenantLimits:
    """A tenant's fairness settings (docs/fairness.md): None means no limit."""

    tenant: str
    max_in_flight: int | None = None
    """Runs of the tenant running at once (claimed ahead or started), across all workers."""
    max_starts_per_second: float | None = None
    """Run starts per second across all workers (a token bucket of ``max(1, rate)`` starts)."""
    weight: int = 1
    """Its share of each claim relative to the other tenants with due runs."""
    max_backfill_runs: int | None = None
    """The most runs one backfill (``app.jobs.backfill``) may create."""
    max_jobs: int | None = None
    """Jobs the tenant may have registered (not cancelled) at once; None: no cap."""


@dataclass(frozen=True, slots=True)
class StoredCalendar:
    """A tenant's named exclusion calendar as stored: its rules in their JSON form
    (``schedules/calendars.py`` reads them)."""

    tenant: str
    name: str
    rules: list[dict[str, JSON]]
    description: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class TenantQueueStats:
    """What waits and what runs, for one tenant and queue (``AsyncApp.tenant_stats``)."""

    tenant: str
    queue: str
    due: int
    """Runs due (available now) and not claimed."""
    oldest_due_age: float
    """Seconds the oldest of them has been available (0 when none is due)."""
    in_flight: int
    """Runs claimed and not finished (claimed ahead or started)."""
    throttled: int
    """Due runs held back right now by the tenant's quota (its in-flight limit is reached or
    its start bucket is empty); 0 for a tenant without limits."""


@dataclass(frozen=True, slots=True)
class BreakerState:
    """A circuit breaker that is not closed, as a worker reports it (targets/breaker.py):
    ``key`` is ``http:<host>:<port>`` or ``command:<name>``; ``state`` ``open`` (runs wait
    until ``retry_at``) or ``half_open`` (one probe run is let through)."""

    worker_id: str
    key: str
    state: str
    failures: int
    """Consecutive failures that opened it (or kept it open)."""
    opened_at: datetime
    retry_at: datetime
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SecretRotation:
    """A tenant's webhook signing secret after a rotation: receivers accept ``secret`` now,
    and the previous one until ``previous_until`` (both signatures are sent meanwhile)."""

    tenant: str
    secret: str
    previous_until: datetime


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a keyset-paginated listing; ``next_cursor`` is None on the last page."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None
