"""PostgreSQL: the observability methods of the Store protocol (queries/observability.sql).

Every read takes ``now`` once from the database clock (or the caller) and passes it to each
statement, so one snapshot's numbers agree with each other.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg.types.json import Jsonb

from duetime import _json
from duetime._observe import AlertFacts, ClusterStats, Incident, IncidentEvent, Timeline
from duetime.store import _observe_rows as obs
from duetime.store import _rows
from duetime.store._rows import NativeCodec
from duetime.store.base import (
    AlertFactsParams,
    IncidentDeliveryParams,
    IncidentListParams,
    IncidentsApplied,
    IncidentsApplyParams,
    LeaderFence,
    StatsParams,
    TimelineParams,
)

_C = NativeCodec()
Conn = psycopg.AsyncConnection[Any]


def _ids(ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    return list(ids)


class _Host(Protocol):
    """What the mixin needs from :class:`~duetime.store.postgres.store.PostgresStore`."""

    def _tx(self) -> contextlib.AbstractAsyncContextManager[Conn]: ...
    def _read(self) -> contextlib.AbstractAsyncContextManager[Conn]: ...
    async def _all(self, conn: Conn, name: str, /, **values: Any) -> list[Any]: ...
    async def _one(self, conn: Conn, name: str, /, **values: Any) -> Any: ...
    async def _exec(self, conn: Conn, name: str, /, **values: Any) -> int: ...
    async def _now(self, conn: Conn, now: datetime | None) -> datetime: ...
    async def _holds(self, conn: Conn, fence: LeaderFence | None, now: datetime) -> bool: ...
    async def _stats(self, conn: Conn, now: datetime, live_after: datetime) -> ClusterStats: ...


class PostgresObservability:
    """Mixed into PostgresStore."""

    async def _stats(self: _Host, conn: Conn, now: datetime, live_after: datetime) -> ClusterStats:
        leader = await self._one(conn, "stats_leader", now=now)
        return obs.cluster_stats(
            _C,
            now=now,
            due=await self._all(conn, "stats_due", now=now),
            running=await self._all(conn, "stats_running"),
            dead=await self._all(conn, "stats_dead"),
            expired=await self._one(conn, "stats_leases_expired", now=now),
            overdue=await self._one(conn, "stats_jobs_overdue", now=now),
            workers=[
                _rows.worker_from_row(r, _C)
                for r in await self._all(conn, "stats_workers_live", live_after=live_after)
            ],
            nodes=[
                _rows.node_from_row(r, _C)
                for r in await self._all(conn, "stats_nodes_live", live_after=live_after)
            ],
            leader=None if leader is None else _rows.leadership_from_row(leader, _C),
        )

    async def stats_snapshot(self: _Host, params: StatsParams) -> ClusterStats:
        async with self._read() as conn:
            now = await self._now(conn, params.now)
            return await self._stats(conn, now, params.live_after)

    async def stats_timeline(self: _Host, params: TimelineParams) -> Timeline:
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

    async def alert_facts(self: _Host, params: AlertFactsParams) -> AlertFacts:
        async with self._read() as conn:
            now = await self._now(conn, params.now)
            dead = await self._all(
                conn,
                "alert_dead_runs",
                since=params.dead_since,
                ids=_ids(params.dead_ids),
                limit=params.limit,
            )
            sla = await self._all(
                conn, "alert_sla_jobs", now=now, ids=_ids(params.sla_ids), limit=params.limit
            )
            running = await self._all(
                conn,
                "alert_running",
                before=params.running_before,
                ids=_ids(params.running_ids),
                limit=params.limit,
            )
            lost = await self._all(
                conn,
                "alert_lost_leases",
                since=params.dead_since,
                min_lost=params.lost_leases,
                limit=params.limit,
            )
            facts = {f.run_id: f for f in (obs.running_fact(r, _C) for r in [*running, *lost])}
            durations: dict[uuid.UUID, list[float]] = {}
            for job_id in {f.job_id for f in facts.values()}:
                rows = await self._all(conn, "alert_durations", job_id=job_id)
                durations[job_id] = obs.durations(rows, _C)
            stats = await self._stats(conn, now, params.live_after)
        return AlertFacts(
            now=now,
            dead_runs=[obs.dead_fact(r, _C) for r in dead],
            sla=[obs.sla_fact(r, _C) for r in sla],
            running=list(facts.values()),
            durations=durations,
            stats=stats,
        )

    async def incidents_apply(self: _Host, params: IncidentsApplyParams) -> IncidentsApplied:
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
                    opened.append(obs.incident_from_row(row, _C))
            for incident_id, resolution in params.resolve:
                row = await self._one(
                    conn, "incident_resolve", id=incident_id, resolution=resolution, now=now
                )
                if row is not None:
                    resolved.append(obs.incident_from_row(row, _C))
        return IncidentsApplied(opened, resolved)

    async def incidents_list(self: _Host, params: IncidentListParams) -> list[Incident]:
        async with self._read() as conn:
            if params.unsent_before is not None:
                rows = await self._all(
                    conn, "incidents_unsent", before=params.unsent_before, limit=params.limit
                )
            else:
                tenants = None if params.tenants is None else [t or "" for t in params.tenants]
                rows = await self._all(
                    conn,
                    "incidents_list",
                    firing=params.firing,
                    tenants=tenants,
                    limit=params.limit,
                )
        return [obs.incident_from_row(r, _C) for r in rows]

    async def incident_delivery(self: _Host, params: IncidentDeliveryParams) -> bool:
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
                delivered=Jsonb(list(params.delivered)),
                error=params.error,
                next_at=params.next_try_at,
                now=now,
            )
        return changed == 1

    async def incidents_prune(self: _Host, before: datetime, limit: int = 1000) -> int:
        async with self._tx() as conn:
            return await self._exec(conn, "incidents_prune", before=before, limit=limit)
