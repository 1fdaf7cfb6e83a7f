"""The storage seam: one protocol every store implements, one small params object per method.

Contracts that hold for every store (the conformance suite in tests/store checks each one):

- Every state transition is one conditional write whose condition states the expected prior
  state and, from ``running``, the fencing token. A write that matches nothing changed nothing:
  "someone else won".
- Instants passed in and returned are timezone-aware UTC. ``now`` parameters default to the
  database clock (PostgreSQL ``clock_timestamp()``; SQLite shares the host clock).
- Runs are unique per (job, scheduled instant) and per (job, idempotency key); the database
  enforces it, so any number of schedulers may materialize at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

from duetime import _json
from duetime._audit import AuditEntry, AuditRecord
from duetime._monitoring import (
    AlertCondition,
    AlertFacts,
    ClusterStats,
    Incident,
    IncidentEvent,
    QueueDepth,
    Timeline,
)
from duetime._outbox import OutboxMessage, OutboxStore
from duetime._partitions import PartitionLeaseStore
from duetime._types import (
    JSON,
    ApiKey,
    ApiRole,
    Attempt,
    AttemptOutcome,
    BreakerState,
    DeliveryMode,
    Job,
    JobEvent,
    JobPause,
    JobStatus,
    Leadership,
    MisfirePolicy,
    NodeInfo,
    OverlapPolicy,
    Page,
    RetryPolicy,
    Run,
    RunState,
    Schedule,
    SecretRotation,
    StoredCalendar,
    TenantLimits,
    TenantQueueStats,
    WorkerInfo,
)
from duetime.workflows.definition import WorkflowRole
from duetime.workflows.protocol import WorkflowStore
from duetime.workflows.watch import WorkflowWatchStore

SCHEMA_VERSION = 29
"""The newest schema version this code knows; a database at a newer version is refused."""


# --- jobs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobUpsertParams:
    """Create a job, or update the one with the same (tenant, name).

    ``schedule`` is the resolved schedule (an ``every`` anchor filled in) and ``next_fire_at``
    its first instant; ``requested`` the schedule as declared. Plain data: registration
    (``duetime.registration.upsert_job``) decides, inside one :meth:`Store.transaction`,
    whether an existing job's schedule is equivalent to ``requested`` (kept, with its
    ``next_fire_at``) or replaced (its not-yet-started scheduled runs marked ``skipped``,
    reason ``schedule_changed``). ``create_only`` turns an existing name into
    :class:`~duetime.errors.Conflict`.
    """

    tenant: str
    name: str
    task: str
    payload: str
    """Already-encoded JSON."""
    schedule: Schedule
    next_fire_at: datetime | None
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
    job_id: uuid.UUID = field(default_factory=uuid.uuid4)
    create_only: bool = False
    target: dict[str, JSON] | None = None
    """A validated non-Python target (``{"type": "http", …}``); copied onto each run."""
    max_concurrency: int = 0
    """With overlap ``allow``: runs at once (0 = unlimited); other policies run one."""
    concurrency_key: str | None = None
    max_backfill: int = 100
    sla: float | None = None
    """Seconds after each scheduled instant within which a run must succeed (alerts)."""
    expected_duration: float | None = None
    jitter: float = 0.0
    """Seconds: each run is available up to this long after its instant (planner)."""
    requested: Schedule | None = None
    """The schedule as declared (None: ``schedule`` itself), which registration compares with
    a stored one."""
    declared_delay: timedelta | None = None
    """A one-shot declared as a delay: that delay, stored with the job, so that declaring it
    again with the same delay keeps its instant."""
    rearm: bool = False
    """Treat the schedule as changed even when it is declared unchanged (re-arm it)."""
    declared_at: datetime | None = None
    """The instant registration validated these params at (its clock's now): a changed
    schedule's first instant is computed from it (None: the transaction's instant)."""
    start_at: datetime | None = None
    """A recurring job's bounds (``Job.start_at``, ``end_at``, ``max_runs``); registration
    decides what a change of them does (``scheduler/bounds.py``)."""
    end_at: datetime | None = None
    max_runs: int | None = None
    replace_timeout: float = 30.0
    """With overlap ``replace``: seconds a replaced run gets to stop (``Job.replace_timeout``)."""
    max_waiting: int = 0
    """Runs that may wait for the overlap key while it is busy, 0 = no limit."""
    calendars: tuple[str, ...] = ()
    """Exclusion calendars the job names (checked to exist by the caller)."""
    calendar_shift: str | None = None
    tzdata_version: str | None = None
    """The tzdata release ``next_fire_at`` was computed with (registration sets it)."""


@dataclass(frozen=True, slots=True)
class JobRef:
    """A job by id or by name, always within a tenant."""

    tenant: str
    id: uuid.UUID | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class JobListParams:
    tenant: str
    status: JobStatus | None = None
    name_prefix: str | None = None
    tag: str | None = None
    limit: int = 100
    after_name: str | None = None
    """Keyset cursor: list names strictly after this one."""


@dataclass(frozen=True, slots=True)
class JobSetStatusParams:
    """Pause, resume or cancel. Allowed moves: active⇄paused, active|paused→cancelled.

    Pausing withdraws (deletes) the job's scheduled runs not yet due — their instant after
    ``withdraw_after``, default the transaction's instant — and never started, giving their
    count against ``max_runs`` back, and marks its other not-yet-started scheduled runs
    ``skipped`` (reason ``paused``); cancelling marks them ``cancelled``. Resuming recomputes
    ``next_fire_at`` (given) so the paused occurrences are not misfired. Raises Conflict for
    an illegal move.
    """

    job: JobRef
    status: JobStatus
    next_fire_at: datetime | None = None
    now: datetime | None = None
    withdraw_after: datetime | None = None
    pause: JobPause | None = None
    """Pausing: who, why, until when (pausing a paused job with one replaces its note)."""
    actor: str | None = None
    """Who made the move, for the job's history (``job_events``); default ``pause.by``."""
    event: str | None = None
    """The history entry's kind; default the new status's (``paused``, ``resumed``, …). A
    move with its own kind (duetime's, a sync's) leaves a pause already in place as it is."""
    tzdata_version: str | None = None
    """Resuming: the tzdata release ``next_fire_at`` was computed with (None keeps it)."""
    expect_until: datetime | None = None
    """Only if the job's pause still ends at this instant (the auto-resume's guard against a
    pause changed since it read the job); else the job is returned unchanged."""


