"""What the store offers for workflows (part of :class:`duetime.store.base.Store`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from duetime.workflows.definition import WorkflowDefinition
from duetime.workflows.engine import InstanceState
from duetime.workflows.types import (
    StepInputs,
    StepRecord,
    StepRun,
    WorkflowInstance,
    WorkflowVersion,
)


class WorkflowInstanceReads(Protocol):
    """The workflow read of the API's list pages (a replica's :class:`~duetime.store.reads.
    ReadStore` serves it too)."""

    async def workflow_instances_list(
        self,
        tenant: str,
        *,
        workflow: str | None = None,
        state: InstanceState | None = None,
        job_id: uuid.UUID | None = None,
        limit: int = 100,
    ) -> list[WorkflowInstance]:
        """The tenant's instances, newest first."""
        ...


class WorkflowStore(WorkflowInstanceReads, Protocol):
    async def workflow_register(
        self, tenant: str, definition: WorkflowDefinition, now: datetime | None = None
    ) -> tuple[WorkflowVersion, bool]:
        """Store ``definition`` as the workflow's next version unless a version with the same
        content (digest) exists: then that one, with ``created`` False. Serialized per
        (tenant, name)."""
        ...

    async def workflow_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> WorkflowVersion:
        """A version (the latest when None). NotFound."""
        ...

    async def workflow_versions(self, tenant: str, name: str) -> list[int]:
        """The version numbers of a workflow, oldest first (empty: not registered)."""
        ...

    async def workflows_list(self, tenant: str) -> list[WorkflowVersion]:
        """The latest version of each of the tenant's workflows, by name."""
        ...

    async def workflow_instance_get(
        self, tenant: str, instance_id: uuid.UUID
    ) -> WorkflowInstance: ...

    async def workflow_steps_list(
        self, tenant: str, instance_id: uuid.UUID, *, results: bool = True
    ) -> list[StepRecord]:
        """An instance's steps and items; their results only with ``results``."""
        ...

    async def workflow_step_runs(self, tenant: str, instance_id: uuid.UUID) -> list[StepRun]:
        """An instance's steps and mapped items with their runs' attempts, timings and
        results (a few queries however wide a fan-out). NotFound for another tenant's."""
        ...

    async def workflow_step_inputs(
        self, run_id: uuid.UUID, *, key: str | None = None, tenant: str | None = None
    ) -> StepInputs | None:
        """What a step's run receives (its instance, place, input and parents' results);
        None for a run that is no step's. ``key`` and ``tenant`` (the run's idempotency key
        and tenant) let a mapped item's be answered without a read."""
        ...

    async def workflow_instance_cancel(
        self, tenant: str, instance_id: uuid.UUID, now: datetime | None = None
    ) -> WorkflowInstance:
        """Pending steps end ``cancelled``; step runs are cancelled (running ones asked to
        stop). Conflict unless running."""
        ...

    async def workflow_instance_retry(
        self, tenant: str, instance_id: uuid.UUID, now: datetime | None = None
    ) -> WorkflowInstance:
        """Replay each failed step's run (fresh attempt budget), re-open what was skipped
        below it, keep successes. Conflict unless failed."""
        ...

    async def workflows_sweep(self, limit: int = 100, now: datetime | None = None) -> int:
        """Plan instances whose step runs ended without being planned; idempotent."""
        ...
