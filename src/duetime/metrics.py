"""Prometheus metrics: what this process did (counters, histograms) and the cluster's queues
(gauges read from the store when scraped).

- Counters and histograms are recorded where things happen: the scheduler counts runs it
  materialized and the occurrences it skipped, workers count starts, outcomes and attempts,
  the reaper counts lost attempts. Each process exports its own; sum them across processes.
- Gauges (due runs, the oldest due run's age, running runs, expired leases, dead letters,
  live workers and nodes, the leader's term) describe the whole cluster. They are read from
  the store when ``/metrics`` is scraped, at most once per ``max_age`` seconds; every process
  exports the same values, so aggregate them with ``max``, never ``sum``.

Label cardinality stays bounded: labels are ``tenant``, ``task``, ``queue``, ``reason`` and
``outcome`` (never run ids or job names), and past :data:`MAX_TENANTS` tenants,
:data:`MAX_TASKS` tasks or :data:`MAX_QUEUES` queues further values are reported as ``_other``.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from duetime._monitoring import ClusterStats
from duetime._outbox import OutboxDepth

log = logging.getLogger("duetime.metrics")

MAX_TENANTS = 200
MAX_TASKS = 500
MAX_QUEUES = 100
OTHER = "_other"

LAG_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
DURATION_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)

RENEWAL_BUCKETS = (0.5, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0, 30.0)
"""Renewal gaps: renewals run every third of a lease (1 s by default), so the buckets are
dense around it and at two thirds of the default 3 s leases (2 s), the alert's threshold."""

StatsSource = Callable[[], Awaitable[ClusterStats]]