@dataclass(frozen=True, slots=True)
class JobTzRecomputeParams:
    """A job's next instant recomputed with a newer tzdata release (decision 0023): written
    only while the job is active and its release is still ``expect_version``."""

    tenant: str
    job_id: uuid.UUID
    expect_version: str | None
    version: str
    next_fire_at: datetime | None
    now: datetime | None = None


# --- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlannedRun:
    scheduled_for: datetime
    available_at: datetime
    shifted: bool = False
    """Moved by a calendar shift: its misfire deadline counts from ``available_at``."""
    origin: str | None = None
    """``backfill``: created by a backfill (no misfire deadline)."""


@dataclass(frozen=True, slots=True)
class PlannedSkip:
    first: datetime
    last: datetime
    count: int
    reason: str


@dataclass(frozen=True, slots=True)
class JobPlan:
    """What the scheduler decided for one due job: runs to insert, skips to record, and the
    job's next ``next_fire_at`` (None when it has no further occurrence)."""

    runs: list[PlannedRun]
    skips: list[PlannedSkip]
    next_fire_at: datetime | None
    complete: bool = False
    """The job has no occurrence left within its bounds: it becomes ``completed``."""


@dataclass(frozen=True, slots=True)
class JobsDueParams:
    """:meth:`StoreTx.jobs_lock_due`: up to ``limit`` active jobs with ``next_fire_at <=
    until`` whose partition key is in ``partitions`` (inclusive; None = all)."""

    until: datetime
    limit: int = 500
    partitions: tuple[int, int] | None = None
    owner: str | None = None
    """A node serving leased partitions: only those whose lease it holds (the fence)."""


@dataclass(frozen=True, slots=True)
class PlainBatch:
    """What :meth:`StoreTx.runs_materialize_plain` did: ``jobs`` plain one-shot jobs taken
    and advanced, and the runs it made counted by ``(tenant, task, scheduled_for, count)``."""

    jobs: int
    made: tuple[tuple[str, str, datetime, int], ...] = ()

    @property
    def runs(self) -> int:
        return sum(m[3] for m in self.made)


@dataclass(frozen=True, slots=True)
class RunTriggerParams:
    """Create a manual run of a job now (works on a paused job; Conflict on cancelled).

    With ``idempotency_key`` a repeat returns the first run (``created=False``); the same key
    with a different ``request_hash`` is a Conflict."""

    job: JobRef
    payload: str | None = None
    """Encoded JSON overriding the job's payload for this run."""
    priority: int | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class RunsClaimParams:
    """Atomically claim up to ``limit`` scheduled runs of ``tasks`` whose ``available_at <=
    now + lookahead``: each becomes ``running`` with its token incremented, ``attempt``
    incremented and a lease ``(worker_id, now + lease_ttl)``. A run already due is started
    at once (``started_at = now``); one claimed ahead has ``started_at`` NULL until
    :meth:`Store.run_start`.

    Which runs, in which order (docs/fairness.md, store/_fairness.py): the batch is shared
    among the tenants with due runs (rounds by tenant weight), each tenant's runs taken by
    priority with aging (``priority_aging`` seconds per step, up to priority
    ``priority_aging_cap``; 0 s turns aging off). A tenant's quotas (``max_in_flight``,
    ``max_starts_per_second``) and overlap keys are applied atomically across all claimers; a
    rate-limited tenant's runs are claimed only once due."""

    worker_id: str
    tasks: Sequence[str]
    limit: int
    lease_ttl: float
    lookahead: float
    now: datetime | None = None
    tenant: str | None = None
    """Only runs of this tenant (remote workers act for one tenant); None: every tenant."""
    queues: Sequence[str] | None = None
    """Only runs of these queues (a worker pool); None: every queue."""
    priority_aging: float = 60.0
    priority_aging_cap: int = 1000


@dataclass(frozen=True, slots=True)
class RunsMisfireParams:
    """Judge misfires at claim time: never-attempted scheduled runs older than their job's
    ``misfire_grace`` become ``skipped`` (reason ``misfire_<policy>``) — all of them under
    ``skip``, all but the latest due one under ``fire_once``, none under ``backfill``."""

    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    run: Run
    timeout: float | None
    retry: RetryPolicy
    delivery: DeliveryMode
    one_shot: bool
    retry_from: datetime | None = None
    """Where the retry window (``retry.within``) counts from: the run's last replay; None for
    a run never replayed (its window counts from ``scheduled_for``)."""

    @property
    def window_from(self) -> datetime:
        """The start of the run's retry window (``retry_from`` or ``scheduled_for``)."""
        return self.retry_from or self.run.scheduled_for

    def retry_window_over(self, at: datetime) -> bool:
        """Whether a retry starting at ``at`` would start past the run's retry window."""
        within = self.retry.within
        return within is not None and at > self.window_from + timedelta(seconds=within)


@dataclass(frozen=True, slots=True)
class RunStartParams:
    """Mark a claimed-ahead run as started, fenced by token, only while its lease has not
    lapsed and its job may still run (active, or the run is a manual trigger); the lease is
    renewed for ``lease_ttl`` seconds when given. Returns False when it must not start."""

    run_id: uuid.UUID
    token: int
    now: datetime | None = None
    lease_ttl: float | None = None


@dataclass(frozen=True, slots=True)
class RunsStartParams:
    """Start a batch of claimed-ahead ``runs`` ((id, token) pairs) in one transaction: each
    exactly as :class:`RunStartParams` would — fenced by token, only while still ``running``,
    not yet started, its lease not lapsed and its job able to run (active or completed, or
    paused and the run is a manual trigger), judged by its overlap policy when it has an
    overlap key (it may be skipped, deferred, or replace the key's running runs); the lease is
    renewed for ``lease_ttl`` seconds when given. Returns the ids of the runs that started."""

    runs: Sequence[tuple[uuid.UUID, int]]
    now: datetime | None = None
    lease_ttl: float | None = None


@dataclass(frozen=True, slots=True)
class RunsHeartbeatParams:
    """Extend the leases of ``runs`` ((id, token) pairs) held by ``worker_id``."""

    worker_id: str
    runs: Sequence[tuple[uuid.UUID, int]]
    lease_ttl: float
    now: datetime | None = None
    tenant: str | None = None
    """Only runs of this tenant (a remote worker's lease is (tenant, worker_id), never the
    worker id alone); None: any tenant (the installation's own workers)."""


