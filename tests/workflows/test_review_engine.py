"""Review of issue 18's engine (reviewer's findings), on both stores. Tests of open defects are
marked xfail(strict) until fixed; the others guard defects fixed during the review (a step
run's dead-letter replay, a cancelled workflow job's instances)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from duetime import Permanent, RunContext
from duetime._types import RunState
from duetime.errors import Conflict, ValidationError
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState, StepState


async def _start(app: FrozenApp, workflow: str, name: str | None = None, **when: Any):
    job = await app.schedule(
        name or f"run-{workflow}",
        target={"type": "workflow", "name": workflow},
        **(when or {"now": True}),
    )
    await drain(app)
    [instance] = await app.workflows.instances(job=job.id)
    return job, instance


def _by(steps) -> dict[tuple[str, int], Any]:
    return {(s.step, s.map_index): s for s in steps}


async def test_a_dead_letter_replay_of_a_step_run_is_planned_or_refused(app: FrozenApp) -> None:
    broken = {"a": True}
    calls: list[str] = []

    @app.task("step")
    async def step(ctx: RunContext, name: str) -> str:
        calls.append(name)
        if broken.get(name):
            raise Permanent(f"{name} is broken")
        return name

    flow = Workflow("dlq")
    a = flow.step("a", task="step", payload="a")
    flow.step("b", task="step", payload="b", after=a)
    await app.workflows.register(flow)
    _, instance = await _start(app, "dlq")
    assert instance.state is InstanceState.FAILED
    a_run = _by(await app.workflows.steps(instance.id))[("a", -1)].run_id
    assert a_run is not None
    assert (await app.runs.get(a_run)).state is RunState.DEAD

    broken.clear()
    try:
        replayed = await app.runs.replay([a_run])  # the ordinary dead-letter replay
    except Conflict:  # refused: a step run is retried through app.workflows.retry
        replayed = []
    await drain(app)
    await app.store.workflows_sweep()
    await drain(app)

    if replayed:  # the replay was accepted: the engine must see its outcome
        by = _by(await app.workflows.steps(instance.id))
        assert (await app.runs.get(a_run)).state is RunState.SUCCEEDED
        assert by[("a", -1)].state is StepState.SUCCEEDED, by[("a", -1)]
        assert by[("b", -1)].state is StepState.SUCCEEDED, by[("b", -1)]
    else:  # or it was refused (a step run is retried through app.workflows.retry)
        assert calls == ["a"]


async def test_a_handled_failed_step_is_not_run_again_by_a_dead_letter_replay(
    app: FrozenApp,
) -> None:
    calls: list[str] = []

    @app.task("step")
    async def step(ctx: RunContext, name: str) -> str:
        calls.append(name)
        if name == "a" and calls.count("a") == 1:
            raise Permanent("a is broken")
        return name

    flow = Workflow("handled")
    a = flow.step("a", task="step", payload="a")
    flow.step("page", task="step", payload="page", after=a.failed)
    await app.workflows.register(flow)
    _, instance = await _start(app, "handled")
    assert instance.state is InstanceState.SUCCEEDED
    a_run = _by(await app.workflows.steps(instance.id))[("a", -1)].run_id
    with contextlib.suppress(Conflict):  # refused: the fix
        await app.runs.replay([a_run])
    await app.runs.replay(job=instance.job_id)  # "replay every dead run of this job"
    await drain(app)
    assert calls.count("a") == 1, calls  # the ended instance's step ran again


async def test_cancelling_the_workflow_job_ends_its_instances(app: FrozenApp) -> None:
    @app.task("ok")
    async def ok(ctx: RunContext) -> None:
        return None

    flow = Workflow("jobcancel")
    a = flow.step("a", task="slow")  # no worker serves it: its run stays scheduled
    flow.step("cleanup", task="ok", after=a.finished)
    await app.workflows.register(flow, allow_unregistered=True)
    job = await app.schedule("hourly", target={"type": "workflow", "name": "jobcancel"}, every="1h")
    await app.jobs.trigger(job.id)
    await drain(app)
    instances = await app.workflows.instances(job=job.id)
    assert instances
    assert all(i.state is InstanceState.RUNNING for i in instances)
    await app.jobs.cancel(job.id)
    for _ in range(3):
        await app.store.workflows_sweep()
        await drain(app)
    for instance in instances:
        steps = _by(await app.workflows.steps(instance.id))
        done = await app.workflows.instance(instance.id)
        assert done.state is not InstanceState.RUNNING, (done, steps)


@pytest.mark.parametrize(
    ("field", "value"),
    [("priority", 2**40), ("queue", "a\x00b"), ("queue", "q" * 500), ("task", "t\x00")],
)
async def test_a_step_field_a_run_cannot_hold_is_refused_at_registration(
    app: FrozenApp, field: str, value: Any
) -> None:
    from duetime.errors import ValidationError

    document = {"name": "bad", "steps": [{"name": "a", "task": "t", field: value}]}
    with pytest.raises(ValidationError, match=rf"steps\[0\]\.{field}"):
        await app.workflows.register(document, allow_unregistered=True)


async def test_retry_runs_a_failed_handler_again_only_if_its_parent_fails_again(
    app: FrozenApp,
) -> None:
    calls: list[str] = []
    broken = {"x", "handler"}

    @app.task("step")
    async def step(ctx: RunContext, name: str) -> str:
        calls.append(name)
        if name in broken:
            raise Permanent(f"{name} is broken")
        return name

    flow = Workflow("nested-failures")
    x = flow.step("x", task="step", payload="x")
    flow.step("handler", task="step", payload="handler", after=x.failed)
    await app.workflows.register(flow)
    _, instance = await _start(app, "nested-failures")
    assert instance.state is InstanceState.FAILED  # the handler ran and failed: unhandled
    assert calls == ["x", "handler"]

    broken.clear()  # x is fixed: its failure handler has nothing to handle any more
    await app.workflows.retry(instance.id)
    await drain(app)
    by = _by(await app.workflows.steps(instance.id))
    assert by[("x", -1)].state is StepState.SUCCEEDED
    assert calls == ["x", "handler", "x"], calls  # the handler ran though x succeeded


async def test_retention_keeps_the_results_a_running_instance_still_needs(
    app: FrozenApp,
) -> None:
    from datetime import timedelta

    from duetime.store.base import HistoryPruneParams

    seen: dict[str, Any] = {}

    @app.task("extract")
    async def extract(ctx: RunContext) -> dict[str, int]:
        return {"rows": 3}

    flow = Workflow("long")
    e = flow.step("extract", task="extract")
    flow.step("load", task="load", after=e)  # served only later (a busy pool, a deploy)
    await app.workflows.register(flow, allow_unregistered=True)
    _, instance = await _start(app, "long")
    assert instance.state is InstanceState.RUNNING

    app.clock.advance(days=2)
    await app.store.history_prune(HistoryPruneParams(before=app.clock.now() - timedelta(days=1)))

    @app.task("load")
    async def load(ctx: RunContext) -> None:
        seen["parents"] = dict(ctx.parents)

    await drain(app)
    assert seen["parents"] == {"extract": {"rows": 3}}


async def test_a_users_trigger_cannot_take_a_steps_run_slot(app: FrozenApp) -> None:
    calls: list[str] = []

    flow = Workflow("slot")
    a = flow.step("a", task="a")
    flow.step("b", task="b", after=a)
    await app.workflows.register(flow, allow_unregistered=True)
    job, instance = await _start(app, "slot")
    assert instance.state is InstanceState.RUNNING
    with contextlib.suppress(Exception):  # refusing the reserved prefix would be a fix too
        await app.jobs.trigger_run(job.id, idempotency_key=f"wf:{instance.id}:b:-1")

    @app.task("a")
    async def a_task(ctx: RunContext) -> None:
        calls.append("a")

    @app.task("b")
    async def b_task(ctx: RunContext) -> None:
        calls.append("b")

    await drain(app)
    await app.store.workflows_sweep()
    await drain(app)
    by = _by(await app.workflows.steps(instance.id))
    assert by[("b", -1)].state is StepState.SUCCEEDED, by[("b", -1)]
    assert calls == ["a", "b"]


def test_a_root_step_with_rule_any_is_refused_or_starts() -> None:
    from duetime.errors import ValidationError
    from duetime.workflows.definition import WorkflowLimits, parse
    from duetime.workflows.engine import Start, plan

    document = {"name": "w", "steps": [{"name": "a", "task": "t", "rule": "any"}]}
    try:
        definition = parse(document, WorkflowLimits())
    except ValidationError:
        return
    assert plan(definition, {}) == [Start("a")]


async def test_an_unregistered_workflow_target_is_refused_everywhere(app: FrozenApp) -> None:
    from duetime.errors import Conflict, ValidationError

    try:
        await app.schedule_many(
            [{"name": "ghost-job", "target": {"type": "workflow", "name": "ghost"}, "now": True}]
        )
    except ValidationError:
        return  # refused, as app.schedule refuses it
    await drain(app)
    [instance] = await app.workflows.instances()
    assert instance.state is InstanceState.FAILED
    with pytest.raises(Conflict):
        await app.workflows.retry(instance.id)


async def test_a_plain_jobs_wf_prefixed_key_does_not_make_its_result_required(
    app: FrozenApp,
) -> None:
    from datetime import datetime

    @app.task("report")
    async def report(ctx: RunContext) -> object:
        return datetime(2026, 11, 24).date  # not JSON: dropped for a job, as documented

    job = await app.schedule("plain", task="report", every="1d")
    # the prefix is the workflow steps' own: a caller's key cannot use it
    with pytest.raises(ValidationError, match="must not start with 'wf:'"):
        await app.jobs.trigger_run(job.id, idempotency_key="wf:nightly-1124")
    run, _ = await app.jobs.trigger_run(job.id, idempotency_key="nightly-1124")
    await drain(app)
    assert (await app.runs.get(run.id)).state is RunState.SUCCEEDED


async def test_reverting_a_definition_makes_new_instances_run_the_reverted_one(
    app: FrozenApp,
) -> None:
    @app.task("noop")
    async def noop(ctx: RunContext) -> None:
        return None

    v1 = Workflow("revert")
    v1.step("a", task="noop")
    v2 = Workflow("revert")
    v2.step("a", task="noop")
    v2.step("b", task="noop", after="a")
    await app.workflows.register(v1)
    await app.workflows.register(v2)
    await app.workflows.register(v1)  # the change is rolled back

    _, instance = await _start(app, "revert")
    steps = {s.step for s in await app.workflows.steps(instance.id)}
    assert steps == {"a"}, f"instance runs version {instance.version}: {sorted(steps)}"
