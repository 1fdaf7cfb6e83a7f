"""The workflow methods of the store (``queries/workflows.sql`` of each dialect), written once
for both stores; mixed into :class:`~duetime.store._sql.SQLStore`.

The guarantee (docs/decisions/0020): a step's run is created in the transaction that records
its parent's end — :meth:`SQLWorkflows._workflows_advance`, called by ``runs_complete`` in the
completion's own transaction — while the instance's row is locked, and it is unique per
(instance, step, map index) twice over: the step's row (primary key) and its run (the
workflow job's run keyed ``wf:<instance>:<step>:<index>``). A step run that ends another way
(the reaper, an operator's cancel) is planned by :meth:`SQLWorkflows.workflows_sweep`, which
does what the completion would have done: planning reads only the steps' states.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime import _json
from duetime._audit import note
from duetime._outbox import CANCEL_EVENTS
from duetime._types import HTTP_TASK, JSON, Job, JobStatus, Run, RunState
from duetime.errors import Conflict, NotFound
from duetime.store import _rows
from duetime.store._rows import optional_json
from duetime.store._sql_surface import SQLSurface
from duetime.store._values import trigger_run_values
from duetime.store.base import JobRef, RunCompletion, RunTriggerParams
from duetime.workflows.definition import (
    StepSpec,
    WorkflowDefinition,
    WorkflowLimits,
    parse,
    parse_step_key,
    step_key,
)
from duetime.workflows.engine import (
    WHOLE,
    Finish,
    InstanceState,
    Items,
    Settle,
    Skip,
    Start,
    StepState,
    plan,
)
from duetime.workflows.types import (
    StepInputs,
    StepRecord,
    StepRun,
    WorkflowInstance,
    WorkflowVersion,
)


@dataclasses.dataclass(slots=True)
class _Pass:
    """One planning pass over a locked instance: what it read (each step's own row) and the
    changes it writes at the end."""

    instance: WorkflowInstance
    definition: WorkflowDefinition
    states: dict[str, StepState]
    items: dict[str, Items]
    previous: dict[str, tuple[Any, bool]] = dataclasses.field(default_factory=dict)
    """Each step's run (or, True, its items) from an earlier start: retry from failure
    re-opens a step below a failure, and its start then reuses them."""
    job: Job | None = None
    """The workflow job, read when a step starts (its runs are the job's)."""
    updates: dict[tuple[str, int], dict[str, Any]] = dataclasses.field(default_factory=dict)
    inserts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    runs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    expansions: list[tuple[str, dict[str, Any], list[JSON]]] = dataclasses.field(
        default_factory=list
    )
    """Mapped steps started: (step, its items' run template, the items), inserted by one
    ``workflow_items_insert`` each (PostgreSQL)."""
    finish: Finish | None = None

    def set(self, step: str, state: StepState, reason: str | None, run: Any = None) -> None:
        """A step's own row takes ``state`` (with its items' counts, for a mapped step)."""
        self.states[step] = state
        self.updates[(step, WHOLE)] = _change(step, WHOLE, state, reason, run, self.items.get(step))

    def item_ended(self, step: str, index: int, state: StepState, reason: str | None) -> None:
        self.updates[(step, index)] = _change(step, index, state, reason)
        counted = self.items.get(step, Items(0))
        self.items[step] = Items(
            counted.total,
            counted.ended + 1,
            counted.failed + (state is not StepState.SUCCEEDED),
        )
        whole = self.updates.get((step, WHOLE))
        state_now = self.states.get(step, StepState.RUNNING)
        reason_now = None if whole is None else whole["reason"]
        self.updates[(step, WHOLE)] = _change(
            step, WHOLE, state_now, reason_now, None, self.items[step]
        )


class SQLWorkflows(SQLSurface):
    """Workflow versions, instances and steps over the store's connection surface."""

    workflow_limits: WorkflowLimits = WorkflowLimits()
    """Bounds of mapped steps (the app sets them from its settings)."""

    # the rest of SQLStore this mixin uses
    dialect: str

    async def _lock_keys(self, conn: Any, keys: list[str]) -> bool:
        raise NotImplementedError

    def _records(self, rows: Sequence[dict[str, Any]]) -> str:
        raise NotImplementedError

    async def _notify(self, conn: Any) -> None:
        raise NotImplementedError

    async def _announce_cancels(self, conn: Any, ids: list[uuid.UUID]) -> None:
        raise NotImplementedError

    async def _attempts_insert(
        self, conn: Any, runs: Sequence[Run], outcome: str, message: str, now: datetime
    ) -> None:
        raise NotImplementedError

    async def _audit(self, conn: Any, now: datetime | None = None) -> None:
        raise NotImplementedError

    if TYPE_CHECKING:  # SQLOutbox's, after this mixin in SQLStore (a stub here would hide it)

        async def _run_events(
            self, conn: Any, ids: Sequence[uuid.UUID], kinds: frozenset[str], now: datetime | None
        ) -> None: ...

    # --- versions -----------------------------------------------------------------------

    async def workflow_register(
        self, tenant: str, definition: WorkflowDefinition, now: datetime | None = None
    ) -> tuple[WorkflowVersion, bool]:
        """Store ``definition`` as the workflow's next version unless the latest version has
        the same content (then that one, ``created`` False): registering the content of an
        older version again (a rollback) makes it the latest, as a new version. Serialized
        per (tenant, name)."""
        digest = definition.digest()
        async with self._tx() as conn:
            now = await self._now(conn, now)
            values = {"tenant": tenant, "name": definition.name, "digest": digest}
            latest = {"tenant": tenant, "name": definition.name}
            row = await self._one(conn, "workflow_latest", **latest)
            if row is not None and row["digest"] == digest:
                return self._version(row), False
            await self._lock_keys(conn, [f"workflow:{tenant}:{definition.name}"])
            row = await self._one(conn, "workflow_latest", **latest)
            if row is not None and row["digest"] == digest:
                return self._version(row), False
            row = await self._one(
                conn,
                "workflow_insert",
                definition=_json.dumps(definition.document()),
                now=now,
                **values,
            )
            note(change={"version": row["version"], "digest": digest})
            await self._audit(conn, now)
            return self._version(row), True

    async def workflow_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> WorkflowVersion:
        if version is None:
            row = await self._read_one("workflow_latest", tenant=tenant, name=name)
        else:
            row = await self._read_one(
                "workflow_version", tenant=tenant, name=name, version=version
            )
        if row is None:
            which = "" if version is None else f" version {version}"
            raise NotFound(f"workflow {name!r}{which} not found")
        return self._version(row)

    async def workflows_list(self, tenant: str) -> list[WorkflowVersion]:
        """The latest version of each of the tenant's workflows, by name."""
        return [self._version(r) for r in await self._read_all("workflows_latest", tenant=tenant)]

    async def workflow_versions(self, tenant: str, name: str) -> list[int]:
        """The version numbers of a workflow, oldest first (empty: not registered)."""
        rows = await self._read_all("workflow_versions", tenant=tenant, name=name)
        return [r["version"] for r in rows]

    @functools.cached_property
    def _workflow_memory(self) -> _WorkflowMemory:
        """This process's memory of workflow versions and instances, made on first use."""
        return _WorkflowMemory()

    def _version(self, row: Any) -> WorkflowVersion:
        c = self.codec
        created = c.instant(row["created_at"])
        assert created is not None
        return WorkflowVersion(
            tenant=row["tenant"],
            name=row["name"],
            version=row["version"],
            digest=row["digest"],
            definition=self._definition(row["tenant"], row["name"], row["version"], row),
            created_at=created,
        )

    def _definition(self, tenant: str, name: str, version: int, row: Any) -> WorkflowDefinition:
        """A stored version's definition, parsed once per process (versions never change)."""
        cache = self._workflow_memory.definitions
        key = (tenant, name, version)
        found = cache.get(key)
        if found is None:
            # stored: it was checked when stored (a smaller limit since must not refuse it)
            limits = WorkflowLimits(max_steps=1_000_000, max_payload_bytes=1 << 31)
            found = cache[key] = parse(self.codec.json(row["definition"]), limits)
        return found

    async def _definition_of(
        self, conn: Any, tenant: str, name: str, version: int
    ) -> WorkflowDefinition:
        """A version's definition: from this process's cache, else read once."""
        cached = self._workflow_memory.definitions.get((tenant, name, version))
        if cached is not None:
            return cached
        row = await self._one(conn, "workflow_version", tenant=tenant, name=name, version=version)
        return self._definition(tenant, name, version, row)

    # --- instances: reading ---------------------------------------------------------------

    def _instance(self, row: Any) -> WorkflowInstance:
        c = self.codec
        created = c.instant(row["created_at"])
        assert created is not None
        return WorkflowInstance(
            id=c.uuid(row["id"]),
            tenant=row["tenant"],
            workflow=row["workflow"],
            version=row["version"],
            job_id=c.uuid(row["job_id"]),
            start_run_id=c.uuid(row["start_run_id"]),
            state=InstanceState(row["state"]),
            input=optional_json(c, row["input"]),
            reason=row["reason"],
            created_at=created,
            finished_at=c.instant(row["finished_at"]),
        )

    async def workflow_instance_get(self, tenant: str, instance_id: uuid.UUID) -> WorkflowInstance:
        async with self._read() as conn:
            row = await self._instance_row(conn, tenant, instance_id)
        return self._instance(row)

    async def _instance_row(self, conn: Any, tenant: str, instance_id: uuid.UUID) -> Any:
        """The tenant's instance's row; NotFound if it has none of that id."""
        row = await self._one(conn, "workflow_instance_get", tenant=tenant, id=instance_id)
        if row is None:
            raise NotFound(f"workflow instance {instance_id} not found")
        return row

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
        rows = await self._read_all(
            "workflow_instances_list",
            tenant=tenant,
            workflow=workflow,
            state=None if state is None else str(state),
            job_id=job_id,
            limit=limit,
        )
        return [self._instance(r) for r in rows]

    async def workflow_steps_list(
        self, tenant: str, instance_id: uuid.UUID, *, results: bool = True
    ) -> list[StepRecord]:
        """An instance's steps and mapped items, with their results (``results`` False: none
        read, so a wide fan-out's are not decoded to learn the steps' states)."""
        async with self._read() as conn:
            await self._instance_row(conn, tenant, instance_id)
            query = "workflow_steps_of" if results else "workflow_steps_states"
            rows = await self._all(conn, query, id=instance_id)
        c = self.codec
        return [
            StepRecord(
                step=r["step"],
                map_index=r["map_index"],
                state=StepState(r["state"]),
                run_id=None if r["run_id"] is None else c.uuid(r["run_id"]),
                reason=r["reason"],
                updated_at=c.instant(r["updated_at"]),  # type: ignore[arg-type]
                result=optional_json(c, r["result"]) if results else None,
            )
            for r in rows
        ]

    async def workflow_step_runs(self, tenant: str, instance_id: uuid.UUID) -> list[StepRun]:
        """An instance's steps and mapped items with their runs' attempts, timings and
        results: two queries however wide a fan-out. NotFound for another tenant's."""
        async with self._read() as conn:
            await self._instance_row(conn, tenant, instance_id)
            rows = await self._all(conn, "workflow_step_runs", id=instance_id)
        c = self.codec
        return [
            StepRun(
                step=r["step"],
                map_index=r["map_index"],
                state=StepState(r["state"]),
                reason=r["reason"],
                run_id=None if r["run_id"] is None else c.uuid(r["run_id"]),
                updated_at=c.instant(r["updated_at"]),  # type: ignore[arg-type]
                result=optional_json(c, r["result"]),
                attempt=r["attempt"] or 0,
                ready_at=c.instant(r["run_created_at"]),
                started_at=c.instant(r["started_at"]),
                finished_at=c.instant(r["finished_at"]),
            )
            for r in rows
        ]

    async def workflow_step_inputs(
        self, run_id: uuid.UUID, *, key: str | None = None, tenant: str | None = None
    ) -> StepInputs | None:
        """What the step run ``run_id`` receives (None if it is no step's run).

        Given the run's idempotency ``key`` and ``tenant``, an item of a mapped step whose
        only parent is its source (its payload is its element: no parent's result to read)
        is answered without a query once this process has read its instance for another of
        its runs: an instance's workflow, version and input never change. A wide fan-out's
        items then cost no read each."""
        known = self._item_inputs(key, tenant)
        if known is not None:
            return known
        async with self._read() as conn:
            row = await self._one(conn, "workflow_step_of_run", run_id=run_id)
            if row is None:
                return None
            c = self.codec
            instance_id = c.uuid(row["instance_id"])
            definition = await self._definition_of(
                conn, row["tenant"], row["workflow"], row["version"]
            )
            self._remember_instance(instance_id, row)
            step = definition.step(row["step"])
            parents = list(dict.fromkeys(step.parents))
            if row["map_index"] != WHOLE:  # an item's payload is its element of the source's
                parents.remove(str(step.map_over))  # list: not the whole list for each item
            results = []
            if parents:
                results = await self._all(
                    conn, "workflow_results_of", id=instance_id, steps=parents
                )
        gathered = _gather_results(c, results)
        index = row["map_index"]
        return StepInputs(
            instance_id=instance_id,
            workflow=row["workflow"],
            step=row["step"],
            map_index=None if index == WHOLE else index,
            input=optional_json(c, row["input"]),
            parents={
                p: gathered.get(p, [] if definition.step(p).map_over is not None else None)
                for p in parents
            },
        )

    def _remember_instance(self, instance_id: uuid.UUID, row: Any) -> None:
        """Keep what :meth:`_item_inputs` needs of an instance (the newest
        :data:`_REMEMBERED_INSTANCES` instances read)."""
        known = self._workflow_memory.instances
        if instance_id in known:
            return
        if len(known) >= _REMEMBERED_INSTANCES:
            del known[next(iter(known))]
        known[instance_id] = _KnownInstance(
            row["tenant"],
            row["workflow"],
            row["version"],
            _json.dumps(optional_json(self.codec, row["input"])),
        )

    def _item_inputs(self, key: str | None, tenant: str | None) -> StepInputs | None:
        """A mapped item's inputs from memory (see :meth:`workflow_step_inputs`), or None
        when they must be read: not an item's key, an instance not read yet, another
        tenant's, a step that is not mapped or has parents besides its source."""
        place = parse_step_key(key)
        if place is None or place[2] == WHOLE:
            return None
        instance_id, name, index = place
        memory = self._workflow_memory
        known = memory.instances.get(instance_id)
        if known is None or known.tenant != tenant:
            return None
        definition = memory.definitions.get((known.tenant, known.workflow, known.version))
        if definition is None or not definition.has_step(name):
            return None
        step = definition.step(name)
        if step.map_over is None or set(step.parents) != {step.map_over}:
            return None
        return StepInputs(
            instance_id=instance_id,
            workflow=known.workflow,
            step=name,
            map_index=index,
            input=_json.loads(known.input),  # each item's own value, as a read gives
            parents={},
        )

    # --- instances: operator actions ------------------------------------------------------

    async def workflow_instance_cancel(
        self, tenant: str, instance_id: uuid.UUID, now: datetime | None = None
    ) -> WorkflowInstance:
        """Cancel a running instance: its pending steps end ``cancelled``, its step runs not
        yet started are cancelled, running ones are asked to stop (their attempts recorded
        ``cancelled``, as ``run_cancel``). Conflict if the instance has already ended.

        Locks the step runs before the instance, the order a completion takes them in (its
        run's update, then the instance): the two never wait for each other in a circle."""
        async with self._tx() as conn:
            now = await self._now(conn, now)
            await self._instance_row(conn, tenant, instance_id)
            await self._cancel_instance(conn, instance_id, "cancelled", now)
            await self._audit(conn, now)
            row = await self._one(conn, "workflow_instance_get", tenant=tenant, id=instance_id)
        return self._instance(row)

    async def _cancel_instance(
        self, conn: Any, instance_id: uuid.UUID, reason: str, now: datetime
    ) -> None:
        """Inside the caller's transaction: lock the instance's open step runs, then the
        instance, and end what is still open (see :meth:`workflow_instance_cancel`)."""
        before = await self._all(conn, "workflow_steps_states", id=instance_id)
        await self._all(conn, "workflow_runs_lock", ids=_open_runs(before))
        row = await self._one(conn, "workflow_instance_lock", id=instance_id)
        instance = self._instance(row)
        if instance.state is not InstanceState.RUNNING:
            raise Conflict(
                f"workflow instance {instance_id} is {instance.state}; only a running "
                "instance can be cancelled"
            )
        rows = await self._all(conn, "workflow_steps_states", id=instance_id)
        open_runs = _open_runs(rows)  # runs made meanwhile are new: nobody holds them yet
        changes = [
            _change(r["step"], r["map_index"], StepState.CANCELLED, "workflow cancelled")
            for r in rows
            if r["state"] in (StepState.PENDING, StepState.RUNNING)
        ]
        if open_runs:
            running = await self._all(conn, "workflow_runs_open", ids=open_runs)
            stopped = await self._all(conn, "workflow_runs_stop", ids=open_runs, now=now)
            prior = [_rows.run_from_row(r, self.codec) for r in running]
            if prior:
                await self._attempts_insert(conn, prior, "cancelled", "workflow cancelled", now)
            asked = [self.codec.uuid(r["id"]) for r in stopped if r["cancel_requested"]]
            if asked:
                await self._announce_cancels(conn, asked)
            ended = [self.codec.uuid(r["id"]) for r in stopped]  # each one's token bumped
            await self._run_events(conn, ended, CANCEL_EVENTS, now)
        if changes:
            await self._exec(
                conn, "workflow_steps_set", id=instance_id, batch=self._records(changes), now=now
            )
        await self._exec(
            conn, "workflow_instance_finish", id=instance_id, state="cancelled", reason=reason,
            now=now,
        )  # fmt: skip

    async def workflow_instance_retry(
        self, tenant: str, instance_id: uuid.UUID, now: datetime | None = None
    ) -> WorkflowInstance:
        """Retry a failed instance from its failures: each failed step's (or item's) existing
        run goes back to ``scheduled`` with a fresh attempt budget, the steps skipped or
        failed below them are re-opened (``pending``), successful steps keep their results.
        Conflict unless the instance ``failed``."""
        async with self._tx() as conn:
            now = await self._now(conn, now)
            instance = await self._locked_instance(conn, tenant, instance_id)
            if instance.state is not InstanceState.FAILED:
                raise Conflict(
                    f"workflow instance {instance_id} is {instance.state}; only a failed "
                    "instance can be retried"
                )
            if instance.version == 0:  # its workflow was not registered when it started
                raise Conflict(
                    f"workflow instance {instance_id} never started ({instance.reason}); "
                    "register the workflow and start a new instance"
                )
            definition = await self._definition_of(
                conn, instance.tenant, instance.workflow, instance.version
            )
            job = await self._job_of(conn, instance)
            rows = await self._all(conn, "workflow_steps_states", id=instance_id)
            changes: list[dict[str, Any]] = []
            failed = {r["step"] for r in rows if r["state"] == StepState.FAILED}
            below = _descendants(definition, failed)
            first = failed - below  # failures no other failure led to: they run again now
            for r in rows:
                name, index, state = r["step"], r["map_index"], r["state"]
                if name in first and state == StepState.FAILED and r["run_id"] is not None:
                    step = definition.step(name)
                    budget = (step.retry or job.retry).max_attempts
                    await self._exec(
                        conn, "workflow_run_replay", id=r["run_id"], budget=budget, now=now
                    )
                    changes.append(_change(name, index, StepState.RUNNING, None))
                elif name in first and state == StepState.FAILED and r["items"] is not None:
                    # a mapped step's own row: its failed items run again (their runs above)
                    left = Items(r["items"], r["items_ended"] - r["items_failed"], 0)
                    changes.append(_change(name, index, StepState.RUNNING, None, None, left))
                elif index == WHOLE and (
                    (name in first and state == StepState.FAILED)  # mapped over no list
                    or (name in below and state in (StepState.FAILED, StepState.SKIPPED))
                ):  # decided again once what failed above has run again (a failed one's run,
                    # or items, are reused when it starts: _start)
                    changes.append(_change(name, index, StepState.PENDING, None))
            await self._exec(
                conn, "workflow_steps_set", id=instance_id, batch=self._records(changes), now=now
            )
            await self._exec(conn, "workflow_instance_reopen", id=instance_id)
            await self._notify(conn)
            await self._plan_instance(conn, instance_id, now)
            await self._audit(conn, now)
            row = await self._one(conn, "workflow_instance_get", tenant=tenant, id=instance_id)
        return self._instance(row)

    async def _locked_instance(
        self, conn: Any, tenant: str, instance_id: uuid.UUID
    ) -> WorkflowInstance:
        row = await self._one(conn, "workflow_instance_lock", id=instance_id)
        if row is None or row["tenant"] != tenant:
            raise NotFound(f"workflow instance {instance_id} not found")
        return self._instance(row)

    async def _job_of(self, conn: Any, instance: WorkflowInstance) -> Job:
        row = await self._one(conn, "job_get_by_id", tenant=instance.tenant, id=instance.job_id)
        if row is None:  # pragma: no cover - the instance is deleted with its job
            raise NotFound(f"job {instance.job_id} not found")
        return _rows.job_from_row(row, self.codec)

    # --- the engine's transaction ---------------------------------------------------------

    async def _workflows_advance(
        self, conn: Any, completions: Sequence[RunCompletion], now: datetime
    ) -> None:
        """Inside the transaction that applied ``completions``: start an instance for each
        start run that ended (if it succeeded), and plan each instance one of whose step runs
        ended (a retry going back to ``scheduled`` is no end; a run whose job was cancelled
        meanwhile is left to :meth:`workflows_sweep`)."""
        ended = [c for c in completions if c.workflow is not None and c.next_state.terminal]
        starts = [c.run_id for c in ended if c.workflow == "start"]
        steps = [c.run_id for c in ended if c.workflow == "step"]
        if starts:
            await self._instances_start(conn, starts, now)
        if steps:
            rows = await self._all(conn, "workflow_instances_of_runs", ids=steps)
            for instance_id in sorted(self.codec.uuid(r["instance_id"]) for r in rows):
                await self._plan_instance(conn, instance_id, now, ended=steps)

    async def workflows_sweep(self, limit: int = 100, now: datetime | None = None) -> int:
        """Plan the instances with a step whose run has ended without its end being planned
        (the reaper's and operators' paths end runs too), and cancel the running instances of
        cancelled workflow jobs; idempotent. Returns how many instances it changed."""
        # a cancelled workflow job's steps can never start: its instances end cancelled, each
        # in a transaction of its own (a cancel locks runs before its instance; planning
        # holds instances: one transaction doing both could wait in a circle with a batch)
        orphans = await self._read_all("workflow_instances_of_cancelled_jobs", limit=limit)
        for row in orphans:
            async with self._tx() as conn:
                at = await self._now(conn, now)
                with contextlib.suppress(Conflict):  # it ended meanwhile
                    await self._cancel_instance(
                        conn, self.codec.uuid(row["id"]), "its job was cancelled", at
                    )
        async with self._tx() as conn:
            at = await self._now(conn, now)
            rows = await self._all(conn, "workflow_instances_to_sweep", limit=limit)
            ids = sorted(self.codec.uuid(r["instance_id"]) for r in rows)
            for instance_id in ids:
                await self._plan_instance(conn, instance_id, at)
        return len(ids) + len(orphans)

    async def _instances_start(self, conn: Any, run_ids: list[uuid.UUID], now: datetime) -> None:
        c = self.codec
        for row in await self._all(conn, "workflow_start_runs", ids=run_ids):
            if row["state"] != RunState.SUCCEEDED:
                continue  # a start run that failed starts nothing
            target = optional_json(c, row["target"]) or {}
            name = target.get("name") if isinstance(target, dict) else None
            tenant = row["tenant"]
            version = await self._one(conn, "workflow_latest", tenant=tenant, name=name)
            instance_id = uuid.uuid4()
            state, reason = InstanceState.RUNNING, None
            if version is None:
                state, reason = InstanceState.FAILED, f"workflow {name!r} is not registered"
            inserted = await self._one(
                conn,
                "workflow_instance_insert",
                id=instance_id,
                tenant=tenant,
                workflow=str(name),
                version=0 if version is None else version["version"],
                job_id=row["job_id"],
                start_run_id=row["id"],
                state=str(state),
                input=_json.dumps(optional_json(c, row["payload"])),
                reason=reason,
                now=now,
            )
            if inserted is None or version is None:
                continue  # this start run's instance exists already
            definition = self._definition(tenant, str(name), version["version"], version)
            steps = [_change(s.name, WHOLE, StepState.PENDING, None) for s in definition.steps]
            await self._exec(
                conn, "workflow_steps_insert", id=instance_id, batch=self._records(steps), now=now
            )
            await self._plan_instance(conn, instance_id, now)

    async def _plan_instance(
        self,
        conn: Any,
        instance_id: uuid.UUID,
        now: datetime,
        ended: Sequence[uuid.UUID] | None = None,
    ) -> None:
        """Lock the instance, take in the ends of its step runs (those of ``ended``, or any
        that ended: the sweep), then plan until nothing new. Reads each step's own row, not
        every mapped item: a mapped step's row counts its items."""
        row = await self._one(conn, "workflow_instance_lock", id=instance_id)
        if row is None:
            return
        # the lock may have waited for another step's end, stamped later than ``now``: what
        # this pass creates is stamped after it (a child's created_at >= its parents' ends)
        now = max(now, await self._now(conn, None))
        instance = self._instance(row)
        definition = await self._definition_of(
            conn, instance.tenant, instance.workflow, instance.version
        )
        wholes = await self._all(conn, "workflow_steps_whole", id=instance_id)
        p = _Pass(
            instance=instance,
            definition=definition,
            states={r["step"]: StepState(r["state"]) for r in wholes},
            items={
                r["step"]: Items(r["items"], r["items_ended"], r["items_failed"])
                for r in wholes
                if r["items"] is not None
            },
            previous={r["step"]: (r["run_id"], r["items"] is not None) for r in wholes},
        )
        if ended is None:
            runs = await self._all(conn, "workflow_steps_swept", id=instance_id)
        else:
            runs = await self._all(conn, "workflow_steps_ended", id=instance_id, ids=list(ended))
        for r in runs:
            run_state = r["run_state"]
            if run_state is None:
                state, reason = StepState.FAILED, "its run was deleted"
            elif run_state == RunState.SUCCEEDED:
                state, reason = StepState.SUCCEEDED, None
            else:
                state = StepState.FAILED
                reason = f"run {run_state}" + (f": {r['run_error']}" if r["run_error"] else "")
            if r["map_index"] == WHOLE:
                p.set(r["step"], state, reason)
            else:
                p.item_ended(r["step"], r["map_index"], state, reason)
        if instance.state is InstanceState.RUNNING:
            await self._plan(conn, p, now)
        for step_name, template, items in p.expansions:
            await self._exec(
                conn, "workflow_items_insert", id=instance_id, step=step_name,
                template=self._records([template]), items=_json.dumps(items), now=now,
            )  # fmt: skip
        if p.runs:
            await self._all(conn, "runs_insert", batch=self._records(p.runs), now=now)
        if p.runs or p.expansions:
            await self._notify(conn)
        if p.inserts:
            await self._exec(
                conn, "workflow_steps_insert", id=instance_id, batch=self._records(p.inserts),
                now=now,
            )  # fmt: skip
        if p.updates:
            await self._exec(
                conn, "workflow_steps_set", id=instance_id,
                batch=self._records(list(p.updates.values())), now=now,
            )  # fmt: skip
        if p.finish is not None:
            await self._exec(
                conn,
                "workflow_instance_finish",
                id=instance_id,
                state=str(p.finish.state),
                reason=p.finish.reason,
                now=now,
            )

    async def _plan(self, conn: Any, p: _Pass, now: datetime) -> None:
        for _ in range(len(p.definition.steps) * 2 + 2):  # each pass moves a step on
            actions = plan(p.definition, p.states, p.items)
            if not actions:
                return
            for action in actions:
                if isinstance(action, Finish):
                    p.finish = action
                    return
                if isinstance(action, Skip):
                    p.set(action.step, StepState.SKIPPED, action.reason)
                elif isinstance(action, Settle):
                    p.set(action.step, action.state, action.reason)
                elif isinstance(action, Start):
                    await self._start(conn, p, p.definition.step(action.step), now)

    async def _start(self, conn: Any, p: _Pass, step: StepSpec, now: datetime) -> None:
        if p.job is None:
            p.job = await self._job_of(conn, p.instance)
        earlier_run, expanded = p.previous.pop(step.name, (None, False))
        if earlier_run is not None:  # started before (retry from failure): its run again
            await self._replay_step_run(conn, p, step, earlier_run, now)
            p.set(step.name, StepState.RUNNING, None, earlier_run)
            return
        if expanded:
            await self._restart_items(conn, p, step, now)
            return
        if step.map_over is None:
            run = _step_run(p, step, WHOLE, step.payload, now)
            p.runs.append(run)
            p.set(step.name, StepState.RUNNING, None, run["id"])
            return
        items = await self._map_items(conn, p, step.map_over)
        if isinstance(items, str):
            p.set(step.name, StepState.FAILED, items)
            return
        limit = self.workflow_limits.max_mapped
        if len(items) > limit:
            p.set(
                step.name,
                StepState.FAILED,
                f"{step.map_over} returned {len(items)} items; a mapped step runs at most {limit}",
            )
            return
        p.items[step.name] = Items(len(items))
        p.set(step.name, StepState.RUNNING, None)
        template = _step_run(p, step, 0, None, now)  # the items differ in id, key and payload
        if self.dialect == "postgres":  # one statement makes them all from the list
            p.expansions.append((step.name, template, items))
            return
        for index, item in enumerate(items):
            run = {
                **template,
                "id": uuid.uuid4(),
                "payload": _json.dumps(item),
                "idempotency_key": step_key(p.instance.id, step.name, index),
            }
            p.runs.append(run)
            p.inserts.append(_change(step.name, index, StepState.RUNNING, None, run["id"]))

    async def _replay_step_run(
        self, conn: Any, p: _Pass, step: StepSpec, run_id: Any, now: datetime
    ) -> None:
        """A step's (or item's) earlier run back to ``scheduled`` with a fresh attempt
        budget (a run not ended, or gone, is left as it is)."""
        assert p.job is not None
        budget = (step.retry or p.job.retry).max_attempts
        await self._exec(conn, "workflow_run_replay", id=run_id, budget=budget, now=now)

    async def _restart_items(self, conn: Any, p: _Pass, step: StepSpec, now: datetime) -> None:
        """A mapped step expanded before starts again: items that succeeded keep their
        results, the others' runs run again."""
        rows = await self._all(conn, "workflow_items_of", id=p.instance.id, step=step.name)
        succeeded = 0
        for r in rows:
            if r["run_state"] == RunState.SUCCEEDED:
                succeeded += 1
                continue
            await self._replay_step_run(conn, p, step, r["run_id"], now)
            p.updates[(step.name, r["map_index"])] = _change(
                step.name, r["map_index"], StepState.RUNNING, None
            )
        p.items[step.name] = Items(len(rows), succeeded, 0)
        p.set(step.name, StepState.RUNNING, None)

    async def _map_items(self, conn: Any, p: _Pass, source: str) -> list[JSON] | str:
        """The items a mapped step runs over (``source``'s result), or why there are none."""
        rows = await self._all(conn, "workflow_results_of", id=p.instance.id, steps=[source])
        value = _gather_results(self.codec, rows).get(source)
        if not isinstance(value, list):
            kind = "nothing" if value is None else type(value).__name__
            return f"map_over {source}: its result must be a list, it returned {kind}"
        return value


_REMEMBERED_INSTANCES = 1024
"""Instances whose workflow, version and input one process keeps for its items' inputs."""


@dataclasses.dataclass(frozen=True, slots=True)
class _KnownInstance:
    tenant: str
    workflow: str
    version: int
    input: str
    """Encoded: each item decodes a value of its own (a task may change what it gets)."""


@dataclasses.dataclass(slots=True)
class _WorkflowMemory:
    """What one store object keeps of the workflows it has read, never written back.

    Not locked: each use reads or changes it with no await in between."""

    definitions: dict[tuple[str, str, int], WorkflowDefinition] = dataclasses.field(
        default_factory=dict
    )
    """Each stored version's parsed definition, by (tenant, workflow, version): a stored
    version never changes, so the cache is never invalidated."""
    instances: dict[uuid.UUID, _KnownInstance] = dataclasses.field(default_factory=dict)
    """The newest :data:`_REMEMBERED_INSTANCES` instances read, oldest first."""


def _open_runs(rows: Iterable[Any]) -> list[Any]:
    """The runs of the steps and items of ``rows`` that are still running, in id order."""
    return sorted(
        (r["run_id"] for r in rows if r["state"] == StepState.RUNNING and r["run_id"]), key=str
    )


def _change(
    step: str,
    index: int,
    state: StepState,
    reason: str | None,
    run_id: Any = None,
    items: Items | None = None,
) -> dict[str, Any]:
    """A ``workflow_steps`` row as ``workflow_steps_insert`` / ``_set`` take it (a None run
    or item count keeps the stored one)."""
    return {
        "step": step, "map_index": index, "state": str(state), "reason": reason,
        "run_id": run_id,
        "items": None if items is None else items.total,
        "items_ended": None if items is None else items.ended,
        "items_failed": None if items is None else items.failed,
    }  # fmt: skip


def _step_run(p: _Pass, step: StepSpec, index: int, payload: JSON, now: datetime) -> dict[str, Any]:
    """The run of ``step`` (item ``index``) as ``runs_insert`` takes it: a manual run of the
    workflow job with the step's task, payload and policies, keyed by its place."""
    assert p.job is not None, "read by _start"
    job = dataclasses.replace(
        p.job,
        task=HTTP_TASK if step.target is not None else str(step.task),
        target=step.target,
        payload=payload,
        retry=step.retry or p.job.retry,
        timeout=step.timeout if step.timeout is not None else p.job.timeout,
        delivery=step.delivery,
        queue=step.queue,
        priority=step.priority,
        concurrency_key=None,
        max_concurrency=0,
        status=JobStatus.ACTIVE,
    )
    key = step_key(p.instance.id, step.name, index)
    values = trigger_run_values(
        job, RunTriggerParams(job=JobRef(tenant=job.tenant, id=job.id), idempotency_key=key), now
    )
    values["concurrency_key"] = None
    return values


def _gather_results(c: _rows.Codec, rows: Iterable[Any]) -> dict[str, JSON]:
    """Results by step: an unmapped step's run's, or a mapped step's items' as a list."""
    out: dict[str, JSON] = {}
    for r in rows:
        value = optional_json(c, r["result"])
        if r["map_index"] == WHOLE:
            out[r["step"]] = value
        else:
            items = out.setdefault(r["step"], [])
            assert isinstance(items, list)
            items.append(value)
    return out


def _descendants(definition: WorkflowDefinition, names: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        for child in definition.children(todo.pop()):
            if child.name not in seen:
                seen.add(child.name)
                todo.append(child.name)
    return seen