@dataclass(frozen=True, slots=True)
class RunCompletion:
    """The fenced end of one attempt. Applied only if the run is still ``running`` with
    ``token``; otherwise the attempt is recorded ``stale`` and the run is left as it is."""

    run_id: uuid.UUID
    token: int
    worker_id: str
    attempt: int
    claimed_at: datetime
    started_at: datetime | None
    outcome: AttemptOutcome
    next_state: RunState
    """``succeeded``, ``dead``, ``cancelled``, or ``scheduled`` (a retry)."""
    available_at: datetime | None = None
    """For a retry: when the run is due again."""
    reason: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    """A failed attempt's formatted exception, bounded by the worker (its end kept); ``None``
    for successes."""
    completes_job: bool = False
    """A one-shot job's scheduled run ended: mark the job ``completed``."""
    refund_attempt: bool = False
    """The attempt never started (handed back at shutdown): it does not count against
    ``max_attempts``."""
    result: str | None = None
    """The handler's return value as JSON text (None: nothing to keep), stored on the run."""
    workflow: WorkflowRole | None = None
    """A workflow start run (``start``) or step run (``step``): its end is planned in the
    completion's transaction (``store/_sql_workflows.py``)."""
    outbox: OutboxMessage | None = None
    """A succeeded broker run's message: inserted into the outbox in the transaction that
    applies this completion, and only if it applies (``store/_sql_outbox.py``)."""


@dataclass(frozen=True, slots=True)
class RunsCompleteParams:
    completions: Sequence[RunCompletion]
    now: datetime | None = None
    tenant: str | None = None
    """Only runs of this tenant (a remote worker): a completion of another tenant's run is
    neither applied nor recorded (its answer is False); None: any tenant."""


@dataclass(frozen=True, slots=True)
class LeaderFence:
    """A leader-only write happens only while ``node_id`` holds an unexpired ``term``."""

    node_id: str
    term: int


@dataclass(frozen=True, slots=True)
class LeasesReapParams:
    """Runs whose lease expired: their attempt is recorded ``lost`` and the token bumped; the
    run goes back to ``scheduled`` (available now) or, out of attempts or ``at_most_once``,
    to ``dead``. With ``leader`` set, nothing happens unless that term still leads."""

    limit: int = 1000
    now: datetime | None = None
    leader: LeaderFence | None = None


@dataclass(frozen=True, slots=True)
class LeaderElectParams:
    """Take the leadership if it is free or expired, or renew ours, for ``ttl`` seconds."""

    node_id: str
    ttl: float
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class HistoryPruneParams:
    """Delete up to ``limit`` finished runs (with their attempts) that ended before ``before``,
    and skip records created before it. Leader-only when ``leader`` is set."""

    before: datetime
    limit: int = 1000
    leader: LeaderFence | None = None


@dataclass(frozen=True, slots=True)
class AttemptPartitionsParams:
    """Keep the weekly attempt partitions: create the weeks from the one holding ``now``
    (None: the database clock) to ``ahead`` weeks later, drop every week that ended at or
    before ``before`` (the retention cut). Leader-only when ``leader`` is set."""

    before: datetime
    now: datetime | None = None
    ahead: int = 2
    leader: LeaderFence | None = None


@dataclass(frozen=True, slots=True)
class AttemptPartitionsChange:
    created: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    kept: int = 0
    """Attempts of the dropped weeks kept in the default partition: their run is live or a
    dead letter, or they ended at or after the cut."""


@dataclass(frozen=True, slots=True)
class ReapResult:
    rescheduled: int
    dead: int
    reaped: tuple[tuple[str, str, str], ...] = ()
    """(tenant, task, next state) of each reaped run, for metrics."""


@dataclass(frozen=True, slots=True)
class RunListParams:
    tenant: str
    job_id: uuid.UUID | None = None
    state: RunState | None = None
    limit: int = 100
    before: tuple[datetime, uuid.UUID] | None = None
    """Keyset cursor: (scheduled_for, id) of the last item of the previous page."""
    task: str | None = None
    """Only runs of this task."""
    since: datetime | None = None
    """Only runs scheduled at or after this instant."""
    until: datetime | None = None
    """Only runs scheduled before this instant."""

    @staticmethod
    def before_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
        """The ``before`` a runs page's ``next_cursor`` (``<µs since the epoch>.<run id>``)
        stands for. Raises ValueError for text no store returned."""
        micros, run_id = cursor.split(".", 1)
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        return epoch + timedelta(microseconds=int(micros)), uuid.UUID(run_id)

    @staticmethod
    def cursor_of(at: datetime, item_id: uuid.UUID) -> str:
        """The cursor :meth:`before_cursor` reads back."""
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        return f"{(at - epoch) // timedelta(microseconds=1)}.{item_id}"


@dataclass(frozen=True, slots=True)
class AuditListParams:
    """A tenant's audit records, newest first, filtered (each None: any); ``subject`` matches
    the subject's id or name; ``since`` inclusive, ``until`` exclusive (docs/decisions/0021)."""

    tenant: str
    actor: str | None = None
    action: str | None = None
    subject: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 100
    before: tuple[datetime, uuid.UUID] | None = None
    """Keyset cursor: (at, id) of the last record of the previous page."""

    @staticmethod
    def cursor_of(at: datetime, record_id: uuid.UUID) -> str:
        return RunListParams.cursor_of(at, record_id)

    @staticmethod
    def before_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
        """The ``before`` a page's ``next_cursor`` stands for; ValueError for other text."""
        return RunListParams.before_cursor(cursor)


@dataclass(frozen=True, slots=True)
class AuditPruneParams:
    """Delete up to ``limit`` audit records older than ``before`` (retention: the only delete
    of the trail). Leader-only when ``leader`` is set."""

    before: datetime
    limit: int = 1000
    leader: LeaderFence | None = None


