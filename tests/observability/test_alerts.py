"""Alerts provoked for real and received by a real local webhook receiver: each kind fires once
and resolves once; a second leader after a failover repeats nothing; messages are signed."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from duetime import AsyncApp, Retry
from duetime.errors import Permanent
from duetime.maintenance.alerts import AlertEvaluator
from duetime.store.base import LeaderElectParams, LeaderFence
from duetime.targets.http import sign
from tests.observability.obskit import open_app, running, worker
from tests.targets.receiver import Receiver, Reply
from tests.waiting import eventually

PATH = "/alerts"
SECRET = "alert-test-secret"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    r.plan(PATH, Reply(200))
    try:
        yield r
    finally:
        await r.stop()


async def alerting_app(store_url: str, receiver: Receiver, **settings: Any) -> AsyncApp:
    return await open_app(
        store_url,
        alert_webhooks=receiver.url(PATH),
        alert_secret=SECRET,
        **settings,
    )


async def lead(app: AsyncApp, node: str = "node-a") -> LeaderFence:
    won = await app.store.leader_elect(LeaderElectParams(node, ttl=120))
    assert won is not None
    return LeaderFence(node, won.term)


def messages(receiver: Receiver, kind: str) -> list[dict[str, Any]]:
    out = []
    for hit in receiver.hits_of(PATH):
        body = json.loads(hit.body)
        # every message is signed like a webhook target's request
        timestamp = int(hit.headers["Duetime-Timestamp"])
        assert hit.headers["Duetime-Signature"] == sign(SECRET, timestamp, hit.body)
        assert hit.headers["Idempotency-Key"] == f"{body['incident']['id']}:{body['event']}"
        if body["incident"]["kind"] == kind:
            out.append(body)
    return out


async def until_message(
    evaluator: AlertEvaluator,
    fence: LeaderFence,
    receiver: Receiver,
    kind: str,
    event: str,
    *,
    timeout: float = 20.0,
) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        await evaluator.run_once(fence)
        found = [m for m in messages(receiver, kind) if m["event"] == event]
        return found[0] if found else None

    return await eventually(probe, what=f"{kind} {event}", timeout=timeout, every=0.2)


async def settle(evaluator: AlertEvaluator, fence: LeaderFence, passes: int = 3) -> None:
    for _ in range(passes):
        await evaluator.run_once(fence)


def assert_once(receiver: Receiver, kind: str, subject: str) -> None:
    mine = [m for m in messages(receiver, kind) if m["incident"]["subject"] == subject]
    assert [m["event"] for m in mine] == ["fired", "resolved"], mine
    assert mine[0]["incident"]["id"] == mine[1]["incident"]["id"]
    assert mine[1]["incident"]["state"] == "resolved"


async def test_a_dead_run_fires_once_and_resolves_when_replayed(
    store_url: str, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    app = await alerting_app(store_url, receiver)
    broken = {"on": True}

    @app.task("a.flaky")
    async def flaky(ctx, payload):  # type: ignore[no-untyped-def]
        if broken["on"]:
            raise Permanent("the disk is full")

    evaluator = AlertEvaluator(app.store, app.settings)
    try:
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
    finally:
        await evaluator.close()
        await app.close()


async def test_a_missed_sla_fires_once_and_resolves_when_runs_are_on_time_again(
    store_url: str, receiver: Receiver
) -> None:
    app = await alerting_app(store_url, receiver)
    slow = {"seconds": 1.5}

    @app.task("a.report")
    async def report(ctx, payload):  # type: ignore[no-untyped-def]
        # real time on purpose: the worker measures the run's duration on the host clock
        await asyncio.sleep(slow["seconds"])

    evaluator = AlertEvaluator(app.store, app.settings)
    try:
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
    finally:
        await evaluator.close()
        await app.close()


async def test_a_stuck_run_fires_once_and_resolves_when_it_finishes(
    store_url: str, receiver: Receiver
) -> None:
    app = await alerting_app(store_url, receiver, alert_stuck_min=0.5, alert_stuck_factor=2.0)
    release = asyncio.Event()

    @app.task("a.hang")
    async def hang(ctx, payload):  # type: ignore[no-untyped-def]
        await release.wait()

    evaluator = AlertEvaluator(app.store, app.settings)
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
        await evaluator.close()
        await app.close()


async def test_no_worker_for_a_task_after_its_worker_stopped(
    store_url: str, receiver: Receiver
) -> None:
    # a stopped worker counts as gone once silent for worker_stale_after (it also unregisters)
    app = await alerting_app(store_url, receiver, alert_no_worker_after=0.5, worker_stale_after=1.0)

    @app.task("a.orphan")
    async def orphan(ctx, payload):  # type: ignore[no-untyped-def]
        return None

    evaluator = AlertEvaluator(app.store, app.settings)
    try:
        fence = await lead(app)
        async with worker(app, ["a.orphan"]):
            pass  # it served the task, then stopped
        job = await app.schedule("orphan", task="a.orphan", now=True)
        await app.materializer().run_once()
        fired = await until_message(evaluator, fence, receiver, "no_worker", "fired")
        assert fired["incident"]["subject"] == "a.orphan"
        assert fired["incident"]["details"]["due_runs"] == 1
        async with worker(app, ["a.orphan"]):
            await until_message(evaluator, fence, receiver, "no_worker", "resolved")

            async def ran():  # type: ignore[no-untyped-def]
                runs = (await app.runs(job.id)).items
                return runs and runs[0].state == "succeeded"

            await eventually(ran, what="the run to succeed once a worker serves it")
        await settle(evaluator, fence)
        assert_once(receiver, "no_worker", "a.orphan")
    finally:
        await evaluator.close()
        await app.close()


async def test_scheduler_behind_fires_once_and_a_new_leader_repeats_nothing(
    store_url: str, receiver: Receiver
) -> None:
    app = await alerting_app(store_url, receiver, alert_behind_after=0.5)

    @app.task("a.quick")
    async def quick(ctx, payload):  # type: ignore[no-untyped-def]
        return None

    first = AlertEvaluator(app.store, app.settings)
    second = AlertEvaluator(app.store, app.settings)
    try:
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
    finally:
        await first.close()
        await second.close()
        await app.close()


async def test_a_webhook_that_fails_is_retried_until_it_takes_the_message(
    store_url: str, receiver: Receiver
) -> None:
    receiver.plan(PATH, Reply(503), Reply(200))
    app = await alerting_app(store_url, receiver, alert_behind_after=0.2)
    evaluator = AlertEvaluator(app.store, app.settings)
    try:
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
    finally:
        await evaluator.close()
        await app.close()
