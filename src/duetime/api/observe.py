"""Observability over HTTP: ``/metrics`` (Prometheus), the dashboard at ``/``, and small read-only
endpoints the dashboard reads — who the caller is, an overview of the queues with recent
activity, the live nodes and workers, alert incidents — and ``GET /jobs/{id}/explain``.

The dashboard (``src/duetime/dashboard/``) is static HTML, CSS and JavaScript; it reads and acts
only through the REST API, with the API key its user enters.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

from duetime._observe import ClusterStats, Incident, TimelineBucket
from duetime.api.auth import Viewer, state_of
from duetime.api.endpoint import Endpoint
from duetime.api.params import JobId
from duetime.api.schemas import parse_id
from duetime.app import AsyncApp
from duetime.explain import Explanation
from duetime.metrics import metrics

DASHBOARD = Path(__file__).resolve().parent.parent / "dashboard"
STATS_MAX_AGE = 5.0
DEPTH_SAMPLES = 720
"""Queue-depth samples kept per tenant (one per 5 s at most: the last hour)."""


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
    def of(cls, stats: ClusterStats) -> ClusterOut:
        lead = stats.leader
        return cls(
            leader=None
            if lead is None
            else LeaderOut(
                node_id=lead.node_id,
                term=lead.term,
                elected_at=lead.elected_at,
                expires_at=lead.expires_at,
            ),
            nodes=[
                NodeOut(
                    id=n.id,
                    host=n.host,
                    pid=n.pid,
                    roles=list(n.roles),
                    partitions=n.partitions,
                    started_at=n.started_at,
                    heartbeat_at=n.heartbeat_at,
                )
                for n in stats.nodes
            ],
            workers=[
                WorkerOut(
                    id=w.id,
                    host=w.host,
                    pid=w.pid,
                    tasks=list(w.tasks),
                    started_at=w.started_at,
                    heartbeat_at=w.heartbeat_at,
                )
                for w in stats.workers
            ],
        )


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
            id=i.id,
            kind=str(i.kind),
            subject=i.subject,
            state="firing" if i.firing else "resolved",
            summary=i.summary,
            tenant=i.tenant,
            job_id=i.job_id,
            run_id=i.run_id,
            details=i.details,
            opened_at=i.opened_at,
            resolved_at=i.resolved_at,
            resolution=i.resolution,
            delivered=i.pending_event is None,
        )


class IncidentList(BaseModel):
    items: list[IncidentOut]


class DepthSample(BaseModel):
    at: datetime
    due: int
    running: int
    dead_letters: int


class Overview(BaseModel):
    now: datetime
    tenant: str
    queue: QueueOut
    cluster: ClusterOut
    alerts_firing: list[IncidentOut]
    depth: list[DepthSample]
    """Queue depth over time, as sampled by this API process (while it is being read)."""


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
            start=b.start,
            succeeded=b.succeeded,
            dead=b.dead,
            failed_attempts=b.failed_attempts,
            lost_attempts=b.lost_attempts,
            fire_lag_p50=b.lag_quantile(0.5),
            fire_lag_p95=b.lag_quantile(0.95),
            fire_lag_p99=b.lag_quantile(0.99),
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
    last: list[OccurrenceReportOut]
    next: list[NextFireOut]
    notes: list[str]

    @classmethod
    def of(cls, e: Explanation) -> ExplanationOut:
        return cls(
            job_id=e.job_id,
            name=e.name,
            tenant=e.tenant,
            status=str(e.status),
            schedule=e.schedule,
            tz=e.tz,
            now=e.now,
            summary=e.summary,
            next_fire_at=e.next_fire_at,
            last=[
                OccurrenceReportOut(
                    instant=r.instant,
                    local=r.local.isoformat(),
                    what=r.what,
                    why=r.why,
                    run_id=r.run_id,
                    state=None if r.state is None else str(r.state),
                    trigger=str(r.trigger),
                    attempts=r.attempts,
                    reason=r.reason,
                    error=r.error,
                    count=r.count,
                    last=r.last,
                )
                for r in e.last
            ],
            next=[
                NextFireOut(instant=n.instant, local=n.local.isoformat(), dst_note=n.dst_note)
                for n in e.next
            ],
            notes=e.notes,
        )


# --- shared, cached cluster stats ---------------------------------------------------------------


class StatsCache:
    """One cluster-stats read per ``STATS_MAX_AGE`` for the whole API process (the metrics
    gauges and every dashboard reader share it), and queue-depth samples per tenant."""

    def __init__(self, app: AsyncApp) -> None:
        self.app = app
        self.stats: ClusterStats | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self.depth: dict[str, deque[DepthSample]] = {}

    async def get(self) -> ClusterStats:
        async with self._lock:
            if self.stats is None or time.monotonic() - self._read_at >= STATS_MAX_AGE:
                self.stats = await self.app.cluster_stats()
                self._read_at = time.monotonic()
                self._sample(self.stats)
            return self.stats

    def _sample(self, stats: ClusterStats) -> None:
        tenants = {t.tenant for t in stats.tenants} | set(self.depth)
        for tenant in tenants:
            counts = stats.tenant(tenant)
            samples = self.depth.get(tenant)
            if samples is None:
                if len(self.depth) >= 1000:
                    continue
                samples = self.depth[tenant] = deque(maxlen=DEPTH_SAMPLES)
            samples.append(
                DepthSample(
                    at=stats.now, due=counts.due, running=counts.running, dead_letters=counts.dead
                )
            )

    def samples(self, tenant: str) -> list[DepthSample]:
        """The tenant's depth samples (from now on sampled with every read)."""
        if tenant not in self.depth and self.stats is not None and len(self.depth) < 1000:
            counts = self.stats.tenant(tenant)
            self.depth[tenant] = deque(
                [
                    DepthSample(
                        at=self.stats.now,
                        due=counts.due,
                        running=counts.running,
                        dead_letters=counts.dead,
                    )
                ],
                maxlen=DEPTH_SAMPLES,
            )
        return list(self.depth.get(tenant, ()))


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
    The tenant's due, running and dead runs now, the cluster's live nodes, workers and leader,
    the alerts firing, and queue-depth samples (taken by this API process while it is read)."""

    method, path, tag = "GET", "/stats/overview", "observability"

    async def handle(self, request: Request, caller: Viewer) -> Overview:
        cache = cache_of(request)
        stats = await cache.get()
        counts = stats.tenant(caller.tenant)
        firing = await caller.app.incidents(firing=True, limit=100)
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
            cluster=ClusterOut.of(stats),
            alerts_firing=[IncidentOut.of(i) for i in firing],
            depth=cache.samples(caller.tenant),
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
    """Live nodes, workers and the leader"""

    method, path, tag = "GET", "/cluster", "observability"

    async def handle(self, request: Request, caller: Viewer) -> ClusterOut:
        return ClusterOut.of(await cache_of(request).get())


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

    async def handle(
        self,
        job_id: JobId,
        caller: Viewer,
        last: Annotated[int, Query(ge=1, le=100)] = 10,
        count: Annotated[int, Query(ge=1, le=100)] = 5,
    ) -> ExplanationOut:
        found = parse_id(job_id, "job")
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

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def install(api: FastAPI, app: AsyncApp) -> None:
    """``/metrics`` and the dashboard (``/`` and ``/dashboard/…``), outside ``/api/v1``."""
    cache = StatsCache(app)
    api.state.duetime_stats = cache
    registry = metrics()

    @api.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        await registry.refresh(cache.get, max_age=0)
        return Response(registry.exposition(), media_type=registry.content_type)

    api.mount(
        "/dashboard",
        StaticFiles(directory=DASHBOARD, check_dir=False),
        name="dashboard",
    )

    @api.get("/dashboard-config", include_in_schema=False)
    async def dashboard_config(request: Request) -> dict[str, Any]:
        """What the dashboard needs before it has a key: whether it must ask for one."""
        return {"auth_required": state_of(request).auth_required}

    @api.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(DASHBOARD / "index.html", headers=_SECURITY_HEADERS)