@dataclass(frozen=True, slots=True)
class RunReplayParams:
    """Dead → scheduled with a fresh attempt budget of ``max_attempts`` (recorded in
    ``replays``). ``run_ids`` None replays every dead run of the tenant (optionally of one
    job), up to ``limit``."""

    tenant: str
    run_ids: Sequence[uuid.UUID] | None = None
    job_id: uuid.UUID | None = None
    max_attempts: int | None = None
    """None: the job's own max_attempts."""
    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class RunCancelParams:
    tenant: str
    run_id: uuid.UUID
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class RunIdPrefixParams:
    """The runs of ``tenant`` whose id begins with ``prefix``: 8 to 32 lowercase hex digits,
    the dashes of the id's text form left out (``abcd1234`` or ``abcd1234ef``), in id order, at
    most ``limit``. The store reads the id range ``low``…``high`` (the primary key's index).
    Raises ValueError for any other ``prefix``."""

    tenant: str
    prefix: str
    limit: int = 10

    def __post_init__(self) -> None:
        if not 8 <= len(self.prefix) <= 32 or self.prefix.strip("0123456789abcdef"):
            raise ValueError(f"not 8 to 32 lowercase hex digits: {self.prefix[:40]!r}")

    @property
    def low(self) -> uuid.UUID:
        """The smallest id with the prefix (``abcd1234-0000-0000-0000-000000000000``)."""
        return uuid.UUID(self.prefix.ljust(32, "0"))

    @property
    def high(self) -> uuid.UUID:
        """The largest id with the prefix (``abcd1234-ffff-ffff-ffff-ffffffffffff``)."""
        return uuid.UUID(self.prefix.ljust(32, "f"))


# --- long runs and exactly-once delivery ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunProgressParams:
    """Record an attempt's progress (``fraction`` 0..1, optional message), fenced: applied only
    while the run is ``running`` with ``token``."""

    run_id: uuid.UUID
    token: int
    fraction: float
    message: str | None = None


@dataclass(frozen=True, slots=True)
class RunCheckpointParams:
    """Store an attempt's checkpoint (already-encoded JSON), fenced like a completion; the next
    attempt of the run receives it (``Run.checkpoint``)."""

    run_id: uuid.UUID
    token: int
    checkpoint: str


class ExactlyOnceTx(Protocol):
    """One open transaction on the run's own database, for an exactly-once attempt: the
    handler's writes (through :meth:`block`) and the attempt's fenced completion commit
    together, or not at all. Close it with exactly one :meth:`complete` or :meth:`rollback`."""

    @property
    def connection(self) -> Any:
        """The driver connection (PostgreSQL: a psycopg ``AsyncConnection``) in the open
        transaction."""
        ...

    def block(self) -> AbstractAsyncContextManager[Any]:
        """A savepoint inside the transaction, yielding the connection: an exception leaving
        the block undoes the block's writes (and propagates); the rest stays pending."""
        ...

    async def complete(self, completion: RunCompletion) -> bool:
        """Write ``completion`` (the fenced update and the attempt record of
        :meth:`Store.runs_complete`) in this transaction and commit: True. If the fenced write
        matches nothing, roll everything back and record the attempt ``stale``: False. An
        exception (the commit failed) leaves the outcome unknown: the caller re-submits the
        completion through :meth:`Store.runs_complete`, which then tells."""
        ...

    async def rollback(self) -> None:
        """Undo the handler's writes and release the connection; never raises."""
        ...


# --- bulk -------------------------------------------------------------------------------------


class BulkJob(NamedTuple):
    """One job of a bulk insert: its own identity, payload and schedule, and everything else
    (task, retry, queue, policies …) from ``shape``, a validated job that many share. Only the
    fields named here are read per job; ``shape``'s own name, payload, metadata, schedule, id
    and partition are ignored."""

    shape: JobUpsertParams
    job_id: uuid.UUID
    name: str
    payload: str
    """Already-encoded JSON."""
    metadata: str
    """Already-encoded JSON object."""
    schedule: Schedule
    next_fire_at: datetime | None
    partition: int

    @classmethod
    def of(cls, params: JobUpsertParams) -> BulkJob:
        """The bulk form of one validated job (its own shape)."""
        return cls(
            params,
            params.job_id,
            params.name,
            params.payload,
            _json.dumps(params.metadata),
            params.schedule,
            params.next_fire_at,
            params.partition,
        )


@dataclass(frozen=True, slots=True)
class JobsInsertManyParams:
    """Create many jobs in one transaction (the bulk registration path).

    A job whose (tenant, name) already exists — in the database or earlier in ``jobs`` — is
    left as it is: bulk registration only creates. PostgreSQL streams the rows with COPY;
    SQLite uses one ``executemany``."""

    jobs: Sequence[BulkJob]
    now: datetime | None = None
    """``created_at``/``updated_at`` of the new jobs; default: the store's clock."""
    expect_new: bool = False
    """A hint that no name exists yet: PostgreSQL then copies straight into ``jobs`` and, if a
    name does exist after all, redoes the batch through a staging table (the result is the
    same either way; a wrong hint costs one batch twice)."""


# --- tenants ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TenantLimitsSetParams:
    """Set some of a tenant's limits; ``None`` leaves a field as it is. ``max_in_flight`` 0 and
    ``max_starts_per_second`` 0 remove that limit. The start bucket keeps its tokens (capped at
    the new rate's capacity on its next use)."""

    tenant: str
    max_in_flight: int | None = None
    max_starts_per_second: float | None = None
    weight: int | None = None
    max_jobs: int | None = None
    """Cap on registered jobs; 0 removes it (decision 0023)."""
    max_backfill_runs: int | None = None
    """0 removes the cap."""
    now: datetime | None = None


# --- calendars --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CalendarPutParams:
    """Create or replace a tenant's calendar (rules validated by the caller, in JSON form)."""

    tenant: str
    name: str
    rules: list[dict[str, JSON]]
    description: str = ""
    now: datetime | None = None


# --- api keys ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApiKeyCreateParams:
    """Store a new key. Only the SHA-256 hex digest of its secret is kept (``key_hash``,
    unique) and its first characters (``prefix``) to recognise it."""

    tenant: str
    role: ApiRole
    name: str
    prefix: str
    key_hash: str
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ApiKeyListParams:
    tenant: str | None = None
    """None: the keys of every tenant."""
    include_revoked: bool = True


@dataclass(frozen=True, slots=True)
class ApiKeyRevokeParams:
    """Revoke a key (idempotent: a revoked key keeps its first ``revoked_at``). NotFound
    unless it exists (within ``tenant``, when given)."""

    id: uuid.UUID
    tenant: str | None = None
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ApiKeyTouchParams:
    """Record that a key was used, at most once per ``every`` seconds (one write per key per
    interval, not one per request)."""

    id: uuid.UUID
    every: float = 60.0
    now: datetime | None = None


