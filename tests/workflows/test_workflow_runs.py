"""Workflows end to end on both stores: steps run in order with their parents' results,
fan-out and fan-in, failure edges, retry from failure, cancel, versions, exactly one run per
(instance, step, map index)."""

from __future__ import annotations

from typing import Any

import pytest

from duetime import Permanent, RunContext
from duetime._types import RunState
from duetime.errors import Conflict
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState, StepState


async def start(app: FrozenApp, workflow: str, payload: Any = None, name: str | None = None):
    """Start one instance now through a workflow job and run everything due."""
    job = await app.schedule(
        name or f"run-{workflow}",
        target={"type": "workflow", "name": workflow},
        now=True,
        payload=payload,
    )
    await drain(app)
    [instance] = await app.workflows.instances(job=job.id)
    return instance


def states(steps) -> dict[tuple[str, int], StepState]:
    return {(s.step, s.map_index): s.state for s in steps}


async def test_steps_run_in_order_with_their_parents_results(app: FrozenApp) -> None:
    seen: dict[str, Any] = {}

    @app.task("etl.extract")
    async def extract(ctx: RunContext) -> dict[str, int]:
        seen["extract.input"] = ctx.workflow.input if ctx.workflow else None
        return {"rows": 3}

    @app.task("etl.transform")
    async def transform(ctx: RunContext) -> int:
        seen["transform.parents"] = ctx.parents
        return ctx.parents["extract"]["rows"] * 10

    @app.task("etl.load")
    async def load(ctx: RunContext, payload: Any) -> str:
        seen["load.parents"] = ctx.parents
        seen["load.payload"] = payload
        return "loaded"

    etl = Workflow("etl")
    e = etl.step("extract", task="etl.extract")
    t = etl.step("transform", task="etl.transform", after=e)
    etl.step("load", task="etl.load", after=[t, e], payload={"table": "sales"})
    version = await app.workflows.register(etl)
    assert version.version == 1

    instance = await start(app, "etl", payload={"day": "2026-11-24"})

    assert instance.state is InstanceState.SUCCEEDED, instance.reason
    assert instance.input == {"day": "2026-11-24"}
    assert seen["extract.input"] == {"day": "2026-11-24"}
    assert seen["transform.parents"] == {"extract": {"rows": 3}}
    assert seen["load.parents"] == {"transform": 30, "extract": {"rows": 3}}
    assert seen["load.payload"] == {"table": "sales"}
    steps = await app.workflows.steps(instance.id)
    assert {s.step: s.result for s in steps} == {
        "extract": {"rows": 3},
        "transform": 30,
        "load": "loaded",
    }
    assert all(s.state is StepState.SUCCEEDED for s in steps)
    run = await app.runs.get(next(s.run_id for s in steps if s.step == "load"))
    assert run.result == "loaded"
    assert run.state is RunState.SUCCEEDED


async def test_fan_out_runs_a_mapped_step_per_item_then_fans_in(app: FrozenApp) -> None:
    @app.task("nums")
    async def nums(ctx: RunContext) -> list[int]:
        return [1, 2, 3, 4]

    @app.task("square")
    async def square(ctx: RunContext, item: int) -> int:
        assert ctx.workflow is not None
        assert ctx.workflow.map_index == item - 1
        return item * item

    @app.task("total")
    async def total(ctx: RunContext) -> int:
        return sum(ctx.parents["square"])

    flow = Workflow("squares")
    n = flow.step("nums", task="nums")
    sq = flow.step("square", task="square", map_over=n)
    flow.step("total", task="total", after=sq)
    await app.workflows.register(flow)

    instance = await start(app, "squares")

    assert instance.state is InstanceState.SUCCEEDED, instance.reason
    steps = await app.workflows.steps(instance.id)
    by = {(s.step, s.map_index): s for s in steps}
    assert [by[("square", i)].result for i in range(4)] == [1, 4, 9, 16]
    assert by[("total", -1)].result == 30
    assert by[("square", -1)].state is StepState.SUCCEEDED


async def test_an_empty_list_maps_to_no_items_and_the_fan_in_still_runs(app: FrozenApp) -> None:
    @app.task("none")
    async def none(ctx: RunContext) -> list[int]:
        return []

    @app.task("each")
    async def each(ctx: RunContext, item: int) -> None:
        raise AssertionError("no item to run")

    @app.task("after")
    async def after(ctx: RunContext) -> list[Any]:
        return ctx.parents["each"]

    flow = Workflow("empty")
    src = flow.step("src", task="none")
    m = flow.step("each", task="each", map_over=src)
    flow.step("after", task="after", after=m)
    await app.workflows.register(flow)
    instance = await start(app, "empty")
    assert instance.state is InstanceState.SUCCEEDED, instance.reason
    by = {(s.step, s.map_index): s for s in await app.workflows.steps(instance.id)}
    assert by[("after", -1)].result == []  # a mapped parent with no items: an empty list
    assert ("each", 0) not in by


