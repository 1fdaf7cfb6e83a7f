"""A step starts exactly once per parent outcome: parents ending at the same moment on two
connections, a completion repeated, a step run ended by an operator instead of a worker (the
sweep plans it) — on both stores, PostgreSQL's with real concurrency."""

from __future__ import annotations

import asyncio

from duetime._types import AttemptOutcome, RunState
from duetime.store.base import ClaimedRun, RunCompletion, RunsClaimParams, RunsCompleteParams
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState, StepState


async def started_instances(app: FrozenApp, workflow: str, count: int) -> None:
    """``count`` instances of ``workflow`` started; their step tasks are served by no one
    here (the test claims and completes those runs itself)."""
    for i in range(count):
        target = {"type": "workflow", "name": workflow}
        await app.schedule(f"{workflow}-{i}", target=target, now=True)
    await drain(app)  # runs the start runs only: no worker of this app serves "t"
    assert len(await app.workflows.instances(workflow=workflow, state="running")) == count


async def claim(app: FrozenApp, worker: str, limit: int) -> list[ClaimedRun]:
    return await app.store.runs_claim(
        RunsClaimParams(
            worker_id=worker,
            tasks=["t"],
            limit=limit,
            lease_ttl=60,
            lookahead=0,
            now=app.clock.now(),
        )
    )


def success(claimed: ClaimedRun, result: object = None) -> RunCompletion:
    run = claimed.run
    assert run.claimed_at is not None
    return RunCompletion(
        run_id=run.id,
        token=run.token,
        worker_id=run.lease_owner or "w",
        attempt=run.attempt,
        claimed_at=run.claimed_at,
        started_at=run.started_at,
        outcome=AttemptOutcome.SUCCEEDED,
        next_state=RunState.SUCCEEDED,
        result=None if result is None else f"{result}",
        workflow="step",
    )


async def complete(app: FrozenApp, *completions: RunCompletion) -> list[bool]:
    return await app.store.runs_complete(
        RunsCompleteParams(completions=completions, now=app.clock.now())
    )


async def test_two_parents_ending_at_once_start_their_child_once(app: FrozenApp) -> None:
    flow = Workflow("join")
    a = flow.step("a", task="t")
    b = flow.step("b", task="t")
    flow.step("c", task="t", after=[a, b])
    await app.workflows.register(flow, allow_unregistered=True)
    await started_instances(app, "join", 10)

    claimed = await claim(app, "w1", 100)
    names = {(c.run.idempotency_key or "").split(":")[2] for c in claimed}
    assert sorted(names) == ["a", "b"]
    by_instance: dict[str, list[ClaimedRun]] = {}
    for c in claimed:
        assert c.run.idempotency_key is not None
        by_instance.setdefault(c.run.idempotency_key.split(":")[1], []).append(c)
    # each instance's two parents end in two separate batches at the same moment
    answers = await asyncio.gather(
        *(complete(app, success(pair[0], 1)) for pair in by_instance.values()),
        *(complete(app, success(pair[1], 2)) for pair in by_instance.values()),
    )
    assert all(answer == [True] for answer in answers)

    children = await claim(app, "w2", 100)
    keys = sorted(c.run.idempotency_key or "" for c in children)
    assert len(keys) == 10
    assert all(":c:" in k for k in keys)
    assert len(set(keys)) == 10  # one child run per instance
    # a completion repeated (a worker's retry of its write) is refused and starts nothing
    again = await complete(app, success(claimed[0], 1))
    assert again == [False]
    assert await claim(app, "w3", 100) == []


async def test_a_step_run_an_operator_cancels_is_planned_by_the_sweep(app: FrozenApp) -> None:
    flow = Workflow("swept")
    a = flow.step("a", task="t")
    flow.step("b", task="t", after=a)
    flow.step("after-a", task="t", after=a.finished)
    await app.workflows.register(flow, allow_unregistered=True)
    await started_instances(app, "swept", 1)
    [instance] = await app.workflows.instances(workflow="swept")
    [a_step] = [s for s in await app.workflows.steps(instance.id) if s.step == "a"]
    assert a_step.run_id is not None
    await app.runs.cancel(a_step.run_id)  # not a worker's completion: nothing planned yet
    before = {s.step: s.state for s in await app.workflows.steps(instance.id)}
    assert before["a"] is StepState.RUNNING

    assert await app.store.workflows_sweep() == 1
    assert await app.store.workflows_sweep() == 0  # idempotent
    steps = {s.step: s for s in await app.workflows.steps(instance.id)}
    assert steps["a"].state is StepState.FAILED
    assert steps["a"].reason == "run cancelled"
    assert steps["b"].state is StepState.SKIPPED
    assert steps["after-a"].state is StepState.RUNNING  # on_finished: a cancelled step ended
    [handler] = await claim(app, "w", 10)
    await complete(app, success(handler))
    done = await app.workflows.instance(instance.id)
    assert done.state is InstanceState.SUCCEEDED, done.reason


async def test_a_fan_out_creates_each_item_once_when_its_source_completes_twice(
    app: FrozenApp,
) -> None:
    flow = Workflow("fan")
    s = flow.step("src", task="t")
    flow.step("each", task="t", map_over=s)
    await app.workflows.register(flow, allow_unregistered=True)
    await started_instances(app, "fan", 1)
    [source] = await claim(app, "w", 10)
    first, second = await asyncio.gather(
        complete(app, success(source, "[1, 2, 3]")), complete(app, success(source, "[1, 2, 3]"))
    )
    assert sorted([first, second]) == [[False], [True]]
    items = await claim(app, "w", 10)
    assert len(items) == 3
    inputs = sorted(i.run.payload for i in items)
    assert inputs == [1, 2, 3]
