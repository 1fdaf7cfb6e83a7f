"""``/api/v1/workflows`` (definitions and their versions; trigger) and
``/api/v1/workflow-instances`` (instances with their graph, steps and timings; cancel, retry,
explain) — docs/workflows.md. Every read is the caller's tenant's: another tenant's workflow
or instance is 404."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, ClassVar

from fastapi import Body, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import Limit
from duetime.api.schemas import NO_NUL, PRINTABLE, parse_id
from duetime.workflows.definition import Condition, TriggerRule
from duetime.workflows.engine import InstanceState, StepState
from duetime.workflows.explain import StepWhy, graph_edges
from duetime.workflows.types import InstanceDetail, StepRun, WorkflowInstance, WorkflowVersion

TAG = {
    "name": "workflows",
    "description": "Workflow definitions (DAGs of steps), their instances with step states, "
    "results and timings; trigger, cancel, retry from failure, explain (docs/workflows.md).",
}

WorkflowName = Annotated[
    str, Path(min_length=1, max_length=100, pattern=PRINTABLE, description="The workflow's name.")
]
InstanceId = Annotated[
    str, Path(description="The instance's id (a UUID). A malformed or unknown id is 404.")
]


# --- schemas ---------------------------------------------------------------------------------


class WorkflowSummaryOut(BaseModel):
    name: str
    version: int = Field(description="The latest version.")
    digest: str = Field(description="SHA-256 of the canonical document.")
    created_at: datetime = Field(description="When this version was registered.")
    steps: int = Field(description="How many steps the version has.")

    @classmethod
    def of(cls, v: WorkflowVersion) -> WorkflowSummaryOut:
        return cls(
            name=v.name,
            version=v.version,
            digest=v.digest,
            created_at=v.created_at,
            steps=len(v.definition.steps),
        )


class WorkflowVersionOut(BaseModel):
    name: str
    version: int
    digest: str
    created_at: datetime
    definition: dict[str, Any] = Field(
        description="The JSON document (`name`, `steps`), defaults left out."
    )

    @classmethod
    def of(cls, v: WorkflowVersion) -> WorkflowVersionOut:
        return cls(
            name=v.name,
            version=v.version,
            digest=v.digest,
            created_at=v.created_at,
            definition=v.definition.document(),
        )


class WorkflowDetailOut(WorkflowVersionOut):
    versions: list[int] = Field(description="Every version number of the workflow, oldest first.")


class WorkflowTriggerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payload: Any = Field(
        default=None,
        description="The instance's input (the start run's payload). Omitted: the workflow "
        "job's payload (the first trigger's).",
    )
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=PRINTABLE,
        description="The same key never starts a second instance: a repeat answers 200 with "
        "the first call's run; the same key with another payload is 409.",
    )


class WorkflowTriggerOut(BaseModel):
    run_id: uuid.UUID | None = Field(
        description="The start run. Null when this call created the job `workflow:<name>`: "
        "the scheduler makes that first run at its next tick (find its instance with "
        "`GET /workflow-instances?job_id=`)."
    )
    job_id: uuid.UUID
    job_name: str = Field(description="`workflow:<name>`.")


class InstanceOut(BaseModel):
    id: uuid.UUID
    workflow: str
    version: int
    job_id: uuid.UUID = Field(description="The workflow job whose run started it.")
    start_run_id: uuid.UUID
    state: InstanceState
    input: Any = Field(description="The start run's payload.")
    reason: str | None = Field(description="Why it failed or was cancelled.")
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, i: WorkflowInstance) -> InstanceOut:
        return cls(
            id=i.id,
            workflow=i.workflow,
            version=i.version,
            job_id=i.job_id,
            start_run_id=i.start_run_id,
            state=i.state,
            input=i.input,
            reason=i.reason,
            created_at=i.created_at,
            finished_at=i.finished_at,
        )


class EdgeOut(BaseModel):
    parent: str = Field(alias="from", description="The parent step.")
    child: str = Field(alias="to", description="The step that follows it.")
    on: Condition


class StepOut(BaseModel):
    step: str
    map_index: int = Field(description="-1: the step's own row; 0…n-1: a mapped step's items.")
    state: StepState
    reason: str | None
    run_id: uuid.UUID | None = Field(description="Its run (null: none yet, or a mapped step).")
    result: Any = Field(description="What its run returned (JSON; null until it succeeded).")
    attempt: int = Field(description="Attempts its run has had.")
    started_at: datetime | None
    finished_at: datetime | None
    ready_at: datetime | None = Field(description="When its run was created (parents allowed it).")

    @classmethod
    def of(cls, s: StepRun) -> StepOut:
        return cls(
            step=s.step,
            map_index=s.map_index,
            state=s.state,
            reason=s.reason,
            run_id=s.run_id,
            result=s.result,
            attempt=s.attempt,
            started_at=s.started_at,
            finished_at=s.finished_at,
            ready_at=s.ready_at,
        )


class InstanceDetailOut(InstanceOut):
    definition: dict[str, Any] | None = Field(
        description="The document of the version it runs (null: that workflow was not "
        "registered when it started)."
    )
    edges: list[EdgeOut] = Field(description="The graph: `from` → `to`, satisfied `on`.")
    steps: list[StepOut] = Field(
        description="Each step (definition order) and each mapped item (by index)."
    )

    @classmethod
    def detail(cls, d: InstanceDetail) -> InstanceDetailOut:
        definition = None if d.version is None else d.version.definition
        return cls(
            **InstanceOut.of(d.instance).model_dump(),
            definition=None if definition is None else definition.document(),
            edges=[]
            if definition is None
            else [
                EdgeOut.model_validate({"from": e.parent, "to": e.child, "on": e.on})
                for e in graph_edges(definition)
            ],
            steps=[StepOut.of(s) for s in d.steps],
        )


class EdgeWhyOut(BaseModel):
    parent: str = Field(alias="from")
    on: Condition
    parent_state: StepState
    satisfied: bool | None = Field(
        description="true: satisfied; false: can no longer be; null: not yet."
    )


class StepWhyOut(BaseModel):
    step: str
    state: StepState
    why: str = Field(description='e.g. "waiting for extract (on_success)".')
    rule: TriggerRule
    map_over: str | None
    edges: list[EdgeWhyOut]

    @classmethod
    def of(cls, w: StepWhy) -> StepWhyOut:
        return cls(
            step=w.step,
            state=w.state,
            why=w.why,
            rule=w.rule,
            map_over=w.map_over,
            edges=[
                EdgeWhyOut.model_validate(
                    {
                        "from": e.parent,
                        "on": e.on,
                        "parent_state": e.parent_state,
                        "satisfied": e.satisfied,
                    }
                )
                for e in w.edges
            ],
        )


class ExplainOut(BaseModel):
    instance_id: uuid.UUID
    state: InstanceState
    steps: list[StepWhyOut] = Field(description="Each step that has not started, with why.")


# --- workflows -------------------------------------------------------------------------------


class ListWorkflows(Endpoint):
    """List workflows
    The latest version of each of the tenant's workflows, by name."""

    method, path, tag = "GET", "/workflows", "workflows"

    async def handle(self, caller: Viewer) -> list[WorkflowSummaryOut]:
        return [WorkflowSummaryOut.of(v) for v in await caller.app.workflows.list()]


