"""The observability methods of the Store protocol (``queries/observability.sql`` of each
dialect), written once for both stores; mixed into :class:`~duetime.store._sql.SQLStore`.

Every read takes ``now`` once from the store's clock (or the caller) and passes it to each
statement, so one snapshot's numbers agree with each other.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from duetime import _json
from duetime._monitoring import (
    AlertFacts,
    ClusterStats,
    Incident,
    IncidentEvent,
    QueueDepth,
    Timeline,
)
from duetime.store import _monitoring_rows as obs
from duetime.store import _rows
from duetime.store._sql_surface import SQLSurface
from duetime.store.base import (
    AlertFactsParams,
    IncidentDeliveryParams,
    IncidentListParams,
    IncidentsApplied,
    IncidentsApplyParams,
    StatsParams,
    TimelineParams,
)


class SQLObservability(SQLSurface):
    """Stats, timelines, alert facts and incidents over the store's connection surface."""

    async def _stats(self, conn: Any, now: datetime, live_after: datetime) -> ClusterStats:
        c = self.codec
        leader = await self._one(conn, "stats_leader", now=now)
        return obs.cluster_stats(
            c,
            now=now,
            due=await self._all(conn, "stats_due", now=now),
            running=await self._all(conn, "stats_running"),
            dead=await self._all(conn, "stats_dead"),
            expired=await self._one(conn, "stats_leases_expired", now=now),
            overdue=await self._one(conn, "stats_jobs_overdue", now=now),
            workers=[
                _rows.worker_from_row(r, c)
                for r in await self._all(conn, "stats_workers_live", live_after=live_after)
            ],
            nodes=[
                _rows.node_from_row(r, c)
                for r in await self._all(conn, "stats_nodes_live", live_after=live_after)
            ],
            leader=None if leader is None else _rows.leadership_from_row(leader, c),
        )

    async def stats_snapshot(self, params: StatsParams) -> ClusterStats:
        async with self._read() as conn:
            now = await self._now(conn, params.now)
            return await self._stats(conn, now, params.live_after)

    async def stats_timeline(self, params: TimelineParams) -> Timeline:
        async with self._read() as conn:
            values = {"tenant": params.tenant, "since": params.since, "step": params.step}
            runs = await self._all(conn, "timeline_runs", **values)
            attempts = await self._all(conn, "timeline_attempts", **values)
        return obs.timeline(
            since=params.since,
            step=params.step,
            buckets=params.buckets,
            runs=runs,
            attempts=attempts,
        )

    async def alert_facts(self, params: AlertFactsParams) -> AlertFacts:
        c = self.codec
        async with self._read() as conn:
            now = await self._now(conn, params.now)
            p, n = params, params.limit
            dead = await self._all(
                conn, "alert_dead_runs", since=p.dead_since, ids=list(p.dead_ids), limit=n
            )
            sla = await self._all(conn, "alert_sla_jobs", now=now, ids=list(p.sla_ids), limit=n)
            running = await self._all(
                conn, "alert_running", before=p.running_before, ids=list(p.running_ids), limit=n
            )
            lost = await self._all(
                conn, "alert_lost_leases", since=p.dead_since, min_lost=p.lost_leases, limit=n
            )
            facts = {f.run_id: f for f in (obs.running_fact(r, c) for r in [*running, *lost])}
            durations: dict[uuid.UUID, list[float]] = {}
            for job_id in {f.job_id for f in facts.values()}:
                rows = await self._all(conn, "alert_durations", job_id=job_id)
                durations[job_id] = obs.durations(rows, c)
            stats = await self._stats(conn, now, params.live_after)
        return AlertFacts(
            now=now,
            dead_runs=[obs.dead_fact(r, c) for r in dead],
            sla=[obs.sla_fact(r, c) for r in sla],
            running=list(facts.values()),
            durations=durations,
            stats=stats,
        )

    async def incidents_apply(self, params: IncidentsApplyParams) -> IncidentsApplied:
        opened: list[Incident] = []
        resolved: list[Incident] = []
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            if not await self._holds(conn, params.leader, now):
                return IncidentsApplied([], [], led=False)
            term = None if params.leader is None else params.leader.term
            for cond in params.open:
                row = await self._one(
                    conn,
                    "incident_insert",
                    id=uuid.uuid4(),
                    kind=str(cond.kind),
                    subject=cond.subject,
                    tenant=cond.tenant,
                    job_id=cond.job_id,
                    run_id=cond.run_id,
                    summary=cond.summary,
                    details=_json.dumps(cond.details),
                    now=now,
                    term=term,
                )
                if row is not None:
                    opened.append(obs.incident_from_row(row, self.codec))
            for incident_id, resolution in params.resolve:
                row = await self._one(
                    conn, "incident_resolve", id=incident_id, resolution=resolution, now=now
                )
                if row is not None:
                    resolved.append(obs.incident_from_row(row, self.codec))
        return IncidentsApplied(opened, resolved)

    async def incidents_list(self, params: IncidentListParams) -> list[Incident]:
        if params.unsent_before is not None:
            rows = await self._read_all(
                "incidents_unsent", before=params.unsent_before, limit=params.limit
            )
        else:
            tenants = None if params.tenants is None else [t or "" for t in params.tenants]
            rows = await self._read_all(
                "incidents_list", firing=params.firing, tenants=tenants, limit=params.limit
            )
        return [obs.incident_from_row(r, self.codec) for r in rows]

    async def incident_delivery(self, params: IncidentDeliveryParams) -> bool:
        name = (
            "incident_delivered_fired"
            if params.event is IncidentEvent.FIRED
            else "incident_delivered_resolved"
        )
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            changed = await self._exec(
                conn,
                name,
                id=params.incident_id,
                done=params.done,
                delivered=_json.dumps(list(params.delivered)),
                error=params.error,
                next_at=params.next_try_at,
                now=now,
            )
        return changed == 1

    async def incidents_prune(self, before: datetime, limit: int = 1000) -> int:
        async with self._tx() as conn:
            return await self._exec(conn, "incidents_prune", before=before, limit=limit)

    async def depth_samples_record(self, now: datetime | None = None) -> int:
        async with self._tx() as conn:
            at = await self._now(conn, now)
            return await self._exec(conn, "depth_samples_record", now=at)

    async def depth_samples_list(self, tenant: str, since: datetime) -> list[QueueDepth]:
        rows = await self._read_all("depth_samples_list", tenant=tenant, since=since)
        return [obs.queue_depth(r, self.codec) for r in rows]

    async def depth_samples_prune(self, before: datetime) -> int:
        async with self._tx() as conn:
            return await self._exec(conn, "depth_samples_prune", before=before)

    async def runs_last_workers(
        self, tenant: str, run_ids: list[uuid.UUID]
    ) -> dict[uuid.UUID, str]:
        if not run_ids:
            return {}
        rows = await self._read_all("runs_last_workers", tenant=tenant, ids=run_ids)
        return {self.codec.uuid(r["run_id"]): r["worker_id"] for r in rows}
