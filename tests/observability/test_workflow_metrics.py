"""Workflow metrics (issue 21, item 5) with a real worker on each store: every step run's
first start observes its hand-off latency (start − creation, when its parents allowed it),
and the instance gauge counts instances by workflow and state, read from the database at
scrape time (whichever process ended them)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from duetime import Permanent, RunContext
from duetime.metrics import Metrics, metrics
from duetime.workflows.definition import WORKFLOW_TASK, Workflow
from duetime.workflows.engine import InstanceState
from tests.observability.obskit import open_app, worker
from tests.waiting import eventually

TENANT = "wf-metrics"


def handoffs() -> float:
    value = metrics().registry.get_sample_value(
        "duetime_workflow_step_handoff_seconds_count", {"tenant": TENANT}
    )
    return value or 0.0


async def test_handoffs_are_observed_and_instances_counted_by_outcome(store_url: str) -> None:
    app = await open_app(store_url, tenant=TENANT)

    @app.task("wm.step")
    async def step(ctx: RunContext) -> str:
        return ctx.workflow.step if ctx.workflow else ""

    @app.task("wm.doomed")
    async def doomed(ctx: RunContext) -> None:
        raise Permanent("never works")

    chain = Workflow("chain")
    a = chain.step("a", task="wm.step")
    b = chain.step("b", task="wm.step", after=a)
    chain.step("c", task="wm.step", after=b)
    broken = Workflow("broken")
    broken.step("x", task="wm.doomed")
    before = handoffs()
    try:
        await app.workflows.register(chain)
        await app.workflows.register(broken)
        jobs = [
            await app.schedule("chain-now", target={"type": "workflow", "name": "chain"}, now=True),
            await app.schedule(
                "broken-now", target={"type": "workflow", "name": "broken"}, now=True
            ),
        ]
        await app.materializer().run_once()
        async with worker(app, [WORKFLOW_TASK, "wm.step", "wm.doomed"]):

            async def ended() -> bool:
                found: list[Any] = []
                for job in jobs:
                    found += await app.workflows.instances(job=job.id)
                return len(found) == 2 and all(i.state != InstanceState.RUNNING for i in found)

            await eventually(ended, what="both instances to end")
            # the worker hands its tallies to Prometheus per completion batch
            await eventually(
                lambda: _true(handoffs() - before == 4), what="4 hand-offs (a, b, c, x)"
            )

        registry = Metrics(CollectorRegistry())
        await registry.refresh(app.cluster_stats, max_age=0)

        def instances(workflow: str, state: str) -> float | None:
            return registry.registry.get_sample_value(
                "duetime_workflow_instances",
                {"tenant": TENANT, "workflow": workflow, "state": state},
            )

        assert instances("chain", "succeeded") == 1
        assert instances("broken", "failed") == 1
        assert instances("chain", "failed") is None
        assert instances("chain", "running") is None
        text = registry.exposition().decode()
        assert "# TYPE duetime_workflow_instances gauge" in text
        buckets = metrics().exposition().decode()
        assert f'duetime_workflow_step_handoff_seconds_bucket{{le="+Inf",tenant="{TENANT}"}}' in (
            buckets
        )
    finally:
        await app.close()


async def _true(flag: bool) -> bool:
    return flag