class RegisterWorkflow(Endpoint):
    """Register a workflow
    The body is the JSON document (`{"name": …, "steps": [{…}, …]}`, docs/workflows.md). A new
    content is a new version (201); the content of an existing version answers it (200). An
    invalid document is 422 naming where (`steps[2].after[0]`); a task no worker serves is
    422 unless `allow_unregistered`."""

    method, path, tag, status_code = "POST", "/workflows", "workflows", 201
    errors = (422,)
    responses: ClassVar[dict[int | str, dict[str, Any]]] = {
        200: {"model": WorkflowVersionOut, "description": "The same content, registered before."}
    }

    async def handle(
        self,
        caller: Operator,
        response: Response,
        body: Annotated[dict[str, Any], Body(description="The workflow document.")],
        allow_unregistered: Annotated[
            bool, Query(description="Accept tasks no worker has registered yet.")
        ] = False,
    ) -> WorkflowVersionOut:
        version, created = await caller.app.workflows.register_version(
            body, allow_unregistered=allow_unregistered
        )
        if not created:
            response.status_code = 200
        return WorkflowVersionOut.of(version)


class GetWorkflow(Endpoint):
    """Get a workflow
    Its latest version (or `version`), with its document and every version number."""

    method, path, tag = "GET", "/workflows/{name}", "workflows"
    errors = (404, 422)

    async def handle(
        self,
        name: WorkflowName,
        caller: Viewer,
        version: Annotated[
            int | None, Query(ge=1, le=2**31 - 1, description="A version number.")
        ] = None,
    ) -> WorkflowDetailOut:
        found = await caller.app.workflows.get(name, version)
        versions = await caller.app.workflows.versions(name)
        return WorkflowDetailOut(**WorkflowVersionOut.of(found).model_dump(), versions=versions)


