"""The store's reads for watching workflows (:class:`WorkflowWatchStore`): instance counts for
the metrics gauges, alert facts for the leader's alert pass. Dialect-free; the SQL is in each
dialect's ``queries/workflow_watch.sql``. Read only: nothing is locked."""

from __future__ import annotations

import uuid
from datetime import datetime

from duetime.store._sql_surface import SQLSurface
from duetime.workflows.engine import InstanceState
from duetime.workflows.watch import InstanceAlertFact, InstanceCount


class SQLWorkflowWatch(SQLSurface):
    async def workflow_instance_counts(self) -> list[InstanceCount]:
        async with self._read() as conn:
            rows = await self._all(conn, "workflow_instance_counts")
        return [
            InstanceCount(r["tenant"], r["workflow"], InstanceState(r["state"]), int(r["n"]))
            for r in rows
        ]

    async def workflow_alert_instances(
        self,
        *,
        failed_since: datetime,
        failed_ids: list[uuid.UUID],
        now: datetime,
        limit: int,
    ) -> list[InstanceAlertFact]:
        async with self._read() as conn:
            rows = await self._all(
                conn,
                "workflow_alert_instances",
                failed_since=failed_since,
                ids=list(failed_ids),
                now=now,
                limit=limit,
            )
        c = self.codec
        out: list[InstanceAlertFact] = []
        for r in rows:
            created = c.instant(r["created_at"])
            assert created is not None
            out.append(
                InstanceAlertFact(
                    instance_id=c.uuid(r["id"]),
                    tenant=r["tenant"],
                    workflow=r["workflow"],
                    version=r["version"],
                    job_id=c.uuid(r["job_id"]),
                    job_name=r["job_name"],
                    sla=None if r["sla_s"] is None else float(r["sla_s"]),
                    state=InstanceState(r["state"]),
                    reason=r["reason"],
                    created_at=created,
                    finished_at=c.instant(r["finished_at"]),
                )
            )
        return out
