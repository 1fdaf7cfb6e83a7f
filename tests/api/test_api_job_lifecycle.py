"""Pause notes and the tenant's job cap over REST (httpx over ASGI, SQLite; decision 0023)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from duetime.api import create_api
from duetime.app import AsyncApp
from tests.api.apikit import ok, problem


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "api.db")) as opened:
        opened.registry.register("t", lambda: None)
        yield opened


def client(app: AsyncApp) -> httpx.AsyncClient:
    api = create_api(app, auth_required=False)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


async def test_pause_with_a_note_shows_on_the_job_and_resume_clears_it(app: AsyncApp) -> None:
    await app.schedule("nightly", task="t", cron="0 3 * * *")
    until = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    async with client(app) as c:
        body = {"note": "db migration", "by": "ana", "until": until.isoformat()}
        paused = ok(await c.post("/api/v1/jobs/nightly/pause", json=body))
        assert paused["status"] == "paused"
        assert paused["pause"]["note"] == "db migration"
        assert paused["pause"]["by"] == "ana"
        assert datetime.fromisoformat(paused["pause"]["until"]) == until
        shown = ok(await c.get("/api/v1/jobs/nightly"))
        assert shown["pause"] == paused["pause"]
        resumed = ok(await c.post("/api/v1/jobs/nightly/resume"))
        assert resumed["pause"] is None
        # no body: a plain pause, as before
        assert ok(await c.post("/api/v1/jobs/nightly/pause"))["status"] == "paused"


async def test_a_pause_until_the_past_is_a_422_naming_until(app: AsyncApp) -> None:
    await app.schedule("nightly", task="t", cron="0 3 * * *")
    async with client(app) as c:
        past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
        resp = await c.post("/api/v1/jobs/nightly/pause", json={"until": past})
        body = problem(resp, 422)
        assert "until" in str(body)
        resp = await c.post("/api/v1/jobs/nightly/pause", json={"oops": 1})
        problem(resp, 422)


async def test_the_job_cap_is_set_with_the_limits_and_refuses_with_a_422(app: AsyncApp) -> None:
    async with client(app) as c:
        limits = ok(await c.put("/api/v1/tenants/default/limits", json={"max_jobs": 1}))
        assert limits["max_jobs"] == 1
        spec = {"name": "a", "task": "t", "cron": "0 3 * * *"}
        ok(await c.post("/api/v1/jobs", json=spec), 201)
        resp = await c.post("/api/v1/jobs", json={**spec, "name": "b"})
        body = problem(resp, 422)
        assert "max_jobs" in str(body)
        assert "cap of 1" in str(body)
        ok(await c.put("/api/v1/tenants/default/limits", json={}))
        ok(await c.post("/api/v1/jobs", json={**spec, "name": "b"}), 201)


async def test_history_and_pause_on_failure(app: AsyncApp) -> None:
    await app.schedule("nightly", task="t", cron="0 3 * * *")
    async with client(app) as c:
        ok(await c.post("/api/v1/jobs/nightly/pause", json={"note": "why not", "by": "ana"}))
        ok(await c.post("/api/v1/jobs/nightly/resume"))
        history = ok(await c.get("/api/v1/jobs/nightly/history"))["items"]
        assert [e["kind"] for e in history] == ["resumed", "paused"]
        assert history[1]["detail"]["note"] == "why not"
        older = ok(await c.get(f"/api/v1/jobs/nightly/history?before={history[0]['id']}"))
        assert [e["kind"] for e in older["items"]] == ["paused"]
        problem(await c.get("/api/v1/jobs/nope/history"), 404)
        job = ok(await c.put("/api/v1/jobs/nightly/pause-on-failure", json={"after": 3}))
        assert job["pause_after_dead"] == 3
        problem(await c.put("/api/v1/jobs/nightly/pause-on-failure", json={"after": 0}), 422)
        job = ok(await c.put("/api/v1/jobs/nightly/pause-on-failure", json={"after": None}))
        assert job["pause_after_dead"] is None


async def test_sync_plans_then_applies_and_retires_only_its_own(app: AsyncApp) -> None:
    await app.schedule("by-hand", task="t", cron="0 3 * * *")
    declared = [{"name": n, "task": "t", "cron": "0 3 * * *"} for n in ("a", "b")]
    async with client(app) as c:
        plan = ok(await c.post("/api/v1/jobs/sync", json={"jobs": declared, "source": "app"}))
        assert plan["create"] == ["a", "b"]
        assert plan["dry_run"] is True
        problem(await c.get("/api/v1/jobs/a"), 404)
        body = {"jobs": declared, "source": "app", "dry_run": False}
        assert ok(await c.post("/api/v1/jobs/sync", json=body))["dry_run"] is False
        assert ok(await c.get("/api/v1/jobs/a"))["declared_source"] == "app"
        body = {"jobs": declared[:1], "source": "app", "dry_run": False, "retire": "delete"}
        assert ok(await c.post("/api/v1/jobs/sync", json=body))["retire"] == ["b"]
        problem(await c.get("/api/v1/jobs/b"), 404)
        assert ok(await c.get("/api/v1/jobs/by-hand"))["status"] == "active"
        bad = {"jobs": declared + declared[:1], "source": "app"}
        assert "declared more than once" in str(
            problem(await c.post("/api/v1/jobs/sync", json=bad), 422)
        )
        problem(await c.post("/api/v1/jobs/sync", json={"jobs": [], "retire": "archive"}), 422)
