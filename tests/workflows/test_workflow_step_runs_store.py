"""The store reads issue 21 added, on both stores: ``workflow_versions`` (a workflow's version
numbers) and ``workflow_step_runs`` (an instance's steps and mapped items with their runs'
attempts, timings and results, in one query), tenant-filtered."""

from __future__ import annotations

import uuid

import pytest

from duetime import RunContext
from duetime.errors import NotFound
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import StepState


async def test_versions_and_step_runs_with_timings(app: FrozenApp) -> None:
    @app.task("s.items")
    async def items(ctx: RunContext) -> list[str]:
        return ["a", "b"]

    @app.task("s.echo")
    async def echo(ctx: RunContext, payload: str) -> str:
        return payload.upper()

    wf = Workflow("pairs")
    source = wf.step("source", task="s.items")
    wf.step("each", task="s.echo", map_over=source)
    await app.workflows.register(wf)
    assert await app.store.workflow_versions("default", "pairs") == [1]
    wf.step("more", task="s.items")
    await app.workflows.register(wf)
    assert await app.store.workflow_versions("default", "pairs") == [1, 2]
    assert await app.store.workflow_versions("other", "pairs") == []
    with pytest.raises(NotFound):
        await app.workflows.versions("absent")

    await app.schedule("start", target={"type": "workflow", "name": "pairs"}, now=True)
    await drain(app)
    [instance] = await app.workflows.instances()
    rows = await app.store.workflow_step_runs("default", instance.id)
    by_place = {(r.step, r.map_index): r for r in rows}
    assert set(by_place) == {
        ("source", -1), ("each", -1), ("each", 0), ("each", 1), ("more", -1),
    }  # fmt: skip
    assert [by_place[("each", i)].result for i in (0, 1)] == ["A", "B"]
    for place in (("source", -1), ("each", 0), ("each", 1), ("more", -1)):
        row = by_place[place]
        assert row.state is StepState.SUCCEEDED
        assert row.attempt == 1
        assert row.run_id is not None
        assert row.ready_at is not None
        assert row.started_at is not None
        assert row.finished_at is not None
        assert row.ready_at <= row.started_at <= row.finished_at
    whole = by_place[("each", -1)]  # a mapped step's own row has no run of its own
    assert (whole.run_id, whole.attempt, whole.started_at) == (None, 0, None)
    with pytest.raises(NotFound):
        await app.store.workflow_step_runs("other", instance.id)
    with pytest.raises(NotFound):
        await app.store.workflow_step_runs("default", uuid.uuid4())