class _Bounded:
    """Keeps the first ``limit`` distinct values of a label; later ones become ``_other``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        value = value or ""
        if value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


def observe_many(histogram: Any, amounts: Sequence[float]) -> None:
    """``histogram.observe(a)`` for every ``a`` of ``amounts``, the buckets incremented once
    each (a worker records its runs per batch). Reaches into prometheus_client's histogram
    child (``_upper_bounds``, ``_buckets``, ``_sum``: the layout ``observe`` itself uses);
    one observation at a time if that layout is not there."""
    if not amounts:
        return
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if bounds is None or buckets is None or total is None:
        for amount in amounts:
            histogram.observe(amount)
        return
    counts = [0] * len(bounds)
    for amount in amounts:
        counts[bisect.bisect_left(bounds, amount)] += 1  # the first bound >= amount, as observe
    for bucket, count in zip(buckets, counts, strict=True):
        if count:
            bucket.inc(count)
    total.inc(math.fsum(amounts))


class Metrics:
    """The collectors of one registry (by default the process-wide one: see :func:`metrics`)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        max_tenants: int = MAX_TENANTS,
        max_tasks: int = MAX_TASKS,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._tenant = _Bounded(max_tenants)
        self._task = _Bounded(max_tasks)
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}
        r = self.registry
        tt = ("tenant", "task")
        self.runs_materialized = Counter(
            "duetime_runs_materialized",
            "Runs created by this scheduler from their jobs' schedules.",
            tt,
            registry=r,
        )
        self.runs_started = Counter(
            "duetime_runs_started", "Runs (attempts) that started executing.", tt, registry=r
        )
        self.runs_succeeded = Counter(
            "duetime_runs_succeeded", "Runs that ended succeeded.", tt, registry=r
        )
        self.runs_dead = Counter(
            "duetime_runs_dead",
            "Runs that went dead (dead-letter queue), by reason.",
            (*tt, "reason"),
            registry=r,
        )
        self.runs_skipped = Counter(
            "duetime_runs_skipped",
            "Occurrences not run, by reason (misfire_skip, misfire_fire_once, not_started …).",
            (*tt, "reason"),
            registry=r,
        )
        self.attempts = Counter(
            "duetime_attempts",
            "Attempts that ended, by outcome (succeeded, failed, lost, stale, timed_out, "
            "cancelled).",
            (*tt, "outcome"),
            registry=r,
        )
        self.schedule_lag = Histogram(
            "duetime_schedule_lag_seconds",
            "Materialized − scheduled instant (0 when materialized ahead).",
            ("tenant",),
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.fire_lag = Histogram(
            "duetime_fire_lag_seconds",
            "Started − scheduled instant (available instant for retries).",
            ("tenant",),
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "duetime_run_duration_seconds",
            "How long attempts executed (start to outcome).",
            tt,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.step_handoff = Histogram(
            "duetime_workflow_step_handoff_seconds",
            "Workflow step hand-off latency: a step run's start − its creation (when its "
            "parents allowed it).",
            ("tenant",),
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.breaker_state = Gauge(
            "duetime_circuit_breaker_state",
            "This worker's circuit breaker per target (http:<host>:<port>, command:<name>): "
            "0 closed, 1 half-open, 2 open (targets/breaker.py).",
            ("target",),
            registry=r,
        )
        self.outbox_pending = Gauge(
            "duetime_outbox_pending",
            "Broker messages in the outbox not yet published, by connection (as this "
            "process's relay last read them; docs/brokers.md).",
            ("connection",),
            registry=r,
        )
        self.outbox_oldest_age = Gauge(
            "duetime_outbox_oldest_age_seconds",
            "Age of the oldest unpublished broker message (0: none).",
            registry=r,
        )
        self.outbox_dead = Gauge(
            "duetime_outbox_dead", "Broker messages refused for good (dead messages).", registry=r
        )
        self.partitions_held = Gauge(
            "duetime_partitions_held",
            "Job partitions whose lease this scheduler held at its last renewal (leased "
            "partitions; 0 after it left; docs/reliability.md).",
            ("node",),
            registry=r,
        )
        self.lease_renewal_gap = Histogram(
            "duetime_lease_renewal_gap_seconds",
            "Time between two successive successful renewals of this node's lease: "
            "lease=leader (while it leads) or partitions. They run every third of the lease; "
            "a gap near the lease means it nearly lapsed.",
            ("lease",),
            buckets=RENEWAL_BUCKETS,
            registry=r,
        )
        self.cluster = ClusterCollector()
        r.register(self.cluster)

    # --- recording ------------------------------------------------------------------------

    def labels(self, tenant: str, task: str) -> tuple[str, str]:
        return self._tenant(tenant), self._task(task)

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept: prometheus_client's lookup is costly per run."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def materialized(
        self, tenant: str, task: str, scheduled_for: datetime, now: datetime, count: int = 1
    ) -> None:
        """``count`` runs of (tenant, task) at ``scheduled_for`` made at ``now``."""
        t, k = self.labels(tenant, task)
        self._child(self.runs_materialized, t, k).inc(count)
        lag = max(0.0, (now - scheduled_for).total_seconds())
        observe = self._child(self.schedule_lag, t).observe
        for _ in range(count):
            observe(lag)

    def skipped(self, tenant: str, task: str, reason: str, count: int = 1) -> None:
        t, k = self.labels(tenant, task)
        self._child(self.runs_skipped, t, k, reason or "unknown").inc(count)

    def started(self, tenant: str, task: str, due_at: datetime, started_at: datetime) -> None:
        t, k = self.labels(tenant, task)
        self._child(self.runs_started, t, k).inc()
        self._child(self.fire_lag, t).observe(max(0.0, (started_at - due_at).total_seconds()))

    def attempt_ended(
        self, tenant: str, task: str, outcome: str, duration: float | None = None
    ) -> None:
        t, k = self.labels(tenant, task)
        self._child(self.attempts, t, k, outcome).inc()
        if duration is not None and duration >= 0:
            self._child(self.duration, t, k).observe(duration)

    def started_many(self, tenant: str, task: str, lags: Sequence[float]) -> None:
        """:meth:`started` of ``len(lags)`` runs of one tenant and task at once (a worker
        counts its starts per batch), ``lags`` their fire lags in seconds."""
        t, k = self.labels(tenant, task)
        self._child(self.runs_started, t, k).inc(len(lags))
        observe_many(self._child(self.fire_lag, t), [max(0.0, lag) for lag in lags])

    def steps_handed_off(self, tenant: str, latencies: Sequence[float]) -> None:
        """Step runs of ``tenant`` started, ``latencies`` their hand-offs in seconds."""
        observe_many(
            self._child(self.step_handoff, self._tenant(tenant)), [max(0.0, x) for x in latencies]
        )

    def attempts_ended(
        self, tenant: str, task: str, outcome: str, count: int, durations: Sequence[float] = ()
    ) -> None:
        """:meth:`attempt_ended` of ``count`` attempts at once, ``durations`` those measured."""
        t, k = self.labels(tenant, task)
        self._child(self.attempts, t, k, outcome).inc(count)
        if durations:
            observe_many(self._child(self.duration, t, k), [d for d in durations if d >= 0])

    def runs_ended(
        self, tenant: str, task: str, state: str, reason: str | None, count: int
    ) -> None:
        """:meth:`run_ended` of ``count`` runs at once."""
        t, k = self.labels(tenant, task)
        if state == "succeeded":
            self._child(self.runs_succeeded, t, k).inc(count)
        elif state == "dead":
            self._child(self.runs_dead, t, k, reason or "unknown").inc(count)

    def run_ended(self, tenant: str, task: str, state: str, reason: str | None = None) -> None:
        t, k = self.labels(tenant, task)
        if state == "succeeded":
            self._child(self.runs_succeeded, t, k).inc()
        elif state == "dead":
            self._child(self.runs_dead, t, k, reason or "unknown").inc()

    def breaker_changed(self, target: str, value: int) -> None:
        """A circuit breaker's new state (``targets.breaker.STATE_VALUES``)."""
        self.breaker_state.labels(target).set(value)

    def outbox_observed(self, depth: OutboxDepth, now: datetime) -> None:
        """The outbox's depth, as a relay read it."""
        self.outbox_pending.clear()
        for connection, count in depth.by_connection.items():
            self.outbox_pending.labels(connection).set(count)
        age = 0.0 if depth.oldest is None else max(0.0, (now - depth.oldest).total_seconds())
        self.outbox_oldest_age.set(age)
        self.outbox_dead.set(depth.dead)

    # --- exposition -----------------------------------------------------------------------

    async def refresh(self, source: StatsSource | None, *, max_age: float = 5.0) -> None:
        """Re-read the cluster gauges through ``source`` if the last read is older than
        ``max_age`` seconds. A failed read keeps the previous values (and is logged)."""
        if source is not None:
            await self.cluster.refresh(source, max_age=max_age)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    content_type = CONTENT_TYPE_LATEST


_TENANT_GAUGES = (
    ("duetime_runs_due", "Runs due but not started, per tenant."),
    (
        "duetime_runs_due_oldest_age_seconds",
        "Age of the oldest due-but-not-started run, per tenant.",
    ),
    ("duetime_runs_running", "Runs executing, per tenant."),
    ("duetime_dead_letters", "Dead runs (dead-letter queue size), per tenant."),
)
"""The per-tenant cluster gauges (name, help), in the order of the values folded per tenant."""


class ClusterCollector(Collector):
    """The cluster gauges, from the latest :class:`ClusterStats` read."""

    def __init__(self) -> None:
        self.stats: ClusterStats | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self._tenant = _Bounded(MAX_TENANTS)
        self._queue = _Bounded(MAX_QUEUES)
        self._workflow = _Bounded(MAX_TASKS)

    async def refresh(self, source: StatsSource, *, max_age: float) -> None:
        async with self._lock:
            if self.stats is not None and time.monotonic() - self._read_at < max_age:
                return
            try:
                self.stats = await source()
                self._read_at = time.monotonic()
            except Exception as exc:
                log.warning("reading the cluster gauges failed: %s", exc)

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        if stats is None:
            return
        families = [GaugeMetricFamily(n, h, labels=["tenant"]) for n, h in _TENANT_GAUGES]
        folded: dict[str, list[float]] = {}
        for counts in stats.tenants:
            tenant = self._tenant(counts.tenant)
            values = folded.setdefault(tenant, [0, 0, 0, 0])
            values[0] += counts.due
            values[1] = max(values[1], stats.oldest_due_age(counts.tenant))
            values[2] += counts.running
            values[3] += counts.dead
        for tenant, values in sorted(folded.items()):
            for family, value in zip(families, values, strict=True):
                family.add_metric([tenant], value)
        yield from families
        yield from self._queues(stats)
        yield self._workflow_instances(stats)
        yield GaugeMetricFamily(
            "duetime_runs_due_oldest_age_max_seconds",
            "Age of the oldest due-but-not-started run of any tenant.",
            value=stats.oldest_due_age(),
        )
        yield GaugeMetricFamily(
            "duetime_leases_expired",
            "Running runs whose lease expired, not yet reaped.",
            value=stats.expired_leases,
        )
        yield GaugeMetricFamily(
            "duetime_jobs_overdue",
            "Active jobs whose next occurrence passed and is not materialized yet.",
            value=stats.overdue_jobs,
        )
        overdue_age = (
            0.0
            if stats.oldest_overdue_at is None
            else max(0.0, (stats.now - stats.oldest_overdue_at).total_seconds())
        )
        yield GaugeMetricFamily(
            "duetime_jobs_overdue_oldest_age_seconds",
            "How late the most overdue job's materialization is.",
            value=overdue_age,
        )
        yield GaugeMetricFamily(
            "duetime_workers_live", "Workers that heartbeated recently.", value=len(stats.workers)
        )
        yield GaugeMetricFamily(
            "duetime_nodes_live",
            "duetime processes that heartbeated recently.",
            value=len(stats.nodes),
        )
        yield GaugeMetricFamily(
            "duetime_leader_term",
            "The current leader's term (0: no leader).",
            value=0 if stats.leader is None else stats.leader.term,
        )
        yield GaugeMetricFamily(
            "duetime_leader_present",
            "1 while a node holds an unexpired leadership.",
            value=0 if stats.leader is None else 1,
        )

    def _workflow_instances(self, stats: ClusterStats) -> Metric:
        """Instances held by tenant, workflow and state, read from the database at scrape time
        (instances end in whichever process completes their last step, or on cancel)."""
        family = GaugeMetricFamily(
            "duetime_workflow_instances",
            "Workflow instances held (retention prunes ended ones), by tenant, workflow and "
            "state (running, succeeded, failed, cancelled).",
            labels=["tenant", "workflow", "state"],
        )
        folded: dict[tuple[str, str, str], int] = {}
        for tenant, workflow, state, count in stats.workflow_instances:
            key = (self._tenant(tenant), self._workflow(workflow), state)
            folded[key] = folded.get(key, 0) + count
        for key, count in sorted(folded.items()):
            family.add_metric(list(key), count)
        return family

    def _queues(self, stats: ClusterStats) -> Iterator[Metric]:
        """Per tenant and queue: due depth, oldest due age, in flight, throttled by quota."""
        labels = ["tenant", "queue"]
        due = GaugeMetricFamily(
            "duetime_queue_due", "Runs due and not claimed, per tenant and queue.", labels=labels
        )
        oldest = GaugeMetricFamily(
            "duetime_queue_due_oldest_age_seconds",
            "How long the oldest due run has been available, per tenant and queue.",
            labels=labels,
        )
        in_flight = GaugeMetricFamily(
            "duetime_queue_in_flight",
            "Runs claimed and not finished (claimed ahead or started), per tenant and queue.",
            labels=labels,
        )
        throttled = GaugeMetricFamily(
            "duetime_queue_throttled",
            "Due runs held back by their tenant's quota right now, per tenant and queue.",
            labels=labels,
        )
        folded: dict[tuple[str, str], list[float]] = {}
        for q in stats.queues:
            key = (self._tenant(q.tenant), self._queue(q.queue))
            values = folded.setdefault(key, [0, 0, 0, 0])
            values[0] += q.due
            values[1] = max(values[1], q.oldest_due_age)
            values[2] += q.in_flight
            values[3] += q.throttled
        for key, (n_due, age, n_in_flight, n_throttled) in sorted(folded.items()):
            due.add_metric(list(key), n_due)
            oldest.add_metric(list(key), age)
            in_flight.add_metric(list(key), n_in_flight)
            throttled.add_metric(list(key), n_throttled)
        yield from (due, oldest, in_flight, throttled)


_default: Metrics | None = None


def metrics() -> Metrics:
    """The process-wide metrics (registered in prometheus_client's default registry)."""
    global _default
    if _default is None:
        _default = Metrics(REGISTRY)
    return _default


class MetricsServer:
    """``/metrics`` on its own port, for worker and scheduler processes (``--metrics-port``).
    Serves until ``stop`` is set; ``port=0`` picks a free port (:attr:`port` tells which)."""

    def __init__(
        self,
        source: StatsSource | None,
        *,
        host: str = "127.0.0.1",
        port: int = 9108,
        registry: Metrics | None = None,
        on_ready: Callable[[MetricsServer], None] | None = None,
    ) -> None:
        self.source = source
        self.host = host
        self.port = port
        self.metrics = registry or metrics()
        self.on_ready = on_ready

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def run(self, stop: asyncio.Event) -> None:
        from aiohttp import web

        async def handle(request: web.Request) -> web.Response:
            await self.metrics.refresh(self.source)
            return web.Response(
                body=self.metrics.exposition(),
                headers={"Content-Type": self.metrics.content_type},
            )

        app = web.Application()
        app.router.add_get("/metrics", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        server: Any = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("metrics on %s", self.url)
        if self.on_ready is not None:
            self.on_ready(self)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
