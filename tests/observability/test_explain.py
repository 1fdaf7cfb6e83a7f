"""``explain``: what happened to a job's occurrences and why, and its next fire instants — the
pure explanation, ``AsyncApp.explain`` on both stores, ``GET /jobs/{id}/explain`` and
``duetime explain``."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from typer.testing import CliRunner

from duetime import Retry
from duetime._types import (
    DeliveryMode,
    Job,
    JobStatus,
    MisfirePolicy,
    Occurrence,
    OverlapPolicy,
    RetryPolicy,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
)
from duetime.api import create_api
from duetime.cli import cli
from duetime.errors import Permanent, ValidationError
from duetime.explain import explain
from tests.observability.obskit import open_app, worker
from tests.waiting import eventually

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


def a_job(**changes: object) -> Job:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "tenant": "default",
        "name": "nightly",
        "task": "reports.build",
        "payload": None,
        "schedule": Schedule(ScheduleKind.CRON, cron="30 2 * * *", tz="Europe/Paris"),
        "status": JobStatus.ACTIVE,
        "priority": 0,
        "retry": RetryPolicy(),
        "timeout": None,
        "misfire_policy": MisfirePolicy.FIRE_ONCE,
        "misfire_grace": 60.0,
        "overlap_policy": OverlapPolicy.SKIP,
        "delivery": DeliveryMode.AT_LEAST_ONCE,
        "queue": "default",
        "tags": (),
        "metadata": {},
        "partition": 0,
        "next_fire_at": NOW + timedelta(hours=13),
        "created_at": NOW - timedelta(days=3),
        "updated_at": NOW - timedelta(days=3),
    }
    values.update(changes)
    return Job(**values)  # type: ignore[arg-type]


def a_run(job: Job, at: datetime, state: RunState, **changes: object) -> Run:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "job_id": job.id,
        "tenant": job.tenant,
        "job_name": job.name,
        "task": job.task,
        "queue": "default",
        "payload": None,
        "scheduled_for": at,
        "available_at": at,
        "state": state,
        "priority": 0,
        "attempt": 1,
        "max_attempts": 3,
        "token": 1,
        "lease_owner": None,
        "lease_expires_at": None,
        "claimed_at": at,
        "started_at": at + timedelta(milliseconds=3),
        "finished_at": at + timedelta(seconds=2),
        "trigger": RunTrigger.SCHEDULE,
        "idempotency_key": None,
        "reason": None,
        "last_error_class": None,
        "last_error_message": None,
        "replays": 0,
        "created_at": at,
    }
    values.update(changes)
    return Run(**values)  # type: ignore[arg-type]


def test_each_occurrence_says_what_happened_and_why() -> None:
    job = a_job()
    day = timedelta(days=1)
    runs = [
        a_run(job, NOW - day, RunState.SUCCEEDED),
        a_run(job, NOW - 2 * day, RunState.SKIPPED, reason="overlap", started_at=None),
        a_run(
            job,
            NOW - 3 * day,
            RunState.DEAD,
            attempt=3,
            reason="attempts_exhausted",
            last_error_class="TimeoutError",
            last_error_message="the warehouse did not answer",
        ),
    ]
    skips = [(NOW - 6 * day, NOW - 4 * day, 3, "misfire_skip")]
    nexts = [
        Occurrence(
            NOW + timedelta(hours=13),
            (NOW + timedelta(hours=13)).astimezone(),
            "moved from 02:30 (DST gap)",
        )
    ]
    e = explain(
        job,
        now=NOW,
        runs=runs,
        attempts={},
        skips=skips,
        next_fires=nexts,
        served_tasks={"reports.build"},
    )
    assert [r.what for r in e.last] == ["fired", "skipped", "dead", "skipped"]
    assert "succeeded" in e.last[0].why
    assert "overlap policy" in e.last[1].why
    assert "the warehouse did not answer" in e.last[2].why
    assert "dead-letter queue" in e.last[2].why
    assert e.last[3].count == 3
    assert "misfire policy 'skip'" in e.last[3].why
    assert e.last[0].local.utcoffset() == timedelta(hours=1)  # Paris, before DST
    assert any("DST" in n and "moved from 02:30" in n for n in e.notes)
    assert e.summary.startswith("The job is active; it next fires at")
    assert e.schedule == "cron '30 2 * * *' in Europe/Paris"


def test_paused_waiting_for_a_worker_and_retrying() -> None:
    job = a_job(status=JobStatus.PAUSED, updated_at=NOW - timedelta(hours=1))
    runs = [
        a_run(
            job,
            NOW - timedelta(minutes=5),
            RunState.SCHEDULED,
            attempt=0,
            trigger=RunTrigger.MANUAL,
            started_at=None,
            finished_at=None,
        ),
        a_run(job, NOW - timedelta(minutes=30), RunState.SKIPPED, reason="paused"),
        a_run(
            job,
            NOW - timedelta(hours=2),
            RunState.SCHEDULED,
            attempt=1,
            available_at=NOW + timedelta(seconds=30),
            last_error_class="ConnectionError",
            last_error_message="reset",
            finished_at=None,
        ),
    ]
    e = explain(job, now=NOW, runs=runs, attempts={}, skips=[], next_fires=[], served_tasks=set())
    assert [r.what for r in e.last] == ["waiting_for_worker", "paused", "retrying"]
    assert "no live worker serves task 'reports.build'" in e.last[0].why
    assert "paused" in e.last[1].why
    assert "ConnectionError: reset" in e.last[2].why
    assert "retry in 30" in e.last[2].why
    assert e.summary.startswith("The job is paused")
    assert any("no live worker" in n for n in e.notes)


async def test_explain_a_real_job_through_the_app_the_api_and_the_cli(
    store_url: str, tmp_path: object
) -> None:
    app = await open_app(store_url)
    mode = {"fail": "once"}

    @app.task("x.work")
    async def work(ctx, payload):  # type: ignore[no-untyped-def]
        if mode["fail"] == "always":
            raise Permanent("bad input")
        if mode["fail"] == "once" and ctx.attempt == 1:
            raise RuntimeError("flaky network")

    try:
        job = await app.schedule(
            "explained",
            task="x.work",
            cron="0 9 * * *",
            tz="America/New_York",
            retry=Retry(max_attempts=2, backoff_base=0.01, backoff_cap=0.01),
        )
        async with worker(app, ["x.work"]):
            retried = await app.trigger(job.id)
            await eventually(lambda: _ended(app, retried.id), what="the retried run to succeed")
            mode["fail"] = "always"
            dead = await app.trigger(job.id)
            await eventually(lambda: _ended(app, dead.id), what="the dead run")
        # a fresh connection: a worker cancelled while its claim waited for SQLite's write lock
        # can leave the shared connection inside a transaction (reported separately)
        await app.close()
        # (a worker that could not unregister counts as gone once silent this long)
        app = await open_app(store_url, worker_stale_after=0.5)
        await app.pause(job.id)
        waiting = await app.trigger(job.id)  # no worker is up any more

        async def no_worker():  # type: ignore[no-untyped-def]
            found = await app.explain(job.id)
            reports = [r for r in found.last if r.run_id == waiting.id]
            return reports and reports[0].what == "waiting_for_worker" and found

        e = await eventually(no_worker, what="the worker to be gone")
        by_run = {r.run_id: r for r in e.last}
        assert by_run[retried.id].what == "retried"
        assert "flaky network" in by_run[retried.id].why
        assert by_run[dead.id].what == "dead"
        assert "bad input" in by_run[dead.id].why
        assert by_run[waiting.id].what == "waiting_for_worker"
        assert e.status is JobStatus.PAUSED
        assert len(e.next) == 5  # what it would fire at once resumed
        assert all(
            n.local.utcoffset() in (timedelta(hours=-5), timedelta(hours=-4)) for n in e.next
        )

        api = create_api(app, auth_required=False)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            response = await c.get(f"/api/v1/jobs/{job.id}/explain", params={"count": 3})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["name"] == "explained"
            assert body["status"] == "paused"
            assert len(body["next"]) == 3
            assert body["next"][0]["local"].endswith(("-05:00", "-04:00"))
            assert {r["what"] for r in body["last"]} >= {"retried", "dead", "waiting_for_worker"}
            missing = await c.get(f"/api/v1/jobs/{uuid.uuid4()}/explain")
            assert missing.status_code == 404
    finally:
        await app.close()

    if store_url.startswith("postgresql"):
        return
    runner = CliRunner()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(
            cli, [*args, "--db", store_url], env={"DUETIME_WORKER_STALE_AFTER": "0.5"}
        )

    result = await asyncio.to_thread(invoke, "explain", "explained")
    assert result.exit_code == 0, result.output
    assert "The job is paused" in result.stdout
    assert "waiting_for_worker" in result.stdout
    assert "next fire instants" in result.stdout
    result = await asyncio.to_thread(invoke, "explain", "explained", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "paused"
    assert data["next"][0]["local"].endswith(("-05:00", "-04:00"))
    result = await asyncio.to_thread(invoke, "explain", "nope")
    assert result.exit_code == 2
    assert "not found" in result.stderr


async def _ended(app, run_id):  # type: ignore[no-untyped-def]
    run = await app.run(run_id)
    return run.state.terminal


async def test_a_task_served_by_another_tenants_remote_worker_is_not_served_here(
    store_url: str,
) -> None:
    """A remote worker claims its own tenant's runs only: for every other tenant its task names
    are neither served (explain) nor known (registration)."""
    app = await open_app(store_url, tenant="acme")
    try:
        globex = app.for_tenant("globex")
        await globex.remote_workers().claim("w", ["remote.t"], limit=1, lease_ttl=30)
        theirs = await globex.schedule("theirs", task="remote.t", every=60)  # known to globex
        with pytest.raises(ValidationError) as refused:
            await app.schedule("refused", task="remote.t", every=60)
        assert refused.value.field == "task"
        mine = await app.schedule("mine", task="remote.t", every=60, allow_unregistered=True)
        note = "no live worker serves task 'remote.t'"
        assert any(n.startswith(note) for n in (await app.explain(mine.id)).notes)
        assert not any(n.startswith(note) for n in (await globex.explain(theirs.id)).notes)
    finally:
        await app.close()
