"""Value types of observability: a snapshot of the cluster's queues (metrics gauges, the
dashboard), a timeline of recent activity, alert conditions and incidents. Nothing here does
I/O; the store fills them, ``metrics.py``, ``maintenance/alerts.py`` and the API read them.
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from duetime._types import JSON, Leadership, NodeInfo, TenantQueueStats, WorkerInfo

# --- the cluster's state ----------------------------------------------------------------------


# Plain fields, the same shape as _types.py's value types by nature (no logic is repeated).
@dataclass(frozen=True, slots=True)
class TenantCounts:
    tenant: str
    due: int = 0
    """Runs ``scheduled`` whose ``available_at`` has passed: due but not started."""
    oldest_due_at: datetime | None = None
    running: int = 0
    """Runs executing (``running`` and started)."""
    dead: int = 0
    """Dead letters."""


@dataclass(frozen=True, slots=True)
class TaskDue:
    """Due-but-not-started runs of one task of one tenant."""

    tenant: str
    task: str
    due: int
    oldest_due_at: datetime


@dataclass(frozen=True, slots=True)
class ClusterStats:
    """What the gauges and the dashboard show, read at ``now`` (database clock)."""

    now: datetime
    tenants: list[TenantCounts]
    tasks_due: list[TaskDue]
    expired_leases: int
    """Running runs whose lease expired and that the reaper has not taken back yet."""
    overdue_jobs: int
    """Active jobs whose ``next_fire_at`` passed: occurrences not materialized yet."""
    oldest_overdue_at: datetime | None
    workers: list[WorkerInfo]
    """Workers that heartbeated recently (live)."""
    nodes: list[NodeInfo]
    """Nodes that heartbeated recently (live)."""
    leader: Leadership | None
    """The current, unexpired leadership."""
    queues: list[TenantQueueStats] = field(default_factory=list)
    """Due, in-flight and throttled runs per tenant and queue (``AsyncApp.tenant_stats``)."""
    workflow_instances: list[tuple[str, str, str, int]] = field(default_factory=list)
    """Workflow instances held, as (tenant, workflow, state, count)."""

    def tenant(self, tenant: str) -> TenantCounts:
        for counts in self.tenants:
            if counts.tenant == tenant:
                return counts
        return TenantCounts(tenant)

    def oldest_due_age(self, tenant: str | None = None) -> float:
        """Seconds since the oldest due-but-not-started run became due (0 when none is)."""
        instants = [
            t.oldest_due_at
            for t in self.tenants
            if t.oldest_due_at is not None and (tenant is None or t.tenant == tenant)
        ]
        return max(0.0, (self.now - min(instants)).total_seconds()) if instants else 0.0

    def served_tasks(self, tenant: str | None = None) -> set[str]:
        """Task names live workers serve: with ``tenant``, for that tenant (the installation's
        workers and the tenant's own remote workers); without, by any worker."""
        return {
            task
            for worker in self.workers
            if tenant is None or worker.tenant is None or worker.tenant == tenant
            for task in worker.tasks
        }


# --- recent activity ----------------------------------------------------------------------------

LAG_BOUNDS_MS: tuple[float, ...] = (
    1,
    2,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
    10000,
    30000,
    60000,
)
"""Upper bounds (milliseconds) of the fire-lag histogram buckets of a timeline; a last,
unbounded bucket follows. The SQL of ``stats_timeline`` uses the same bounds."""


@dataclass(slots=True)
class TimelineBucket:
    start: datetime
    succeeded: int = 0
    dead: int = 0
    failed_attempts: int = 0
    """Attempts that failed or timed out."""
    lost_attempts: int = 0
    lag_histogram: list[int] = field(default_factory=lambda: [0] * (len(LAG_BOUNDS_MS) + 1))
    """Fire lag (start − scheduled instant) of the runs that finished in the bucket."""

    def lag_quantile(self, q: float) -> float | None:
        """The q-quantile of the fire lag in seconds (interpolated in its bucket), or None."""
        return histogram_quantile(self.lag_histogram, q)


def histogram_quantile(counts: Sequence[int], q: float) -> float | None:
    """Like Prometheus' ``histogram_quantile`` over :data:`LAG_BOUNDS_MS` buckets; seconds."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            if index >= len(LAG_BOUNDS_MS):
                return LAG_BOUNDS_MS[-1] / 1000
            low = 0.0 if index == 0 else LAG_BOUNDS_MS[index - 1]
            high = LAG_BOUNDS_MS[index]
            fraction = (rank - seen) / count
            return (low + (high - low) * fraction) / 1000
        seen += count
    return LAG_BOUNDS_MS[-1] / 1000


def lag_bucket(lag_seconds: float) -> int:
    """The index of the histogram bucket of a fire lag."""
    ms = lag_seconds * 1000
    for index, bound in enumerate(LAG_BOUNDS_MS):
        if ms <= bound:
            return index
    return len(LAG_BOUNDS_MS)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Recent activity of one tenant in equal buckets, oldest first."""

    since: datetime
    step: float
    buckets: list[TimelineBucket]


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """A tenant's queue depth at one sampling instant of the leader (``queue_depth_samples``):
    runs due (scheduled, available), running (started) and dead."""

    at: datetime
    due: int
    running: int
    dead: int


# --- alerts -------------------------------------------------------------------------------------


class AlertKind(enum.StrEnum):
    RUN_DEAD = "run_dead"
    SLA_MISSED = "sla_missed"
    RUN_STUCK = "run_stuck"
    SCHEDULER_BEHIND = "scheduler_behind"
    NO_WORKER = "no_worker"
    JOB_PAUSED_ON_FAILURE = "job_paused_on_failure"
    WORKFLOW_FAILED = "workflow_failed"
    WORKFLOW_SLA_MISSED = "workflow_sla_missed"
    BREAKER_OPEN = "breaker_open"
    OUTBOX_BACKLOG = "outbox_backlog"
    OUTBOX_DEAD = "outbox_dead"


@dataclass(frozen=True, slots=True)
class AlertCondition:
    """Something the alert evaluator found wrong now. ``(kind, subject)`` names the incident:
    while one is open for it, finding the condition again changes nothing."""

    kind: AlertKind
    subject: str
    summary: str
    tenant: str | None = None
    job_id: uuid.UUID | None = None
    run_id: uuid.UUID | None = None
    details: dict[str, JSON] = field(default_factory=dict)


class IncidentEvent(enum.StrEnum):
    FIRED = "fired"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Incident:
    id: uuid.UUID
    kind: AlertKind
    subject: str
    summary: str
    tenant: str | None
    job_id: uuid.UUID | None
    run_id: uuid.UUID | None
    details: dict[str, JSON]
    opened_at: datetime
    resolved_at: datetime | None = None
    resolution: str | None = None
    fired_sent_at: datetime | None = None
    resolved_sent_at: datetime | None = None
    delivered: tuple[str, ...] = ()
    """Webhooks that took the message now pending."""
    delivery_attempts: int = 0
    next_delivery_at: datetime | None = None
    last_delivery_error: str | None = None

    @property
    def firing(self) -> bool:
        return self.resolved_at is None

    @property
    def pending_event(self) -> IncidentEvent | None:
        """The message still to deliver: "fired" first, then "resolved"; None when done."""
        if self.fired_sent_at is None:
            return IncidentEvent.FIRED
        if self.resolved_at is not None and self.resolved_sent_at is None:
            return IncidentEvent.RESOLVED
        return None


# --- what the alert evaluator reads ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadRunFact:
    run_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job_name: str
    task: str
    reason: str | None
    error_class: str | None
    error_message: str | None
    finished_at: datetime | None
    attempt: int


@dataclass(frozen=True, slots=True)
class SlaFact:
    """A job with an SLA: its latest occurrence whose window has closed (``due``), and
    whether a run succeeded within that window."""

    job_id: uuid.UUID
    tenant: str
    job_name: str
    sla: float
    due: datetime | None
    met: bool
    active: bool
    """False when the job is no longer active or has no SLA any more (resolve)."""


@dataclass(frozen=True, slots=True)
class RunningFact:
    run_id: uuid.UUID
    tenant: str
    job_id: uuid.UUID
    job_name: str
    task: str
    started_at: datetime
    attempt: int
    expected_duration: float | None
    """The job's ``expected_duration``, if set."""
    lost_attempts: int = 0


@dataclass(frozen=True, slots=True)
class AlertFacts:
    now: datetime
    dead_runs: list[DeadRunFact]
    """Dead runs that finished recently, and those among the asked-for ids still dead."""
    sla: list[SlaFact]
    running: list[RunningFact]
    """Runs running longer than the minimum, and runs whose lease keeps being lost."""
    durations: dict[uuid.UUID, list[float]]
    """Per job of ``running``: durations (s) of its last 20 successful runs, newest first."""
    stats: ClusterStats


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]