class TriggerWorkflow(Endpoint):
    """Start an instance
    Through the job `workflow:<name>`: the first call creates it (`now`, with the payload;
    `run_id` null, the scheduler makes the run at its next tick), later calls trigger it.
    With `idempotency_key` a repeat answers 200 with the first call's run. An unregistered
    workflow is 404; a `workflow:<name>` job that is cancelled or starts something else, 409."""

    method, path, tag, status_code = "POST", "/workflows/{name}/trigger", "workflows", 201
    errors = (404, 409, 422)
    responses: ClassVar[dict[int | str, dict[str, Any]]] = {
        200: {"model": WorkflowTriggerOut, "description": "The run an earlier call made."}
    }

    async def handle(
        self,
        name: WorkflowName,
        caller: Operator,
        response: Response,
        body: Annotated[WorkflowTriggerIn | None, Body()] = None,
    ) -> WorkflowTriggerOut:
        given = body or WorkflowTriggerIn()
        done = await caller.app.workflows.trigger(
            name, payload=given.payload, idempotency_key=given.idempotency_key
        )
        if not done.created:
            response.status_code = 200
        return WorkflowTriggerOut(run_id=done.run_id, job_id=done.job_id, job_name=done.job_name)


# --- instances -------------------------------------------------------------------------------


class ListInstances(Endpoint):
    """List workflow instances
    Newest first; filter by workflow, state and starting job."""

    method, path, tag = "GET", "/workflow-instances", "workflows"
    errors = (422,)

    async def handle(
        self,
        caller: Viewer,
        workflow: Annotated[
            str | None, Query(max_length=100, pattern=NO_NUL, description="A workflow's name.")
        ] = None,
        state: InstanceState | None = None,
        job_id: Annotated[
            str | None, Query(max_length=100, description="The workflow job's id.")
        ] = None,
        limit: Limit = 100,
    ) -> list[InstanceOut]:
        job = None if job_id is None else parse_id(job_id, "job")
        found = await caller.reads.workflow_instances(
            workflow=workflow, state=state, job=job, limit=limit
        )
        return [InstanceOut.of(i) for i in found]


class GetInstance(Endpoint):
    """Get a workflow instance
    With its version's document, the graph's edges, and each step and mapped item with its
    state, reason, run, result, attempt and timings."""

    method, path, tag = "GET", "/workflow-instances/{instance_id}", "workflows"
    errors = (404,)

    async def handle(self, instance_id: InstanceId, caller: Viewer) -> InstanceDetailOut:
        found = parse_id(instance_id, "workflow instance")
        return InstanceDetailOut.detail(await caller.app.workflows.detail(found))


class CancelInstance(Endpoint):
    """Cancel a workflow instance
    Pending steps end `cancelled`, step runs not yet started are cancelled and running ones
    asked to stop. An instance that has ended is 409."""

    method, path, tag = "POST", "/workflow-instances/{instance_id}/cancel", "workflows"
    errors = (404, 409)

    async def handle(self, instance_id: InstanceId, caller: Operator) -> InstanceOut:
        found = parse_id(instance_id, "workflow instance")
        return InstanceOut.of(await caller.app.workflows.cancel(found))


class RetryInstance(Endpoint):
    """Retry a workflow instance from its failures
    Failed steps' runs replay with a fresh attempt budget, what was skipped below them
    re-opens, successes are kept. An instance that did not fail is 409."""

    method, path, tag = "POST", "/workflow-instances/{instance_id}/retry", "workflows"
    errors = (404, 409)

    async def handle(self, instance_id: InstanceId, caller: Operator) -> InstanceOut:
        found = parse_id(instance_id, "workflow instance")
        return InstanceOut.of(await caller.app.workflows.retry(found))


class ExplainInstance(Endpoint):
    """Explain a workflow instance
    For each step that has not started: why — which parent it waits for, which edge can no
    longer hold, which rule."""

    method, path, tag = "GET", "/workflow-instances/{instance_id}/explain", "workflows"
    errors = (404,)

    async def handle(self, instance_id: InstanceId, caller: Viewer) -> ExplainOut:
        found = parse_id(instance_id, "workflow instance")
        instance = await caller.app.workflows.instance(found)
        steps = await caller.app.workflows.explain(found)
        return ExplainOut(
            instance_id=instance.id,
            state=instance.state,
            steps=[StepWhyOut.of(w) for w in steps],
        )


ENDPOINTS: tuple[type[Endpoint], ...] = (
    ListWorkflows,
    RegisterWorkflow,
    GetWorkflow,
    TriggerWorkflow,
    ListInstances,
    GetInstance,
    CancelInstance,
    RetryInstance,
    ExplainInstance,
)
