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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from duetime._types import (
    JSON,
    Attempt,
    AttemptOutcome,
    DeliveryMode,
    Job,
    JobStatus,
    ApiKey,
    ApiRole,
    Leadership,
    MisfirePolicy,
    NodeInfo,
    OverlapPolicy,
    Page,
    RetryPolicy,
    Run,
    RunState,
    Schedule,
    WorkerInfo,
)

SCHEMA_VERSION = 2
"""The newest schema version this code knows; a database at a newer version is refused."""


# --- jobs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobUpsertParams:
    """Create a job, or update the one with the same (tenant, name).

    ``schedule`` is the resolved schedule (an ``every`` anchor filled in) and ``next_fire_at``
    its first instant. When the existing job's schedule is equivalent (``equivalent``), its
    schedule and ``next_fire_at`` are kept; otherwise they are replaced and the job's
    not-yet-started scheduled runs are marked ``skipped`` (reason ``schedule_changed``) in the
    same transaction. ``create_only`` turns an existing name into :class:`~duetime.errors.Conflict`.
    """

    tenant: str
    name: str
    task: str
    payload: str
    """Already-encoded JSON."""
    schedule: Schedule
    next_fire_at: datetime | None
    equivalent: Callable[[Schedule], bool]
    """Given the stored schedule, is the requested one the same?"""
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

    Pausing marks the job's not-yet-started scheduled runs ``skipped`` (reason ``paused``);
    cancelling marks them ``cancelled``. Resuming recomputes ``next_fire_at`` (given) so the
    paused occurrences are not misfired. Raises Conflict for an illegal move.
    """

    job: JobRef
    status: JobStatus
    next_fire_at: datetime | None = None
    now: datetime | None = None


# --- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlannedRun:
    scheduled_for: datetime
    available_at: datetime


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


Planner = Callable[[Job, datetime, datetime], JobPlan]
"""``planner(job, now, horizon_end)``: pure, no I/O."""


@dataclass(frozen=True, slots=True)
class RunsMaterializeParams:
    """Lock up to ``limit`` active jobs with ``next_fire_at <= now + horizon`` (skipping jobs
    another scheduler holds), ask ``planner`` what to do with each, insert the runs (existing
    occurrences are left alone), record the skips and advance ``next_fire_at`` — in one
    transaction."""

    planner: Planner
    horizon: float
    limit: int = 500
    now: datetime | None = None
    partitions: tuple[int, int] | None = None
    """Inclusive range of partition keys this scheduler serves; None = all."""


@dataclass(frozen=True, slots=True)
class MaterializeResult:
    jobs: int
    runs_created: int
    skips: int
    now: datetime


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
    :meth:`Store.run_start`."""

    worker_id: str
    tasks: Sequence[str]
    limit: int
    lease_ttl: float
    lookahead: float
    now: datetime | None = None
    tenant: str | None = None
    """Only runs of this tenant (remote workers act for one tenant); None: every tenant."""


@dataclass(frozen=True, slots=True)
class ClaimedRun:
    run: Run
    timeout: float | None
    retry: RetryPolicy
    delivery: DeliveryMode
    one_shot: bool


@dataclass(frozen=True, slots=True)
class RunStartParams:
    """Mark a claimed-ahead run as started, fenced by token, and only if its job may still run
    (active, or the run is a manual trigger). Returns False when it must not start."""

    run_id: uuid.UUID
    token: int
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class RunsHeartbeatParams:
    """Extend the leases of ``runs`` ((id, token) pairs) held by ``worker_id``."""

    worker_id: str
    runs: Sequence[tuple[uuid.UUID, int]]
    lease_ttl: float
    now: datetime | None = None


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
    completes_job: bool = False
    """A one-shot job's scheduled run ended: mark the job ``completed``."""
    refund_attempt: bool = False
    """The attempt never started (handed back at shutdown): it does not count against
    ``max_attempts``."""


