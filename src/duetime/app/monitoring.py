"""``app.monitoring``: what the cluster is doing — queue snapshots, activity timelines, alert
incidents, live nodes — and why a job did or did not fire (the data :func:`duetime.explain.
explain` reads, gathered here)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from duetime._monitoring import ClusterStats, Incident, QueueDepth, Timeline
from duetime._types import BreakerState, JobStatus, Leadership, NodeInfo, RunState
from duetime.app._service import Scope, Service, check_limit
from duetime.app.jobs import Jobs
from duetime.app.reads import Reads, cluster_stats
from duetime.app.runs import Runs
from duetime.errors import ValidationError
from duetime.explain import Explanation, explain
from duetime.scheduler.bounds import Bounds
from duetime.store.base import IncidentListParams, TimelineParams

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_timeline(window: float, step: float) -> None:
    """Refuse a timeline of more than 1000 buckets, or outside 60 s to 7 days."""
    for name, value in (("window", window), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(name, f"must be a number of seconds, got {value!r}")
    if not 60 <= window <= 7 * 86400:
        raise ValidationError("window", "must be from 60 seconds to 7 days")
    if not 1 <= step <= window or window / step > 1000:
        raise ValidationError("step", "must be at least 1 s and window/step at most 1000")


def timeline_span(now: datetime, window: float, step: float) -> tuple[datetime, int]:
    """Where a timeline of ``window`` seconds in buckets of ``step`` starts, and how many
    buckets it has: buckets are aligned to multiples of ``step`` since the epoch (so calls
    agree on them) and the one holding ``now`` is the last."""
    buckets = int(-(-window // step))
    end = _EPOCH + timedelta(seconds=(((now - _EPOCH).total_seconds() // step) + 1) * step)
    return end - timedelta(seconds=buckets * step), buckets


class Monitoring(Service):
    """Read-only views for dashboards, metrics and operators (``app.monitoring``)."""

    __slots__ = ("_jobs", "_runs")

    def __init__(self, scope: Scope, jobs: Jobs, runs: Runs) -> None:
        super().__init__(scope)
        self._jobs = jobs
        self._runs = runs

    async def breakers(self) -> list[BreakerState]:
        """The circuit breakers workers report open or half-open (per worker process:
        docs/decisions/0027), oldest opened first. Installation-wide: hosts of every tenant."""
        return await self.store.breakers_list()

    async def nodes(self) -> tuple[list[NodeInfo], Leadership | None]:
        """Live nodes (as last heartbeated) and the current leadership."""
        return await self.store.nodes_list(), await self.store.leader_get()

    async def cluster_stats(self) -> ClusterStats:
        """The whole cluster's queues now (every tenant): due, running and dead runs, expired
        leases, overdue jobs, live workers and nodes, the leader, and per tenant and queue
        the due, in-flight and throttled runs. Metrics gauges read this."""
        return await cluster_stats(self.store, self.settings)

    async def timeline(self, *, window: float = 3600.0, step: float = 60.0) -> Timeline:
        """This tenant's activity over the last ``window`` seconds in buckets of ``step``:
        runs succeeded and dead, attempts failed and lost, fire-lag histograms."""
        check_timeline(window, step)
        since, buckets = timeline_span(await self.store.db_now(), window, step)
        return await self.store.stats_timeline(
            TimelineParams(tenant=self.tenant, since=since, step=step, buckets=buckets)
        )

    async def queue_depth(self, *, window: float = 3600.0) -> list[QueueDepth]:
        """This tenant's queue depth (due, running, dead) over the last ``window`` seconds (60
        s to 24 h), oldest first: the samples the leader records every 10 s
        (``maintenance/depth.py``) — empty while no scheduler leads."""
        if isinstance(window, bool) or not isinstance(window, int | float):
            raise ValidationError("window", f"must be a number of seconds, got {window!r}")
        if not 60 <= window <= 86400:
            raise ValidationError("window", "must be from 60 seconds to 24 hours")
        since = await self.store.db_now() - timedelta(seconds=window)
        return await self.store.depth_samples_list(self.tenant, since)

    async def last_workers(self, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The worker of each run's latest attempt (runs of this tenant that had one), for run
        lists: a finished run no longer names its worker (``lease_owner`` is cleared)."""
        return await Reads(self.store, self.tenant).last_workers(run_ids)

    async def incidents(
        self, *, firing: bool | None = None, limit: int = 100, all_tenants: bool = False
    ) -> list[Incident]:
        """Alert incidents of this tenant and cluster-wide ones (every tenant's with
        ``all_tenants``), newest first; ``firing`` True: open ones, False: resolved ones."""
        check_limit(limit)
        tenants = None if all_tenants else (self.tenant, None)
        return await self.store.incidents_list(
            IncidentListParams(firing=firing, tenants=tenants, limit=limit)
        )

    async def explain(self, job: str | uuid.UUID, *, last: int = 10, count: int = 5) -> Explanation:
        """Why ``job`` did or did not fire: its ``last`` occurrences, each with what happened
        and why, and its next ``count`` fire instants (local and UTC, with DST notes)."""
        check_limit(last)
        check_limit(count)
        current = await self._jobs.get(job)
        now = await self.store.db_now()
        page = await self._runs.find(current.id, limit=last)
        attempts = {
            r.id: await self._runs.attempts(r.id)
            for r in page.items
            if r.attempt > 1 or r.state in (RunState.DEAD, RunState.SCHEDULED)
        }
        skips = sorted(await self.store.skips_list(self.tenant, current.id), key=lambda k: k.first)
        live_after = now - timedelta(seconds=self.settings.worker_stale_after)
        served = {  # by the installation's workers or this tenant's remote ones
            task
            for worker in await self.store.workers_list()
            if worker.heartbeat_at > live_after and worker.tenant in (None, self.tenant)
            for task in worker.tasks
        }
        if current.status is JobStatus.ACTIVE:
            nexts = await self._jobs.next_fires(current.id, count)
        elif current.status is JobStatus.PAUSED and not current.schedule.one_shot:
            nexts = Bounds.of(current).preview(current.schedule, now, count)
        else:
            nexts = []
        return explain(
            current,
            now=now,
            runs=page.items,
            attempts=attempts,
            skips=[(k.first, k.last, k.count, k.reason) for k in skips[-last:]],
            next_fires=nexts,
            served_tasks=served,
            limit=last,
        )
