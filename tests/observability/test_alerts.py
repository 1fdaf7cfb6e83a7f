"""Alerts provoked for real and received by a real local webhook receiver: each kind fires once
and resolves once; a second leader after a failover repeats nothing; messages are signed."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from duetime import Retry
from duetime.errors import Permanent
from tests.observability.alertkit import (
    NO_WORKER_SOON,
    ORPHAN,
    PATH,
    alerting,
    assert_once,
    evaluating,
    lead,
    messages,
    serve_orphan,
    settle,
    until_message,
)
from tests.observability.obskit import running, worker
from tests.targets.receiver import Receiver, Reply
from tests.waiting import eventually

__all__ = ["lead"]  # tests/brokers imports it from here


async def test_a_dead_run_fires_once_and_resolves_when_replayed(
    store_url: str, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    async with alerting(store_url, receiver) as (app, evaluator):
        broken = {"on": True}

        @app.task("a.flaky")
        async def flaky(ctx, payload):  # type: ignore[no-untyped-def]
            if broken["on"]:
                raise Permanent("the disk is full")

        fence = await lead(app)
        job = await app.schedule("doomed", task="a.flaky", now=True, retry=Retry(max_attempts=1))
        await app.materializer().run_once()
        async with worker(app, ["a.flaky"]):
            (run,) = (await app.runs(job.id)).items

            async def dead():  # type: ignore[no-untyped-def]
                return (await app.run(run.id)).state == "dead"

            await eventually(dead, what="the run to die")
            with caplog.at_level(logging.WARNING, logger="duetime.alerts"):
                fired = await until_message(evaluator, fence, receiver, "run_dead", "fired")
            assert fired["incident"]["run_id"] == str(run.id)
            assert "the disk is full" in fired["incident"]["summary"]
            assert fired["incident"]["details"]["reason"] == "permanent_error"
            assert any("ALERT run_dead fired" in r.getMessage() for r in caplog.records)
            await settle(evaluator, fence)
            assert len(messages(receiver, "run_dead")) == 1  # once, whatever the passes

            broken["on"] = False
            assert await app.replay([run.id]) == [run.id]

            async def succeeded():  # type: ignore[no-untyped-def]
                return (await app.run(run.id)).state == "succeeded"

            await eventually(succeeded, what="the replayed run to succeed")
            await until_message(evaluator, fence, receiver, "run_dead", "resolved")
            await settle(evaluator, fence)
        assert_once(receiver, "run_dead", str(run.id))
        (incident,) = await app.incidents(firing=False)
        assert incident.resolved_sent_at is not None


async def test_a_missed_sla_fires_once_and_resolves_when_runs_are_on_time_again(
    store_url: str, receiver: Receiver
) -> None:
    async with alerting(store_url, receiver) as (app, evaluator):
        slow = {"seconds": 1.5}

        @app.task("a.report")
        async def report(ctx, payload):  # type: ignore[no-untyped-def]
            # real time on purpose: the worker measures the run's duration on the host clock
            await asyncio.sleep(slow["seconds"])

        fence = await lead(app)
        job = await app.schedule("report", task="a.report", every=timedelta(seconds=2), sla=1.0)
        assert job.sla == 1.0
        async with running(app.materializer().run), worker(app, ["a.report"]):
            fired = await until_message(evaluator, fence, receiver, "sla_missed", "fired")
            assert fired["incident"]["job_id"] == str(job.id)
            assert "missed its SLA" in fired["incident"]["summary"]
            slow["seconds"] = 0.0
            await until_message(evaluator, fence, receiver, "sla_missed", "resolved")
            await settle(evaluator, fence)
        assert_once(receiver, "sla_missed", str(job.id))


async def test_a_stuck_run_fires_once_and_resolves_when_it_finishes(
    store_url: str, receiver: Receiver
) -> None:
    fast = {"alert_stuck_min": 0.5, "alert_stuck_factor": 2.0}
    async with alerting(store_url, receiver, **fast) as (app, evaluator):
        release = asyncio.Event()

        @app.task("a.hang")
        async def hang(ctx, payload):  # type: ignore[no-untyped-def]
            await release.wait()

        try:
            fence = await lead(app)
            job = await app.schedule("hang", task="a.hang", now=True, expected_duration=0.1)
            await app.materializer().run_once()
            async with worker(app, ["a.hang"]):
                fired = await until_message(evaluator, fence, receiver, "run_stuck", "fired")
                (run,) = (await app.runs(job.id)).items
                assert fired["incident"]["run_id"] == str(run.id)
                assert fired["incident"]["details"]["threshold"] == 0.5
                release.set()
                await until_message(evaluator, fence, receiver, "run_stuck", "resolved")
                await settle(evaluator, fence)
            assert_once(receiver, "run_stuck", str(run.id))
        finally:
            release.set()


async def test_no_worker_for_a_task_after_its_worker_stopped(
    store_url: str, receiver: Receiver
) -> None:
    async with alerting(store_url, receiver, **NO_WORKER_SOON) as (app, evaluator):
        serve_orphan(app)
        fence = await lead(app)
        async with worker(app, [ORPHAN]):
            pass  # it served the task, then stopped
        job = await app.schedule("orphan", task=ORPHAN, now=True)
        await app.materializer().run_once()
        fired = await until_message(evaluator, fence, receiver, "no_worker", "fired")
        assert fired["incident"]["subject"] == ORPHAN
        assert fired["incident"]["details"]["due_runs"] == 1
        async with worker(app, [ORPHAN]):
            await until_message(evaluator, fence, receiver, "no_worker", "resolved")

            async def ran():  # type: ignore[no-untyped-def]
                runs = (await app.runs(job.id)).items
                return runs and runs[0].state == "succeeded"

            await eventually(ran, what="the run to succeed once a worker serves it")
        await settle(evaluator, fence)
        assert_once(receiver, "no_worker", ORPHAN)


async def test_scheduler_behind_fires_once_and_a_new_leader_repeats_nothing(
    store_url: str, receiver: Receiver
) -> None:
    async with (
        alerting(store_url, receiver, alert_behind_after=0.5) as (app, first),
        evaluating(app) as second,
    ):

        @app.task("a.quick")
        async def quick(ctx, payload):  # type: ignore[no-untyped-def]
            return None

        fence = await lead(app, "node-a")
        # no scheduler runs: the job's occurrence is never materialized
        await app.schedule("late", task="a.quick", at=timedelta(milliseconds=100))
        fired = await until_message(first, fence, receiver, "scheduler_behind", "fired")
        assert fired["incident"]["details"]["overdue_jobs"] == 1

        # the leader dies; another node takes over and evaluates: nothing is sent again
        await app.store.leader_resign(fence)
        new_fence = await lead(app, "node-b")
        assert new_fence.term > fence.term
        await settle(second, new_fence)
        assert len(messages(receiver, "scheduler_behind")) == 1
        # a write fenced by the old term changes nothing
        stale = await first.run_once(fence)
        assert not stale.led or (stale.opened == [] and stale.resolved == [])

        async with running(app.materializer().run), worker(app, ["a.quick"]):
            await until_message(second, new_fence, receiver, "scheduler_behind", "resolved")
        await settle(second, new_fence)
        assert_once(receiver, "scheduler_behind", "cluster")


async def test_a_webhook_that_fails_is_retried_until_it_takes_the_message(
    store_url: str, receiver: Receiver
) -> None:
    receiver.plan(PATH, Reply(503), Reply(200))
    async with alerting(store_url, receiver, alert_behind_after=0.2) as (app, evaluator):
        fence = await lead(app)
        # due a second ago and never materialized: already behind, no need to wait for it
        await app.schedule("late", task="duetime.noop", at=timedelta(seconds=-1))
        first = await evaluator.run_once(fence)
        assert len(first.opened) == 1
        assert first.delivered == 0  # 503
        (incident,) = await app.incidents(firing=True)
        assert incident.delivery_attempts == 1
        assert incident.last_delivery_error is not None
        assert "503" in incident.last_delivery_error
        # the next try is due after a backoff; pretend it passed
        assert incident.next_delivery_at is not None
        assert await evaluator.deliver(incident.next_delivery_at) == 1
        (incident,) = await app.incidents(firing=True)
        assert incident.fired_sent_at is not None
        assert len(receiver.hits_of(PATH)) == 2  # the 503, then the one that took it