@dataclass(frozen=True, slots=True)
class RunsCompleteParams:
    completions: Sequence[RunCompletion]
    now: datetime | None = None


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
class ReapResult:
    rescheduled: int
    dead: int


@dataclass(frozen=True, slots=True)
class RunListParams:
    tenant: str
    job_id: uuid.UUID | None = None
    state: RunState | None = None
    limit: int = 100
    before: tuple[datetime, uuid.UUID] | None = None
    """Keyset cursor: (scheduled_for, id) of the last item of the previous page."""


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


# --- bulk -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobsInsertManyParams:
    """Create many jobs in one transaction (the bulk registration path).

    Each entry is a validated :class:`JobUpsertParams` (``equivalent`` and ``create_only`` are
    ignored). A job whose (tenant, name) already exists — in the database or earlier in
    ``jobs`` — is left as it is: bulk registration only creates. PostgreSQL streams the rows
    with COPY into a staging table; SQLite uses one ``executemany``."""

    jobs: Sequence[JobUpsertParams]
    now: datetime | None = None
    """``created_at``/``updated_at`` of the new jobs; default: the store's clock."""


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


# --- the protocol -----------------------------------------------------------------------------


class Store(Protocol):
    """Everything duetime keeps. Implementations: SQLiteStore, PostgresStore."""

    dialect: str

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def migrate(self) -> int:
        """Apply pending migrations; return the schema version. Idempotent, safe concurrently."""
        ...

    async def schema_version(self) -> int | None:
        """The applied schema version; None on an empty database."""
        ...

    async def check_schema(self) -> None:
        """Raise SchemaError unless the schema is exactly at :data:`SCHEMA_VERSION`."""
        ...

    async def db_now(self) -> datetime: ...
    async def wait_for_runs(self, timeout: float) -> bool:
        """Wait for news of new due runs (PostgreSQL NOTIFY; SQLite: this process's own
        writes) or ``timeout``. Callers poll again either way; True means "news came"."""
        ...

    # jobs
    async def job_upsert(self, params: JobUpsertParams) -> tuple[Job, bool]: ...
    async def job_get(self, ref: JobRef) -> Job: ...
    async def job_list(self, params: JobListParams) -> Page[Job]: ...
    async def job_set_status(self, params: JobSetStatusParams) -> Job: ...
    async def job_delete(self, ref: JobRef) -> None: ...

    # bulk
    async def jobs_insert_many(self, params: JobsInsertManyParams) -> int:
        """Insert the jobs whose names are new; return how many were inserted."""
        ...

    # runs
    async def runs_materialize(self, params: RunsMaterializeParams) -> MaterializeResult: ...
    async def run_trigger(self, params: RunTriggerParams) -> tuple[Run, bool]: ...
    async def runs_claim(self, params: RunsClaimParams) -> list[ClaimedRun]: ...
    async def run_start(self, params: RunStartParams) -> bool: ...
    async def runs_heartbeat(self, params: RunsHeartbeatParams) -> set[uuid.UUID]:
        """Returns the ids whose lease was extended; the rest were lost."""
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
    async def skips_list(self, tenant: str, job_id: uuid.UUID) -> list[PlannedSkip]: ...

    async def history_prune(self, params: HistoryPruneParams) -> int:
        """Returns how many runs were deleted (0 when not the leader)."""
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

    # workers
    async def worker_register(self, worker: WorkerInfo) -> None:
        """Record (or refresh) a worker and the task names it serves."""
        ...

    async def worker_heartbeat(self, worker_id: str, now: datetime | None = None) -> None: ...
    async def worker_unregister(self, worker_id: str) -> None: ...
    async def workers_list(self) -> list[WorkerInfo]: ...
    async def tasks_known(self, tasks: Sequence[str]) -> set[str]:
        """The subset of ``tasks`` that some worker has ever declared."""
        ...

    # tenants
    async def tenant_secret(self, tenant: str) -> str:
        """The tenant's webhook signing secret; the tenant's row (with a random secret) is
        created on first use. Safe to call concurrently: every caller gets the same secret."""
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