# --- observability (metrics gauges, dashboard, alerts) --------------------------------------------


@dataclass(frozen=True, slots=True)
class StatsParams:
    """Read the cluster's queues at ``now``; workers and nodes that heartbeated after
    ``live_after`` count as live."""

    live_after: datetime
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class TimelineParams:
    """A tenant's activity since ``since`` in buckets of ``step`` seconds (runs by the
    instant they finished, attempts by the instant they ended)."""

    tenant: str
    since: datetime
    step: float
    buckets: int


@dataclass(frozen=True, slots=True)
class AlertFactsParams:
    """What the alert evaluator reads, at ``now``:

    - dead runs that finished after ``dead_since``, and the runs of ``dead_ids`` still dead;
    - every active job with an SLA (up to ``limit``), and the jobs of ``sla_ids`` whatever
      their state;
    - running runs started before ``running_before``, runs of ``running_ids``, and runs not
      finished with at least ``lost_leases`` lost attempts since ``dead_since``, each with the
      durations of its job's last 20 successful runs;
    - the cluster stats (workers live after ``live_after``)."""

    dead_since: datetime
    running_before: datetime
    live_after: datetime
    lost_leases: int = 2
    dead_ids: Sequence[uuid.UUID] = ()
    sla_ids: Sequence[uuid.UUID] = ()
    running_ids: Sequence[uuid.UUID] = ()
    limit: int = 1000
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class IncidentsApplyParams:
    """Open an incident for each condition that has none open for its (kind, tenant, subject), and
    resolve the open incidents ``resolve`` ((id, resolution) pairs) — leader-fenced."""

    open: Sequence[AlertCondition] = ()
    resolve: Sequence[tuple[uuid.UUID, str]] = ()
    leader: LeaderFence | None = None
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class IncidentsApplied:
    opened: list[Incident]
    resolved: list[Incident]
    led: bool = True
    """False when ``leader`` no longer led: nothing was written."""


@dataclass(frozen=True, slots=True)
class IncidentListParams:
    """Incidents, newest first. ``firing``: True open ones only, False resolved ones only;
    ``tenants``: only incidents of these tenants (None: every one; cluster-wide incidents have
    no tenant and match ``None`` in the tuple)."""

    firing: bool | None = None
    tenants: tuple[str | None, ...] | None = None
    unsent_before: datetime | None = None
    """Only incidents with a message to deliver whose next try is due by this instant."""
    limit: int = 100


@dataclass(frozen=True, slots=True)
class IncidentDeliveryParams:
    """Record a delivery try of ``incident``'s pending ``event``: the webhooks that took it so
    far (``delivered``); when ``done``, the message is marked sent. Applied only while that
    event is still the pending one (so two leaders cannot mark it twice)."""

    incident_id: uuid.UUID
    event: IncidentEvent
    delivered: Sequence[str]
    done: bool
    error: str | None = None
    next_try_at: datetime | None = None
    now: datetime | None = None


# --- the protocol -----------------------------------------------------------------------------


class StoreTx(Protocol):
    """The unit of work :meth:`Store.transaction` yields: fine-grained reads and writes in one
    write transaction, for a service that decides between them — the materializer asks its
    planner what each locked job owes (``scheduler/materializer.py``), registration compares
    a declared schedule with the stored one (``registration.upsert_job``). The store only
    stores: nothing here calls back into the caller. Rows read through it stay locked until
    the transaction ends (PostgreSQL ``FOR UPDATE``; SQLite holds the whole database with
    ``BEGIN IMMEDIATE``). Committed when the ``async with`` block ends, rolled back if it
    raises."""

    async def now(self, now: datetime | None = None) -> datetime:
        """The transaction's instant: ``now`` if given, else the store's clock (the database's
        on PostgreSQL unless a test clock is set), read once; every write here stamps it."""
        ...

    async def jobs_lock_due(self, params: JobsDueParams) -> list[Job]:
        """Lock up to ``limit`` due active jobs, skipping those another scheduler holds."""
        ...

    async def runs_materialize_plain(
        self, params: JobsDueParams, tzdata_version: str | None = None
    ) -> PlainBatch:
        """The set path (docs/decisions/0038): lock up to ``limit`` due *plain* one-shot jobs
        (no calendar, jitter, bounds, workflow or ``replace``; not missed), skipping those
        another scheduler holds, insert the one run each owes (an existing occurrence is left
        alone) and advance them past it — in the database, no job read. Fenced by the
        partition leases as :meth:`jobs_lock_due`. Announces new runs with the commit."""
        ...

    async def job_lock(self, ref: JobRef) -> Job | None:
        """The job, locked until the transaction ends; None if there is none."""
        ...

    async def job_insert(self, params: JobUpsertParams) -> Job | None:
        """Create the job; None if its (tenant, name) is taken (nothing written). A new name
        past its tenant's ``max_jobs`` raises JobCapReached (the capped tenant's row is locked
        until the transaction ends, so concurrent registrations count in turn)."""
        ...

    async def job_update(
        self,
        params: JobUpsertParams,
        job: Job,
        *,
        schedule: Schedule,
        next_fire_at: datetime | None,
        status: JobStatus,
    ) -> Job:
        """Rewrite a locked job from ``params`` with the schedule, next fire instant and
        status the caller decided."""
        ...

    async def jobs_advance(
        self,
        advances: Sequence[tuple[uuid.UUID, datetime | None]],
        tzdata_version: str | None = None,
    ) -> None:
        """Set each job's ``next_fire_at`` (one statement), computed with the tzdata release
        ``tzdata_version`` (recorded; None keeps each job's)."""
        ...

    async def job_last_occurrence(self, job_id: uuid.UUID) -> datetime | None:
        """The latest occurrence (``scheduled_for``) of the job's scheduled runs that fired:
        every one but those skipped for a schedule change; None if there is none."""
        ...

    async def runs_end_pending(
        self,
        job_id: uuid.UUID,
        state: RunState,
        reason: str,
        *,
        include_manual: bool,
        after: datetime | None = None,
    ) -> int:
        """End the job's not-yet-started runs as ``state`` (token bumped: fences workers).
        Without ``include_manual``, its scheduled runs whose instant is after ``after``
        (default: the transaction's instant) and that never started are withdrawn instead:
        deleted, their count against ``max_runs`` given back. Returns how many runs."""
        ...

    async def runs_insert_planned(self, runs: Sequence[tuple[Job, PlannedRun]]) -> int:
        """Insert planned runs (one statement; an existing occurrence is left alone) and
        announce them with the commit; returns how many were new."""
        ...

    async def skips_insert(self, skips: Sequence[tuple[uuid.UUID, PlannedSkip]]) -> int:
        """Record skipped occurrences of each job (one statement)."""
        ...

    async def calendars_for(self, keys: Sequence[tuple[str, str]]) -> list[StoredCalendar]:
        """The calendars of ``keys`` ((tenant, name) pairs) that exist (one statement)."""
        ...

    async def runs_insert_counted(
        self, runs: Sequence[tuple[Job, PlannedRun]]
    ) -> dict[uuid.UUID, int]:
        """:meth:`runs_insert_planned`, answering how many runs were new per job id."""
        ...

    async def jobs_count_runs(self, counts: Sequence[tuple[uuid.UUID, int, bool]]) -> None:
        """Bounded jobs after a materialization (one statement): each ``(job id, runs created,
        complete)`` adds the runs to the job's ``runs_created``; an active job that is flagged,
        or whose count reached its ``max_runs``, becomes ``completed`` (no next fire)."""
        ...

    async def runs_end_outside(
        self,
        job_id: uuid.UUID,
        start_at: datetime | None,
        end_at: datetime | None,
        *,
        after: datetime | None = None,
    ) -> int:
        """End the job's not-yet-started scheduled runs before ``start_at`` or after
        ``end_at``: those not yet due (their instant after ``after``, default the
        transaction's instant) are withdrawn (deleted; they no longer count against its
        ``max_runs``), the others skipped (reason ``out_of_bounds``, token bumped). Returns
        how many."""
        ...


