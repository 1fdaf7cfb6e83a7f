"""The value types of workflows as the store and the app hand them out."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from duetime._types import JSON
from duetime.workflows.definition import WorkflowDefinition
from duetime.workflows.engine import InstanceState, StepState


@dataclass(frozen=True, slots=True)
class WorkflowVersion:
    """One registered version of a workflow (immutable once stored)."""

    tenant: str
    name: str
    version: int
    digest: str
    definition: WorkflowDefinition
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WorkflowInstance:
    """One execution of a workflow version, started by the run ``start_run_id`` of the
    workflow job ``job_id``; ``input`` is that run's payload."""

    id: uuid.UUID
    tenant: str
    workflow: str
    version: int
    job_id: uuid.UUID
    start_run_id: uuid.UUID
    state: InstanceState
    input: JSON
    reason: str | None
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A step of an instance (``map_index`` -1), or one item of a mapped step (0…n-1), with
    its run and, once it succeeded, its result."""

    step: str
    map_index: int
    state: StepState
    run_id: uuid.UUID | None
    reason: str | None
    updated_at: datetime
    result: JSON = None


@dataclass(frozen=True, slots=True)
class StepRun:
    """A step (or mapped item) with its run's attempt, timings and result, as the instance
    views show it: ``ready_at`` is when its run was created (its parents allowed it)."""

    step: str
    map_index: int
    state: StepState
    reason: str | None
    run_id: uuid.UUID | None
    updated_at: datetime
    result: JSON = None
    attempt: int = 0
    ready_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class StepInputs:
    """What a step's run receives besides its payload (``ctx.workflow``): its instance, its
    place, the instance's input and its parents' results by step name (a mapped parent's:
    the list of its items' results, in item order)."""

    instance_id: uuid.UUID
    workflow: str
    step: str
    map_index: int | None
    input: JSON
    parents: dict[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InstanceDetail:
    """An instance with its version (the definition it runs) and its steps and mapped items
    with their runs' timings: what the instance views draw."""

    instance: WorkflowInstance
    version: WorkflowVersion | None
    steps: list[StepRun]


@dataclass(frozen=True, slots=True)
class WorkflowTrigger:
    """What ``app.workflows.trigger`` did: the workflow job ``workflow:<name>`` and the start
    run it made (None when this call created the job: the scheduler makes that first run at
    its next tick); ``created`` False when an earlier call with the same idempotency key did."""

    job_id: uuid.UUID
    job_name: str
    run_id: uuid.UUID | None
    created: bool
