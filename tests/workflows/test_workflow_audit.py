"""Registering a workflow, cancelling and retrying an instance each leave one audit record
with the app's actor; registering the same content again leaves none."""

from __future__ import annotations

from duetime import Permanent, RunContext
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow


async def records(app: FrozenApp, kind: str) -> list[tuple[str, str, str | None]]:
    page = await app.audit.find(limit=100)
    return [
        (r.action, r.actor, r.subject_name or r.subject_id)
        for r in reversed(page.items)
        if r.subject_kind == kind
    ]


async def test_workflow_changes_are_audited_once_each(app: FrozenApp) -> None:
    @app.task("bad")
    async def bad(ctx: RunContext) -> None:
        raise Permanent("no")

    flow = Workflow("audited")
    flow.step("a", task="bad")
    flow.step("b", task="bad")
    await app.workflows.register(flow)
    await app.workflows.register(flow)  # the same content: no change, no record
    assert [(a, n) for a, _, n in await records(app, "workflow")] == [("registered", "audited")]
    [(_, actor, _)] = await records(app, "workflow")
    assert actor == app.actor

    await app.schedule("go", target={"type": "workflow", "name": "audited"}, now=True)
    await drain(app)
    [instance] = await app.workflows.instances()
    await app.workflows.retry(instance.id)
    await app.workflows.cancel(instance.id)
    assert [(a, n) for a, _, n in await records(app, "workflow_instance")] == [
        ("retried", str(instance.id)),
        ("cancelled", str(instance.id)),
    ]