class Store(WorkflowStore, WorkflowWatchStore, OutboxStore, PartitionLeaseStore, Protocol):
    """Everything duetime keeps. Implementations: SQLiteStore, PostgresStore."""

    dialect: str
    transient_errors: tuple[type[BaseException], ...]
    """Errors that mean "the database is unreachable right now" (connection lost, server
    restarting, file locked): callers pause and retry with backoff."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def migrate(self, *, alive_within: float = 60.0) -> int:
        """Apply pending migrations; return the schema version. Idempotent, safe concurrently.

        A migration that needs the previous release stopped (``-- requires: nodes stopped``)
        raises :class:`~duetime.errors.NodesStillRunning` while a process heartbeated within
        ``alive_within`` seconds (the settings' ``worker_stale_after``)."""
        ...

    async def schema_version(self) -> int | None:
        """The applied schema version; None on an empty database."""
        ...

    async def runs_partition_by_key(self, count: int, *, alive_within: float = 60.0) -> bool:
        """PostgreSQL: partition ``runs`` into ``count`` by job partition key, offline (the
        opt-in layout of docs/decisions/0033; NodesStillRunning like :meth:`migrate`); False
        if it already is. SQLite: SchemaError (it has no partitioned layout)."""
        ...

    async def check_schema(self) -> None:
        """Raise SchemaError unless the schema is exactly at :data:`SCHEMA_VERSION`."""
        ...

    async def db_now(self) -> datetime: ...
    async def wait_for_runs(self, timeout: float) -> bool:
        """Wait for news of new due runs (PostgreSQL NOTIFY; SQLite: this process's own
        writes) or ``timeout``. Callers poll again either way; True means "news came"."""
        ...

    async def wait_for_outbox(self, timeout: float) -> bool:
        """Wait for news of outbox rows committed by another process (PostgreSQL NOTIFY
        ``duetime_outbox``; SQLite: none) or ``timeout``. The relay claims again either way;
        True means "news came"."""
        ...

    async def wait_for_cancels(
        self, epoch: int, timeout: float
    ) -> tuple[int, frozenset[uuid.UUID] | None]:
        """Wait for news of running runs asked to stop (overlap ``replace``; PostgreSQL
        NOTIFY, SQLite this process's own writes) announced after ``epoch`` (start from 0), or
        ``timeout``: the epoch now and the runs' ids (empty: none; None: some may have gone
        unheard, check every run). See store/cancel_news.py."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[StoreTx]:
        """A unit of work (:class:`StoreTx`): ``async with store.transaction() as tx:``."""
        ...

    async def enlist(self, connection: object) -> Store:
        """This store's statements on the caller's own connection, inside its transaction
        (transactional enqueue, PostgreSQL only): a psycopg 3 connection or a SQLAlchemy 2
        session on it; the store commits nothing, the caller's commit does
        (``store/postgres/enlisted.py``). UsageError for another kind of connection;
        :class:`~duetime.errors.UnsupportedFeature` on SQLite."""
        ...

    # jobs (created and updated through a transaction: ``registration.upsert_job``)
    async def job_get(self, ref: JobRef) -> Job: ...
    async def job_list(self, params: JobListParams) -> Page[Job]: ...
    async def job_set_status(self, params: JobSetStatusParams) -> Job: ...
    async def job_delete(self, ref: JobRef) -> None: ...

    # a job's lifecycle (store/_sql_lifecycle.py, decision 0023): history, auto-resume and
    # pause on failure (read by the leader's pass, applied through job_set_status), declared
    # jobs of app.sync
    async def job_events_list(
        self, ref: JobRef, *, limit: int = 50, before: int | None = None
    ) -> list[JobEvent]: ...
    async def jobs_pause_due(self, now: datetime | None = None, limit: int = 100) -> list[Job]: ...
    async def jobs_failing(self, limit: int = 100) -> list[tuple[Job, int]]: ...
    async def jobs_paused_on_failure(self, limit: int = 1000) -> list[Job]: ...
    async def job_pause_on_failure_set(
        self, ref: JobRef, after: int | None, now: datetime | None = None
    ) -> Job: ...
    async def jobs_declared(self, tenant: str, source: str) -> list[Job]: ...
    async def jobs_tz_stale(
        self, version: str, *, after_id: uuid.UUID | None = None, limit: int = 500
    ) -> list[Job]: ...
    async def job_tz_recompute(self, params: JobTzRecomputeParams) -> bool: ...
    async def jobs_declare(self, tenant: str, source: str, names: Sequence[str]) -> int: ...

    # bulk
    async def jobs_insert_many(self, params: JobsInsertManyParams) -> int:
        """Insert the jobs whose names are new; return how many were inserted."""
        ...

    # runs
    async def run_trigger(self, params: RunTriggerParams) -> tuple[Run, bool]: ...
    async def runs_claim(self, params: RunsClaimParams) -> list[ClaimedRun]: ...
    async def runs_misfire(self, params: RunsMisfireParams) -> list[str]:
        """Returns the job name of each run skipped as misfired (a job's name once per run)."""
        ...

    async def run_start(self, params: RunStartParams) -> bool: ...
    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        """The ids of the runs that started; the others must not run (see RunsStartParams)."""
        ...

    async def runs_heartbeat(self, params: RunsHeartbeatParams) -> set[uuid.UUID]:
        """Returns the ids the worker still holds (same token, running, its lease); the rest
        were lost. Their leases are extended, but a store may leave a run whose row another
        statement has locked at that moment (a start or completion under way) for the next
        heartbeat rather than wait for it: a heartbeat never blocks, so never deadlocks."""
        ...

    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]:
        """One flag per completion, in order: True if applied, False if recorded stale."""
        ...

    async def leases_reap(self, params: LeasesReapParams) -> ReapResult: ...
    async def run_get(self, tenant: str, run_id: uuid.UUID) -> Run: ...
    async def run_get_claimed(self, tenant: str, run_id: uuid.UUID) -> ClaimedRun:
        """The run with what executing and completing it needs (retry policy, timeout,
        delivery, one-shot): for remote workers, which complete over HTTP. NotFound."""
        ...

    async def runs_list(self, params: RunListParams) -> Page[Run]: ...
    async def attempts_list(self, tenant: str, run_id: uuid.UUID) -> list[Attempt]: ...
    async def runs_replay(self, params: RunReplayParams) -> list[uuid.UUID]: ...
    async def run_cancel(self, params: RunCancelParams) -> Run: ...
    async def runs_by_id_prefix(self, params: RunIdPrefixParams) -> list[Run]:
        """The tenant's runs whose id begins with ``params.prefix``, in id order, at most
        ``params.limit`` (ask for one more than you show to know there are more)."""
        ...

    async def skips_list(self, tenant: str, job_id: uuid.UUID) -> list[PlannedSkip]: ...

    # calendars (issue 24; store/_sql_calendars.py)
    async def calendar_put(self, params: CalendarPutParams) -> StoredCalendar:
        """Create the calendar or replace its rules and description (idempotent)."""
        ...

    async def calendar_get(self, tenant: str, name: str) -> StoredCalendar:
        """NotFound if the tenant has no calendar of that name."""
        ...

    async def calendars_list(self, tenant: str) -> list[StoredCalendar]:
        """By name."""
        ...

    async def calendars_by_key(
        self, keys: Sequence[tuple[str, str]], conn: Any = None
    ) -> list[StoredCalendar]:
        """The calendars of ``keys`` ((tenant, name) pairs) that exist."""
        ...

    async def calendar_delete(self, tenant: str, name: str) -> None:
        """Conflict while a job names it (in one transaction with the delete); NotFound."""
        ...

    async def runs_occurrences(
        self, job_id: uuid.UUID, since: datetime, until: datetime
    ) -> set[datetime]:
        """The instants of the job's scheduled (not triggered) runs in ``since``…``until``
        (both included): the occurrences a backfill would find taken."""
        ...

    async def runs_origin_states(
        self, tenant: str, job_id: uuid.UUID, origin: str
    ) -> dict[str, int]:
        """How many of the job's runs of ``origin`` (``backfill``) are in each state."""
        ...

    # long runs and exactly-once delivery
    async def run_progress_set(self, params: RunProgressParams) -> bool:
        """False when the attempt is stale (the run is no longer running with its token)."""
        ...

    async def run_checkpoint_set(self, params: RunCheckpointParams) -> bool:
        """False when the attempt is stale; the stored checkpoint is then left as it was."""
        ...

    async def runs_held(self, worker_id: str) -> list[ClaimedRun]:
        """The runs whose lease ``worker_id`` holds (running). A worker whose claim failed on a
        lost connection may have claimed runs without hearing about it: it adopts them."""
        ...

    async def runs_stop_requested(
        self, runs: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[uuid.UUID, str]:
        """Of ``runs`` ((id, token) pairs still running with that token), those asked to stop,
        each with why: ``replaced`` (a newer run of an overlap ``replace`` waits for it) or
        ``cancelled`` (a cancel was requested)."""
        ...

    async def exactly_once_begin(self) -> ExactlyOnceTx:
        """Open a transaction for an exactly-once attempt (PostgreSQL). Raises
        :class:`~duetime.errors.UnsupportedFeature` on a store that cannot."""
        ...

    async def history_prune(self, params: HistoryPruneParams) -> int:
        """Returns how many runs were deleted (0 when not the leader)."""
        ...

    async def audit_list(self, params: AuditListParams) -> Page[AuditRecord]:
        """A page of a tenant's audit trail, newest first (docs/decisions/0021)."""
        ...

    async def audit_record(self, entry: AuditEntry) -> None:
        """Record ``entry`` in a transaction of its own (a call whose change spans committed
        transactions). Every other record is written by the change's own transaction, from
        the call's pending entry (``duetime._audit``)."""
        ...

    async def audit_prune(self, params: AuditPruneParams) -> int:
        """Delete old audit records (retention); how many (0 when not the leader)."""
        ...

    async def attempts_partitions(self, params: AttemptPartitionsParams) -> AttemptPartitionsChange:
        """PostgreSQL: create the attempt partitions ahead and drop those past retention
        (docs/decisions/0015); idempotent, and a no-op when not the leader. SQLite has no
        partitions: nothing to do."""
        ...

    # leadership and nodes
    async def leader_elect(self, params: LeaderElectParams) -> Leadership | None:
        """The leadership if this node holds it after the call, else None."""
        ...

    async def leader_resign(self, fence: LeaderFence) -> None: ...
    async def leader_get(self) -> Leadership | None: ...
    async def node_register(self, node: NodeInfo) -> None: ...
    async def node_heartbeat(self, node_id: str, now: datetime | None = None) -> None: ...
    async def node_unregister(self, node_id: str) -> None: ...
    async def nodes_list(self) -> list[NodeInfo]: ...
    async def nodes_prune(self, before: datetime) -> int:
        """Forget nodes and workers whose last heartbeat is older than ``before``."""
        ...

    # workers: keyed by (tenant, id) — ``tenant`` None is the installation's own workers, a
    # tenant name that tenant's remote workers (WorkerInfo.tenant)
    async def worker_register(self, worker: WorkerInfo) -> None:
        """Record (or refresh) a worker and the task names it serves (for its tenant only
        when it is a tenant's remote worker)."""
        ...

    async def worker_heartbeat(
        self, worker_id: str, now: datetime | None = None, *, tenant: str | None = None
    ) -> None: ...
    async def worker_unregister(self, worker_id: str, *, tenant: str | None = None) -> None: ...
    async def workers_list(self) -> list[WorkerInfo]:
        """Every worker: the installation's and every tenant's remote ones."""
        ...

    async def tasks_known(self, tasks: Sequence[str], tenant: str | None = None) -> set[str]:
        """The subset of ``tasks`` that the installation's workers have ever declared, or (with
        ``tenant``) that tenant's remote workers have; never another tenant's."""
        ...

    # tenants
    async def tenant_secret(self, tenant: str) -> str:
        """The tenant's webhook signing secret; the tenant's row (with a random secret) is
        created on first use. Safe to call concurrently: every caller gets the same secret."""
        ...

    async def tenant_signing_secrets(self, tenant: str, now: datetime | None = None) -> list[str]:
        """The secrets a tenant's webhooks are signed with: the current one first, then the
        previous one while a rotation's overlap window lasts (creating the tenant's row)."""
        ...

    async def tenant_secret_rotate(
        self, tenant: str, overlap: timedelta, now: datetime | None = None
    ) -> SecretRotation:
        """Give the tenant a new random signing secret; the current one stays valid (signed
        with too) until now + ``overlap``. A rotation during an overlap drops the oldest."""
        ...

    async def breakers_report(
        self, worker_id: str, breakers: Sequence[BreakerState], now: datetime | None = None
    ) -> None:
        """Replace the breakers worker ``worker_id`` reports (its breakers that are not
        closed; none: all closed); rows of workers no longer registered are removed."""
        ...

    async def breakers_list(self) -> list[BreakerState]:
        """Every reported breaker of a registered installation worker, oldest opened first."""
        ...

    async def tenant_limits_set(self, params: TenantLimitsSetParams) -> TenantLimits:
        """Change the given limits of a tenant (creating its row); returns them all."""
        ...

    async def tenant_limits_get(self, tenant: str) -> TenantLimits:
        """A tenant's limits (no limits and weight 1 for a tenant never configured)."""
        ...

    async def tenant_limits_list(self) -> list[TenantLimits]:
        """Every tenant that has a row (configured, or has a webhook secret), by id."""
        ...

    async def tenant_alert_webhooks_set(
        self, tenant: str, webhooks: Sequence[str], now: datetime | None = None
    ) -> list[str]:
        """Replace where ``tenant``'s alerts go (URLs validated by the caller; [] for none);
        returns them. Creates the tenant's row if it has none."""
        ...

    async def tenant_alert_webhooks(self, tenants: Sequence[str]) -> dict[str, list[str]]:
        """The alert webhooks of each of ``tenants`` that has some (others are absent)."""
        ...

    async def tenant_stats(self, now: datetime | None = None) -> list[TenantQueueStats]:
        """Per tenant and queue with runs waiting or running: due depth, oldest due age,
        in flight, throttled (by tenant, then queue)."""
        ...

    # api keys
    async def api_key_create(self, params: ApiKeyCreateParams) -> ApiKey: ...
    async def api_key_get_by_hash(self, key_hash: str) -> ApiKey | None:
        """The unrevoked key whose secret hashes to ``key_hash``, else None."""
        ...

    async def api_keys_list(self, params: ApiKeyListParams) -> list[ApiKey]:
        """Oldest first."""
        ...

    async def api_key_revoke(self, params: ApiKeyRevokeParams) -> ApiKey: ...
    async def api_key_touch(self, params: ApiKeyTouchParams) -> None: ...
    def api_keys_epoch(self) -> int | None:
        """A number that moves whenever any API key may have changed (here or, as far as
        this process can hear, elsewhere); None when a change made elsewhere could go unheard
        now. A key read under an epoch may be reused while the epoch is unchanged; with None,
        read it again (docs/decisions/0013-api-key-cache.md). No round trip."""
        ...

    # observability (store/*/observability.py; queries/observability.sql)
    async def stats_snapshot(self, params: StatsParams) -> ClusterStats: ...
    async def stats_timeline(self, params: TimelineParams) -> Timeline: ...
    async def alert_facts(self, params: AlertFactsParams) -> AlertFacts: ...
    async def incidents_apply(self, params: IncidentsApplyParams) -> IncidentsApplied: ...
    async def incidents_list(self, params: IncidentListParams) -> list[Incident]: ...
    async def incident_delivery(self, params: IncidentDeliveryParams) -> bool:
        """False when the event was no longer pending (another leader delivered it)."""
        ...

    async def incidents_prune(self, before: datetime, limit: int = 1000) -> int:
        """Delete resolved incidents whose messages were sent, resolved before ``before``."""
        ...

    # queue-depth history (leader-written: maintenance/depth.py)
    async def depth_samples_record(self, now: datetime | None = None) -> int:
        """Record the queue depth at ``now`` (the store's clock if None): a sample per tenant
        with runs scheduled, running or dead, and the cluster's total under tenant ``''``
        (always, so every sampling instant is known). Returns the rows written."""
        ...

    async def depth_samples_list(self, tenant: str, since: datetime) -> list[QueueDepth]:
        """``tenant``'s depth at every sampling instant since ``since``, oldest first (zeros
        where it had no row of its own)."""
        ...

    async def depth_samples_prune(self, before: datetime) -> int:
        """Delete the samples taken before ``before``; returns how many rows."""
        ...

    async def runs_last_workers(
        self, tenant: str, run_ids: list[uuid.UUID]
    ) -> dict[uuid.UUID, str]:
        """The worker of the latest recorded attempt of each of ``run_ids`` (the tenant's) that
        has one (attempts are recorded as they end: a running run's is its ``lease_owner``)."""
        ...
