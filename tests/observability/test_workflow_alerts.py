"""The workflow alerts (issue 21, item 5) from the real alert evaluator on each store, on a
frozen clock: ``workflow_failed`` fires once per failed instance and resolves when it is
retried to success; ``workflow_sla_missed`` fires for an instance running longer than its
workflow job's ``sla`` and resolves when the instance ends."""

from __future__ import annotations

from datetime import timedelta

from duetime import Permanent, Retry, RunContext
from duetime._monitoring import AlertKind
from duetime.testing import FrozenApp, FrozenClock, drain
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState
from tests.observability.alertkit import evaluating, lead

WORKFLOW = {"type": "workflow", "name": "nightly"}


async def test_a_failed_instance_fires_once_and_resolves_when_retried(
    store_url: str, clock: FrozenClock
) -> None:
    broken = {"yes": True}
    async with FrozenApp(store_url, clock=clock) as app:

        @app.task("wa.load")
        async def load(ctx: RunContext) -> str:
            if broken["yes"]:
                raise Permanent("the warehouse is down")
            return "loaded"

        nightly = Workflow("nightly")
        nightly.step("load", task="wa.load")
        await app.workflows.register(nightly)
        job = await app.schedule("nightly-now", target=WORKFLOW, now=True)
        await drain(app)
        [instance] = await app.workflows.instances(job=job.id)
        assert instance.state is InstanceState.FAILED
        async with evaluating(app) as evaluator:
            fence = await lead(app)
            done = await evaluator.run_once(fence)
            [incident] = [i for i in done.opened if i.kind is AlertKind.WORKFLOW_FAILED]
            assert incident.subject == str(instance.id)
            assert incident.tenant == "default"
            assert incident.job_id == job.id
            assert "workflow 'nightly' v1" in incident.summary
            assert "failed" in incident.summary
            assert incident.details["workflow"] == "nightly"
            again = await evaluator.run_once(fence)
            assert (again.opened, again.resolved) == ([], [])  # once
            # past the lookback the open incident stays open while the instance is failed
            clock.advance(seconds=app.settings.alert_dead_lookback + 3600)
            fence = await lead(app)  # the earlier leadership expired meanwhile
            later = await evaluator.run_once(fence)
            assert later.led
            assert AlertKind.WORKFLOW_FAILED not in {i.kind for i in later.resolved}

            broken["yes"] = False
            await app.workflows.retry(instance.id)
            await drain(app)
            assert (await app.workflows.instance(instance.id)).state is InstanceState.SUCCEEDED
            done = await evaluator.run_once(fence)
            # the step's run is an ordinary run: its run_dead incident resolves too
            resolved = {i.kind: i for i in done.resolved}
            assert {AlertKind.WORKFLOW_FAILED, AlertKind.RUN_DEAD} <= set(resolved)
            assert resolved[AlertKind.WORKFLOW_FAILED].subject == str(instance.id)
            assert "retried" in (resolved[AlertKind.WORKFLOW_FAILED].resolution or "")


async def test_an_instance_over_its_sla_fires_and_resolves_when_it_ends(
    store_url: str, clock: FrozenClock
) -> None:
    async with FrozenApp(store_url, clock=clock) as app:

        @app.task("wa.flaky")
        async def flaky(ctx: RunContext) -> None:
            raise RuntimeError("not yet")

        nightly = Workflow("nightly")
        nightly.step("wait", task="wa.flaky", retry=Retry(max_attempts=5, backoff_base=3600))
        await app.workflows.register(nightly)
        job = await app.schedule(
            "nightly-now", target=WORKFLOW, now=True, sla=60, retry=Retry(max_attempts=1)
        )
        await drain(app)  # the step failed once, its retry an hour away: the instance runs
        [instance] = await app.workflows.instances(job=job.id)
        assert instance.state is InstanceState.RUNNING
        async with evaluating(app) as evaluator:
            fence = await lead(app)
            early = await evaluator.run_once(fence)
            assert [i for i in early.opened if i.kind is AlertKind.WORKFLOW_SLA_MISSED] == []

            clock.advance(timedelta(seconds=61))
            late = await evaluator.run_once(fence)
            [incident] = [i for i in late.opened if i.kind is AlertKind.WORKFLOW_SLA_MISSED]
            assert incident.subject == str(instance.id)
            assert "missed its SLA" in incident.summary
            assert incident.details["sla"] == 60
            assert (await evaluator.run_once(fence)).opened == []  # once

            await app.workflows.cancel(instance.id)
            done = await evaluator.run_once(fence)
            mine = [i for i in done.resolved if i.kind is AlertKind.WORKFLOW_SLA_MISSED]
            assert [i.subject for i in mine] == [str(instance.id)]
