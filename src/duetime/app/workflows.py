"""``app.workflows``: register workflow definitions, read their instances and steps, cancel
and retry instances (docs/workflows.md). An instance is started by a job whose target is
``{"type": "workflow", "name": …}``: ``app.schedule(name, target=…, cron=…)`` or a trigger."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from duetime._types import JSON, RunTrigger
from duetime.app._service import Service, check_task
from duetime.app.audit import audited
from duetime.app.jobs import Jobs
from duetime.app.reads import Reads
from duetime.app.runs import Runs
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.targets.http import validate_target
from duetime.workflows.definition import (
    Workflow,
    WorkflowDefinition,
    WorkflowLimits,
    is_workflow_name,
    parse,
)
from duetime.workflows.engine import WHOLE, InstanceState
from duetime.workflows.explain import StepWhy, explain
from duetime.workflows.types import (
    InstanceDetail,
    StepRecord,
    WorkflowInstance,
    WorkflowTrigger,
    WorkflowVersion,
)

TRIGGER_JOB_PREFIX = "workflow:"
"""``app.workflows.trigger(name)`` starts instances through the job ``workflow:<name>``."""

_TRIGGER_KEY = "workflow_trigger_key"
"""The job metadata entry keeping the idempotency key of the trigger that created the job."""


def instance_id_of(value: str | uuid.UUID) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFound(f"workflow instance {value!r} not found (not an id)") from None


class Workflows(Service):
    """Workflows of the app's tenant (``app.workflows``)."""

    __slots__ = ()

    def limits(self) -> WorkflowLimits:
        s = self.settings
        return WorkflowLimits(
            max_steps=s.workflow_max_steps,
            max_mapped=s.workflow_max_mapped,
            max_result_bytes=s.result_max_bytes,
            max_payload_bytes=s.payload_limit,
        )

    def definition_of(
        self, workflow: Workflow | WorkflowDefinition | Mapping[str, Any]
    ) -> WorkflowDefinition:
        """A builder, a definition or a JSON document, validated against the settings'
        limits (ValidationError naming where)."""
        limits = self.limits()
        if isinstance(workflow, Workflow):
            return workflow.definition(limits)
        if isinstance(workflow, WorkflowDefinition):
            return parse(workflow.document(), limits)
        return parse(workflow, limits)

    async def register(
        self,
        workflow: Workflow | WorkflowDefinition | Mapping[str, Any],
        *,
        allow_unregistered: bool = False,
    ) -> WorkflowVersion:
        """Register a definition: a new version when its content differs from every stored
        version, else the existing one (idempotent). Instances already running keep their
        version; the next instance takes the latest. Each step's task must be known (as for
        a job; ``allow_unregistered`` skips that) and each target valid."""
        version, _ = await self.register_version(workflow, allow_unregistered=allow_unregistered)
        return version

    async def register_version(
        self,
        workflow: Workflow | WorkflowDefinition | Mapping[str, Any],
        *,
        allow_unregistered: bool = False,
    ) -> tuple[WorkflowVersion, bool]:
        """:meth:`register`, also saying whether this call stored a new version (False: the
        same content was registered before, and this is that version)."""
        definition = self.definition_of(workflow)
        for i, step in enumerate(definition.steps):
            if step.target is not None:
                try:
                    validate_target(step.target)
                except ValidationError as exc:
                    raise ValidationError(f"steps[{i}].target.{exc.field}", exc.reason) from None
            elif step.task is not None:
                try:
                    await check_task(self._scope, step.task, allow_unregistered)
                except ValidationError as exc:
                    raise type(exc)(f"steps[{i}].task", exc.reason) from None
        with audited(self, "registered", "workflow", name=definition.name):
            return await self.store.workflow_register(self.tenant, definition)

    async def get(self, name: str, version: int | None = None) -> WorkflowVersion:
        """A workflow's version (the latest when None). NotFound."""
        if not is_workflow_name(name):
            raise NotFound(f"workflow {name!r} not found")
        return await self.store.workflow_get(self.tenant, name, version)

    async def versions(self, name: str) -> builtins.list[int]:
        """The version numbers of a workflow, oldest first. NotFound when it has none."""
        if not is_workflow_name(name):
            raise NotFound(f"workflow {name!r} not found")
        found = await self.store.workflow_versions(self.tenant, name)
        if not found:
            raise NotFound(f"workflow {name!r} not found")
        return found

    async def list(self) -> builtins.list[WorkflowVersion]:
        """The latest version of each workflow, by name."""
        return await self.store.workflows_list(self.tenant)

    async def instances(
        self,
        *,
        workflow: str | None = None,
        state: InstanceState | str | None = None,
        job: uuid.UUID | None = None,
        limit: int = 100,
    ) -> builtins.list[WorkflowInstance]:
        """Instances, newest first; filters by workflow name, state and starting job."""
        return await Reads(self.store, self.tenant).workflow_instances(
            workflow=workflow, state=state, job=job, limit=limit
        )

    async def instance(self, instance: str | uuid.UUID) -> WorkflowInstance:
        return await self.store.workflow_instance_get(self.tenant, instance_id_of(instance))

    async def steps(self, instance: str | uuid.UUID) -> builtins.list[StepRecord]:
        """The instance's steps (map index -1) and mapped items (0…n-1), with results."""
        return await self.store.workflow_steps_list(self.tenant, instance_id_of(instance))

    async def cancel(self, instance: str | uuid.UUID) -> WorkflowInstance:
        """Cancel a running instance: pending steps end ``cancelled``, step runs not yet
        started are cancelled and running ones are asked to stop. Conflict if it ended."""
        chosen = instance_id_of(instance)
        with audited(self, "cancelled", "workflow_instance", subject_id=chosen):
            return await self.store.workflow_instance_cancel(self.tenant, chosen)

    async def retry(self, instance: str | uuid.UUID) -> WorkflowInstance:
        """Retry a failed instance from its failures: failed steps' runs replay with a fresh
        attempt budget, what was skipped below them re-opens, successes are kept. Conflict
        unless the instance failed."""
        chosen = instance_id_of(instance)
        with audited(self, "retried", "workflow_instance", subject_id=chosen):
            return await self.store.workflow_instance_retry(self.tenant, chosen)

    async def trigger(
        self, name: str, payload: JSON = None, idempotency_key: str | None = None
    ) -> WorkflowTrigger:
        """Start an instance of the registered workflow ``name`` now, through the job
        ``workflow:<name>`` (target ``{"type": "workflow", "name": name}``). The first call
        creates that job with ``now=True`` and ``payload`` — the scheduler makes its start run
        at its next tick, so that answer has no run id yet; later calls trigger the job (a run
        without ``payload`` takes the job's). An ``idempotency_key`` makes repeats answer the
        first call's run (``created`` False), the creating call's included; the same key with
        another payload is Conflict, as a job's trigger. NotFound for an unregistered workflow;
        Conflict when ``workflow:<name>`` is a job that starts something else, or is
        cancelled."""
        await self.get(name)
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
            raise ValidationError("idempotency_key", "must be 1-200 characters")
        jobs = Jobs(self._scope)
        job_name = f"{TRIGGER_JOB_PREFIX}{name}"
        target: dict[str, Any] = {"type": "workflow", "name": name}
        try:
            job = await jobs.get(job_name)
        except NotFound:
            metadata = {} if idempotency_key is None else {_TRIGGER_KEY: idempotency_key}
            try:
                job = await jobs.schedule(
                    job_name,
                    target=target,
                    now=True,
                    payload=payload,
                    metadata=metadata,
                    create_only=True,
                )
                return WorkflowTrigger(job.id, job.name, None, True)
            except Conflict:  # another call created it meanwhile
                job = await jobs.get(job_name)
        if job.target != target:
            raise Conflict(f"job {job_name!r} exists and does not start workflow {name!r}")
        if idempotency_key is not None and job.metadata.get(_TRIGGER_KEY) == idempotency_key:
            if payload is not None and payload != job.payload:
                raise Conflict(f"idempotency key {idempotency_key!r} was used with another payload")
            first = await self._first_run(job.id, job.created_at)
            return WorkflowTrigger(job.id, job.name, first, False)
        run, created = await jobs.trigger_run(
            job.id, idempotency_key=idempotency_key, payload=payload
        )
        return WorkflowTrigger(job.id, job.name, run.id, created)

    async def _first_run(self, job: uuid.UUID, created_at: datetime) -> uuid.UUID | None:
        """The scheduled (``now``) run of a trigger job, due at its creation instant."""
        page = await Runs(self._scope, Jobs(self._scope)).find(
            job, until=created_at + timedelta(seconds=1), limit=10
        )
        scheduled = [r for r in page.items if r.trigger is RunTrigger.SCHEDULE]
        return min(scheduled, key=lambda r: r.created_at).id if scheduled else None

    async def detail(self, instance: str | uuid.UUID) -> InstanceDetail:
        """An instance with its version and its steps and mapped items (definition order,
        items by index) with their runs' attempts, timings and results: three reads however
        wide a fan-out. ``version`` is None for an instance of a workflow that was not
        registered when it started (it failed at once)."""
        found = await self.instance(instance)
        version = await self._version_of(found)
        steps = await self.store.workflow_step_runs(self.tenant, found.id)
        if version is not None:
            order = {s.name: i for i, s in enumerate(version.definition.steps)}
            steps.sort(key=lambda s: (order.get(s.step, len(order)), s.map_index))
        return InstanceDetail(instance=found, version=version, steps=steps)

    async def explain(self, instance: str | uuid.UUID) -> builtins.list[StepWhy]:
        """Why each step of the instance that has not started has not (which parent, which
        edge, which rule): :func:`duetime.workflows.explain.explain` over its steps' states."""
        found = await self.instance(instance)
        version = await self._version_of(found)
        if version is None:
            return []
        steps = await self.store.workflow_steps_list(self.tenant, found.id, results=False)
        rows = [r for r in steps if r.map_index == WHOLE]
        return explain(
            version.definition,
            {r.step: r.state for r in rows},
            instance=found.state,
            reasons={r.step: r.reason for r in rows},
        )

    async def _version_of(self, instance: WorkflowInstance) -> WorkflowVersion | None:
        try:
            return await self.get(instance.workflow, instance.version)
        except NotFound:
            return None