async def test_a_mapped_step_over_a_result_that_is_no_list_fails_saying_so(app: FrozenApp) -> None:
    @app.task("scalar")
    async def scalar(ctx: RunContext) -> int:
        return 7

    @app.task("each")
    async def each(ctx: RunContext, item: Any) -> None:
        raise AssertionError("never")

    flow = Workflow("bad-map")
    src = flow.step("src", task="scalar")
    flow.step("each", task="each", map_over=src)
    await app.workflows.register(flow)
    instance = await start(app, "bad-map")
    assert instance.state is InstanceState.FAILED
    by = {s.step: s for s in await app.workflows.steps(instance.id)}
    assert by["each"].state is StepState.FAILED
    assert "must be a list, it returned int" in (by["each"].reason or "")


async def test_failure_edges_run_handlers_and_skip_what_cannot_run(app: FrozenApp) -> None:
    ran: list[str] = []

    @app.task("boom")
    async def boom(ctx: RunContext) -> None:
        ran.append("boom")
        raise Permanent("the source is gone")

    @app.task("note")
    async def note(ctx: RunContext, payload: Any) -> None:
        ran.append(payload)

    flow = Workflow("guarded")
    b = flow.step("load", task="boom")
    flow.step("publish", task="note", payload="publish", after=b)
    flow.step("page", task="note", payload="page", after=b.failed)
    flow.step("cleanup", task="note", payload="cleanup", after=b.finished)
    await app.workflows.register(flow)

    instance = await start(app, "guarded")

    assert sorted(ran) == ["boom", "cleanup", "page"]
    assert instance.state is InstanceState.SUCCEEDED, instance.reason  # the failure was handled
    by = {s.step: s for s in await app.workflows.steps(instance.id)}
    assert by["load"].state is StepState.FAILED
    assert by["publish"].state is StepState.SKIPPED
    assert by["publish"].reason == "parent load failed, edge on_success"
    assert by["page"].state is StepState.SUCCEEDED


async def test_an_unhandled_failure_fails_the_instance_and_retry_resumes_from_it(
    app: FrozenApp,
) -> None:
    calls: dict[str, int] = {"a": 0, "b": 0, "c": 0}
    broken = {"b": True}

    @app.task("step")
    async def step(ctx: RunContext, name: str) -> str:
        calls[name] += 1
        if broken.get(name):
            raise Permanent(f"{name} is broken")
        return name

    flow = Workflow("chain")
    a = flow.step("a", task="step", payload="a")
    b = flow.step("b", task="step", payload="b", after=a)
    flow.step("c", task="step", payload="c", after=b)
    await app.workflows.register(flow)
    instance = await start(app, "chain")
    assert instance.state is InstanceState.FAILED
    assert instance.reason == "step(s) failed: b"
    assert states(await app.workflows.steps(instance.id)) == {
        ("a", -1): StepState.SUCCEEDED,
        ("b", -1): StepState.FAILED,
        ("c", -1): StepState.SKIPPED,
    }

    broken["b"] = False
    retried = await app.workflows.retry(instance.id)
    assert retried.state is InstanceState.RUNNING
    await drain(app)

    done = await app.workflows.instance(instance.id)
    assert done.state is InstanceState.SUCCEEDED, done.reason
    assert calls == {"a": 1, "b": 2, "c": 1}  # a kept its result; b replayed; c ran once
    b_run = next(s.run_id for s in await app.workflows.steps(instance.id) if s.step == "b")
    assert b_run is not None
    assert (await app.runs.get(b_run)).replays == 1  # the same run, replayed


async def test_cancel_stops_pending_steps_and_the_runs_not_yet_started(app: FrozenApp) -> None:
    flow = Workflow("cancel-me")
    a = flow.step("a", task="t")
    flow.step("b", task="t", after=a)
    await app.workflows.register(flow, allow_unregistered=True)
    await app.schedule("c", target={"type": "workflow", "name": "cancel-me"}, now=True)
    await drain(app)  # the start run only: no worker here serves "t"
    [instance] = await app.workflows.instances()
    assert instance.state is InstanceState.RUNNING
    cancelled = await app.workflows.cancel(instance.id)
    assert cancelled.state is InstanceState.CANCELLED
    steps = await app.workflows.steps(instance.id)
    assert states(steps) == {("a", -1): StepState.CANCELLED, ("b", -1): StepState.CANCELLED}
    a_run = next(s.run_id for s in steps if s.step == "a")
    assert a_run is not None
    assert (await app.runs.get(a_run)).state is RunState.CANCELLED
    with pytest.raises(Conflict, match="is cancelled; only a running instance"):
        await app.workflows.cancel(instance.id)
    with pytest.raises(Conflict, match="only a failed instance can be retried"):
        await app.workflows.retry(instance.id)


