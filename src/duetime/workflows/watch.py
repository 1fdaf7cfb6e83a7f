"""What the metrics and the alerts read about workflow instances, across every tenant: how
many instances each workflow holds in each state (:class:`InstanceCount`, the
``duetime_workflow_instances`` gauge) and the instances an alert may be about
(:class:`InstanceAlertFact`: failed, or running past their job's SLA)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from duetime.workflows.engine import InstanceState


@dataclass(frozen=True, slots=True)
class InstanceCount:
    tenant: str
    workflow: str
    state: InstanceState
    count: int


@dataclass(frozen=True, slots=True)
class InstanceAlertFact:
    """A failed instance, or a running one older than its job's ``sla`` (seconds)."""

    instance_id: uuid.UUID
    tenant: str
    workflow: str
    version: int
    job_id: uuid.UUID
    job_name: str
    sla: float | None
    state: InstanceState
    reason: str | None
    created_at: datetime
    finished_at: datetime | None


class WorkflowWatchStore(Protocol):
    async def workflow_instance_counts(self) -> list[InstanceCount]:
        """Instances by (tenant, workflow, state), every tenant's (a metrics scrape)."""
        ...

    async def workflow_alert_instances(
        self,
        *,
        failed_since: datetime,
        failed_ids: list[uuid.UUID],
        now: datetime,
        limit: int,
    ) -> list[InstanceAlertFact]:
        """Every tenant's failed instances that ended at or after ``failed_since`` or whose
        id is in ``failed_ids`` (their incident is open), and running instances created more
        than their job's SLA before ``now``; oldest first, at most ``limit``. Read only."""
        ...
