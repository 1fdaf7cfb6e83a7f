"""Pause on failure end to end (decision 0023): the N-th consecutive dead run pauses the job in
the leader's lifecycle pass, the alert fires once (a signed webhook message) and resolves when
the job is resumed."""

from __future__ import annotations

from typing import Any

from duetime import AsyncApp
from duetime._types import AttemptOutcome, JobStatus, RunState
from duetime.app.lifecycle import LifecyclePass
from duetime.store.base import RunCompletion, RunsClaimParams, RunsCompleteParams
from tests.observability.alertkit import alerting, lead, messages, settle, until_message
from tests.targets.receiver import Receiver

TASK = "a.doomed"


async def die(app: AsyncApp, job: Any) -> None:
    """One manual run of ``job``, claimed and completed dead through the store."""
    await app.trigger(job.id)
    (claimed,) = await app.store.runs_claim(
        RunsClaimParams(worker_id="w", tasks=[TASK], limit=1, lease_ttl=30.0, lookahead=0.0)
    )
    run = claimed.run
    assert run.claimed_at is not None
    done = RunCompletion(
        run_id=run.id,
        token=run.token,
        worker_id="w",
        attempt=run.attempt,
        claimed_at=run.claimed_at,
        started_at=run.started_at,
        outcome=AttemptOutcome.FAILED,
        next_state=RunState.DEAD,
        reason="attempts_exhausted",
    )
    assert await app.store.runs_complete(RunsCompleteParams([done])) == [True]


async def test_the_nth_dead_run_pauses_the_job_with_an_alert_until_resumed(
    store_url: str, receiver: Receiver
) -> None:
    async with alerting(store_url, receiver) as (app, evaluator):
        app.registry.register(TASK, lambda: None)
        lifecycle = LifecyclePass(app.store, lambda tenant: app.for_tenant(tenant).jobs)
        fence = await lead(app)
        job = await app.schedule("doomed", task=TASK, cron="0 3 * * *", overlap="allow")
        await app.pause_on_failure(job.id, 2)
        await die(app, job)
        assert await lifecycle.run_once(fence) == (0, 0)
        await die(app, job)
        assert await lifecycle.run_once(fence) == (0, 1)
        assert await lifecycle.run_once(fence) == (0, 0)  # once
        paused = await app.get(job.id)
        assert paused.status is JobStatus.PAUSED
        assert paused.pause is not None
        assert paused.pause.by == "duetime"
        assert paused.pause.note == "paused after 2 consecutive dead runs"
        fired = await until_message(evaluator, fence, receiver, "job_paused_on_failure", "fired")
        assert fired["incident"]["job_id"] == str(job.id)
        assert "paused after 2 consecutive dead runs" in fired["incident"]["summary"]
        await settle(evaluator, fence)
        assert len(messages(receiver, "job_paused_on_failure")) == 1
        await app.resume(job.id)
        await until_message(evaluator, fence, receiver, "job_paused_on_failure", "resolved")
        assert [e.kind for e in await app.job_history(job.id)] == [
            "resumed",
            "paused_on_failure",
        ]
        # the streak counts from the resume: one more dead run is not two
        await die(app, job)
        assert await lifecycle.run_once(fence) == (0, 0)