async def test_a_changed_definition_is_a_new_version_and_running_instances_keep_theirs(
    app: FrozenApp,
) -> None:
    @app.task("noop")
    async def noop(ctx: RunContext) -> str:
        return ctx.task

    v1 = Workflow("versions")
    v1.step("a", task="noop")
    first = await app.workflows.register(v1)
    again = await app.workflows.register(v1.document())  # the JSON form, same content
    assert (first.version, again.version, again.digest) == (1, 1, first.digest)

    instance = await start(app, "versions", name="one")
    v2 = Workflow("versions")
    v2.step("a", task="noop")
    v2.step("b", task="noop", after="a")
    second = await app.workflows.register(v2)
    assert second.version == 2
    assert (await app.workflows.get("versions", 1)).definition.document() == v1.document()
    assert [w.version for w in await app.workflows.list()] == [2]
    assert (await app.workflows.instance(instance.id)).version == 1
    later = await start(app, "versions", name="two")
    assert later.version == 2
    assert {s.step for s in await app.workflows.steps(later.id)} == {"a", "b"}


async def test_each_step_runs_once_however_often_its_end_is_planned(app: FrozenApp) -> None:
    @app.task("fan")
    async def fan(ctx: RunContext) -> list[int]:
        return list(range(5))

    @app.task("leaf")
    async def leaf(ctx: RunContext, item: int) -> int:
        return item

    flow = Workflow("once")
    f = flow.step("fan", task="fan")
    flow.step("leaf", task="leaf", map_over=f)
    await app.workflows.register(flow)
    instance = await start(app, "once")
    assert instance.state is InstanceState.SUCCEEDED
    store = app.store
    runs_before = (await app.runs.find(limit=100)).items
    for _ in range(3):  # planning again changes nothing
        await store.workflows_sweep()
    runs_after = (await app.runs.find(limit=100)).items
    assert len(runs_after) == len(runs_before) == 1 + 1 + 5


async def test_a_workflow_job_needs_a_registered_workflow(app: FrozenApp) -> None:
    from duetime.errors import ValidationError

    with pytest.raises(ValidationError, match="workflow 'nope' is not registered"):
        await app.schedule("x", target={"type": "workflow", "name": "nope"}, now=True)


async def test_retention_prunes_ended_instances_and_keeps_failed_ones(app: FrozenApp) -> None:
    from datetime import timedelta

    from duetime.store.base import HistoryPruneParams

    @app.task("ok")
    async def ok(ctx: RunContext) -> None:
        return None

    @app.task("bad")
    async def bad(ctx: RunContext) -> None:
        raise Permanent("no")

    good, broken = Workflow("good"), Workflow("broken")
    good.step("a", task="ok")
    broken.step("a", task="bad")
    await app.workflows.register(good)
    await app.workflows.register(broken)
    succeeded = await start(app, "good")
    failed = await start(app, "broken")
    assert (succeeded.state, failed.state) == (InstanceState.SUCCEEDED, InstanceState.FAILED)

    await app.store.history_prune(HistoryPruneParams(before=app.clock.now()))
    assert len(await app.workflows.instances()) == 2  # nothing ended before the cutoff

    app.clock.advance(days=1)
    await app.store.history_prune(HistoryPruneParams(before=app.clock.now() - timedelta(hours=1)))
    assert [i.id for i in await app.workflows.instances()] == [failed.id]
    assert await app.workflows.steps(failed.id)


async def test_retry_reruns_only_the_failed_items_of_a_mapped_step(app: FrozenApp) -> None:
    calls: list[int] = []
    broken = {2}

    @app.task("src")
    async def src(ctx: RunContext) -> list[int]:
        return [0, 1, 2, 3]

    @app.task("each")
    async def each(ctx: RunContext, item: int) -> int:
        calls.append(item)
        if item in broken:
            raise Permanent(f"item {item} is broken")
        return item * 10

    @app.task("join")
    async def join(ctx: RunContext) -> list[int]:
        return ctx.parents["each"]

    flow = Workflow("mapped-retry")
    s = flow.step("src", task="src")
    e = flow.step("each", task="each", map_over=s)
    flow.step("join", task="join", after=e)
    await app.workflows.register(flow)
    instance = await start(app, "mapped-retry")
    assert instance.state is InstanceState.FAILED
    by = {(x.step, x.map_index): x for x in await app.workflows.steps(instance.id)}
    assert by[("each", -1)].reason == "1 of 4 items failed"
    assert by[("join", -1)].state is StepState.SKIPPED

    broken.clear()
    await app.workflows.retry(instance.id)
    await drain(app)
    done = await app.workflows.instance(instance.id)
    assert done.state is InstanceState.SUCCEEDED, done.reason
    assert sorted(calls) == [0, 1, 2, 2, 3]
    by = {(x.step, x.map_index): x for x in await app.workflows.steps(instance.id)}
    assert by[("join", -1)].result == [0, 10, 20, 30]
