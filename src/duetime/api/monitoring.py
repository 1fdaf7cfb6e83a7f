"""What the dashboard reads, over HTTP: small read-only endpoints — who the caller is, an
overview of the queues with recent activity, the live nodes and workers, alert incidents — and
``GET /jobs/{id}/explain``; and ``/metrics`` (Prometheus), which shares their cached cluster
stats. The dashboard's own files are served by :mod:`duetime.api.dashboard`.

Tenant isolation: ``/cluster`` and the overview list the installation's own workers and nodes
(every tenant's runs go through them: they are not a tenant's secret) and the caller's tenant's
remote workers only — never another tenant's worker ids or task names. ``/metrics`` labels
every tenant: it needs an admin key when ``metrics_auth`` is ``admin``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from duetime._monitoring import ClusterStats, Incident, QueueDepth, TimelineBucket
from duetime.api.auth import Superadmin, Viewer, state_of
from duetime.api.endpoint import Endpoint
from duetime.api.params import JobId, job_key
from duetime.api.problems import unauthorized
from duetime.api.schemas import fields_from
from duetime.app import AsyncApp
from duetime.app.reads import ReadSide
from duetime.errors import ValidationError
from duetime.explain import Explanation
from duetime.metrics import metrics

STATS_MAX_AGE = 5.0


# --- response bodies --------------------------------------------------------------------------


class WhoAmI(BaseModel):
    tenant: str
    role: str
    auth_required: bool
    key_name: str | None
    key_prefix: str | None


class QueueOut(BaseModel):
    due: int
    oldest_due_age: float
    running: int
    dead_letters: int
    expired_leases: int
    overdue_jobs: int


class WorkerOut(BaseModel):
    id: str
    host: str
    pid: int
    tasks: list[str]
    started_at: datetime
    heartbeat_at: datetime
    tenant: str | None = None
    """The caller's tenant for its remote workers; null for the installation's own."""


class NodeOut(BaseModel):
    id: str
    host: str
    pid: int
    roles: list[str]
    partitions: str | None
    started_at: datetime
    heartbeat_at: datetime


class LeaderOut(BaseModel):
    node_id: str
    term: int
    elected_at: datetime
    expires_at: datetime


class ClusterOut(BaseModel):
    leader: LeaderOut | None
    nodes: list[NodeOut]
    workers: list[WorkerOut]

    @classmethod
    def of(cls, stats: ClusterStats, tenant: str) -> ClusterOut:
        """The cluster as ``tenant`` may see it: the installation's nodes and workers, and its
        own remote workers (never another tenant's)."""
        lead = stats.leader
        return cls(
            leader=None if lead is None else LeaderOut(**fields_from(LeaderOut, lead)),
            nodes=[NodeOut(**fields_from(NodeOut, n, roles=list(n.roles))) for n in stats.nodes],
            workers=[
                WorkerOut(**fields_from(WorkerOut, w, tasks=list(w.tasks)))
                for w in stats.workers
                if w.tenant is None or w.tenant == tenant
            ],
        )


# Incident's fields as a pydantic model, for the OpenAPI document.
class IncidentOut(BaseModel):
    id: uuid.UUID
    kind: str
    subject: str
    state: Literal["firing", "resolved"]
    summary: str
    tenant: str | None
    job_id: uuid.UUID | None
    run_id: uuid.UUID | None
    details: dict[str, Any]
    opened_at: datetime
    resolved_at: datetime | None
    resolution: str | None
    delivered: bool
    """Every message of the incident reached every alert webhook."""

    @classmethod
    def of(cls, i: Incident) -> IncidentOut:
        return cls(
            **fields_from(
                cls,
                i,
                kind=str(i.kind),
                state="firing" if i.firing else "resolved",
                delivered=i.pending_event is None,
            )
        )


class IncidentList(BaseModel):
    items: list[IncidentOut]


class DepthSample(BaseModel):
    at: datetime
    due: int
    running: int
    dead_letters: int

    @classmethod
    def of(cls, sample: QueueDepth) -> DepthSample:
        return cls(at=sample.at, due=sample.due, running=sample.running, dead_letters=sample.dead)


class Overview(BaseModel):
    now: datetime
    tenant: str
    queue: QueueOut
    cluster: ClusterOut
    alerts_firing: list[IncidentOut]
    depth: list[DepthSample]
    """The tenant's queue depth over the last `depth_window` seconds, oldest first: the
    samples the leader records every 10 s (kept 24 h), whether or not a page is open."""


class BucketOut(BaseModel):
    start: datetime
    succeeded: int
    dead: int
    failed_attempts: int
    lost_attempts: int
    fire_lag_p50: float | None
    fire_lag_p95: float | None
    fire_lag_p99: float | None

    @classmethod
    def of(cls, b: TimelineBucket) -> BucketOut:
        return cls(
            **fields_from(
                cls,
                b,
                fire_lag_p50=b.lag_quantile(0.5),
                fire_lag_p95=b.lag_quantile(0.95),
                fire_lag_p99=b.lag_quantile(0.99),
            )
        )


class TimelineOut(BaseModel):
    since: datetime
    step: float
    buckets: list[BucketOut]


class OccurrenceReportOut(BaseModel):
    instant: datetime
    local: str
    """ISO 8601 with the job zone's offset."""
    what: str
    why: str
    run_id: uuid.UUID | None
    state: str | None
    trigger: str
    attempts: int
    reason: str | None
    error: str | None
    count: int
    last: datetime | None


class NextFireOut(BaseModel):
    instant: datetime
    local: str
    dst_note: str | None
    calendar_note: str | None = None


class ExplanationOut(BaseModel):
    job_id: uuid.UUID
    name: str
    tenant: str
    status: str
    schedule: str
    tz: str
    now: datetime
    summary: str
    next_fire_at: datetime | None
    next_occurrence_at: datetime | None = None
    """The earliest occurrence not fired yet (runs written ahead included): "next fire"."""
    last: list[OccurrenceReportOut]
    next: list[NextFireOut]
    notes: list[str]

    @classmethod
    def of(cls, e: Explanation) -> ExplanationOut:
        last = [
            OccurrenceReportOut(
                **fields_from(
                    OccurrenceReportOut,
                    r,
                    local=r.local.isoformat(),
                    state=None if r.state is None else str(r.state),
                    trigger=str(r.trigger),
                )
            )
            for r in e.last
        ]
        upcoming = [
            NextFireOut(**fields_from(NextFireOut, n, local=n.local.isoformat())) for n in e.next
        ]
        return cls(**fields_from(cls, e, status=str(e.status), last=last, next=upcoming))


# --- shared, cached cluster stats ---------------------------------------------------------------


class StatsCache:
    """One cluster-stats read per ``STATS_MAX_AGE`` for the whole API process (the metrics
    gauges and every dashboard reader share it)."""

    def __init__(self, reads: ReadSide) -> None:
        self.reads = reads
        self.stats: ClusterStats | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> ClusterStats:
        async with self._lock:
            if self.stats is None or time.monotonic() - self._read_at >= STATS_MAX_AGE:
                self.stats = await self.reads.cluster_stats()
                self._read_at = time.monotonic()
            return self.stats


def cache_of(request: Request) -> StatsCache:
    cache: StatsCache = request.app.state.duetime_stats
    return cache


# --- endpoints ----------------------------------------------------------------------------------


class WhoAmIEndpoint(Endpoint):
    """Who is calling
    The tenant and role the request acts with (the dashboard hides the buttons a `viewer`
    may not use)."""

    method, path, tag = "GET", "/whoami", "observability"

    async def handle(self, request: Request, caller: Viewer) -> WhoAmI:
        return WhoAmI(
            tenant=caller.tenant,
            role=str(caller.role),
            auth_required=state_of(request).auth_required,
            key_name=None if caller.key is None else caller.key.name,
            key_prefix=None if caller.key is None else caller.key.prefix,
        )


class GetOverview(Endpoint):
    """Overview of the queues
    The tenant's due, running and dead runs now, the cluster's live nodes, workers (the
    installation's and the tenant's remote ones) and leader, the alerts firing, and its queue
    depth over the last `depth_window` seconds (recorded by the leader every 10 s and kept 24
    h, whether or not anyone reads it; empty while no scheduler leads)."""

    method, path, tag = "GET", "/stats/overview", "observability"
    errors = (422,)

    async def handle(
        self,
        request: Request,
        caller: Viewer,
        depth_window: Annotated[float, Query(ge=60, le=86400)] = 3600,
    ) -> Overview:
        stats = await cache_of(request).get()
        counts = stats.tenant(caller.tenant)
        firing = await caller.app.incidents(firing=True, limit=100)
        depth = await caller.app.monitoring.queue_depth(window=depth_window)
        return Overview(
            now=stats.now,
            tenant=caller.tenant,
            queue=QueueOut(
                due=counts.due,
                oldest_due_age=stats.oldest_due_age(caller.tenant),
                running=counts.running,
                dead_letters=counts.dead,
                expired_leases=stats.expired_leases,
                overdue_jobs=stats.overdue_jobs,
            ),
            cluster=ClusterOut.of(stats, caller.tenant),
            alerts_firing=[IncidentOut.of(i) for i in firing],
            depth=[DepthSample.of(d) for d in depth],
        )


class GetTimeline(Endpoint):
    """Recent activity
    The tenant's runs succeeded and dead, attempts failed and lost, and fire-lag percentiles
    (of runs that ran at their first attempt), per bucket of `step` seconds over the last
    `window` seconds, oldest first."""

    method, path, tag = "GET", "/stats/timeline", "observability"
    errors = (422,)

    async def handle(
        self,
        caller: Viewer,
        window: Annotated[float, Query(ge=60, le=7 * 86400)] = 3600,
        step: Annotated[float, Query(ge=1, le=86400)] = 60,
    ) -> TimelineOut:
        timeline = await caller.app.timeline(window=window, step=step)
        return TimelineOut(
            since=timeline.since,
            step=timeline.step,
            buckets=[BucketOut.of(b) for b in timeline.buckets],
        )


class GetCluster(Endpoint):
    """Live nodes, workers and the leader
    The installation's own nodes and workers, and the caller's tenant's remote workers (an
    admin sees another tenant's with `?tenant=`)."""

    method, path, tag = "GET", "/cluster", "observability"

    async def handle(self, request: Request, caller: Viewer) -> ClusterOut:
        return ClusterOut.of(await cache_of(request).get(), caller.tenant)


class ListAlerts(Endpoint):
    """List alert incidents
    The tenant's incidents and cluster-wide ones (scheduler behind, no worker), newest first:
    `firing`, `resolved` or `all`."""

    method, path, tag = "GET", "/alerts", "observability"
    errors = (422,)

    async def handle(
        self,
        caller: Viewer,
        state: Literal["firing", "resolved", "all"] = "firing",
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> IncidentList:
        firing = {"firing": True, "resolved": False, "all": None}[state]
        items = await caller.app.incidents(firing=firing, limit=limit)
        return IncidentList(items=[IncidentOut.of(i) for i in items])


class ExplainJob(Endpoint):
    """Explain a job
    Why it did or didn't fire: its last occurrences, each with what happened and why (fired,
    retried, skipped by the overlap or misfire policy, paused, dead with its error, waiting for
    a worker), and its next fire instants in UTC and local time with DST notes."""

    method, path, tag = "GET", "/jobs/{job_id}/explain", "jobs"
    errors = (404, 422)

    # FastAPI reads each endpoint's parameters from its own signature (alike across endpoints)
    async def handle(
        self,
        job_id: JobId,
        caller: Viewer,
        last: Annotated[int, Query(ge=1, le=100)] = 10,
        count: Annotated[int, Query(ge=1, le=100)] = 5,
    ) -> ExplanationOut:
        found = job_key(job_id)
        return ExplanationOut.of(await caller.app.explain(found, last=last, count=count))


ENDPOINTS: tuple[type[Endpoint], ...] = (
    WhoAmIEndpoint,
    GetOverview,
    GetTimeline,
    GetCluster,
    ListAlerts,
    ExplainJob,
)

TAG = {
    "name": "observability",
    "description": "What the dashboard reads: the caller, queue overview, recent activity, "
    "live nodes and workers, alert incidents.",
}


def install_metrics(api: FastAPI, app: AsyncApp, reads: ReadSide) -> None:
    """``/metrics`` (outside ``/api/v1``) and the stats cache it shares with the endpoints,
    read through ``reads`` (the replica when one is set)."""
    cache = StatsCache(reads)
    api.state.duetime_stats = cache
    registry = metrics()

    async def serve_metrics() -> Response:
        await registry.refresh(cache.get, max_age=0)
        return Response(registry.exposition(), media_type=registry.content_type)

    access = app.settings.metrics_auth
    if access == "none":  # Prometheus scrapes without a key: keep it behind network policy
        api.get("/metrics", include_in_schema=False)(serve_metrics)
    elif access == "admin":

        @api.get("/metrics", include_in_schema=False)
        async def admin_metrics(caller: Superadmin) -> Response:
            # the whole installation's figures: a superadmin's, not one tenant's admin's
            if caller.key is None:  # keys not required (duetime up): still needs one here
                raise unauthorized("/metrics needs a superadmin API key (metrics_auth=admin)")
            return await serve_metrics()

    else:
        raise ValidationError("metrics_auth", f"must be 'none' or 'admin', got {access!r}")
