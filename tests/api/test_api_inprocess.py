"""Fast edge cases in process (httpx over ASGI, SQLite): the rate limit, readiness failing,
the catch-all for bugs, and the shape of the OpenAPI document."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from duetime.api import create_api
from duetime.api.ratelimit import RateLimiter
from duetime.app import AsyncApp, Jobs
from duetime.errors import SchemaError
from tests.api.apikit import EXPLODING, fail_in_process, ok, problem


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "api.db")) as opened:
        yield opened


def client(api: object) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


async def test_rate_limit_is_per_tenant_with_retry_after(app: AsyncApp) -> None:
    api = create_api(app, app.settings.with_(api_rate_limit=2), auth_required=False)
    async with client(api) as c:
        for _ in range(2):
            ok(await c.get("/api/v1/jobs"))
        limited = problem(await c.get("/api/v1/jobs"), 429)
        assert "default" in limited["detail"]
        response = await c.get("/api/v1/jobs")
        assert response.status_code == 429
        assert int(response.headers["retry-after"]) >= 1
        ok(await c.get("/api/v1/jobs", params={"tenant": "other"}))  # its own bucket
        ok(await c.get("/healthz"))  # health is never limited


def test_token_bucket_refills() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    assert [limiter.acquire("t") for _ in range(3)] == [None, None, 1]
    now[0] = 0.5
    assert limiter.acquire("t") is None
    assert limiter.acquire("t") == 1
    assert RateLimiter(0).acquire("t") is None


async def test_a_run_shows_its_failed_attempts_traceback(app: AsyncApp) -> None:
    """Issue 17: GET /runs/{id} carries each attempt's traceback (null for none)."""
    run_id = await fail_in_process(app)
    async with client(create_api(app, auth_required=False)) as c:
        detail = ok(await c.get(f"/api/v1/runs/{run_id}"))
        doc = ok(await c.get("/api/v1/openapi.json"))
    (attempt,) = detail["attempts"]
    assert attempt["outcome"] == "failed"
    assert attempt["traceback"].startswith("Traceback (most recent call last):")
    assert "in explode_task" in attempt["traceback"]
    assert attempt["traceback"].rstrip().endswith(f"RuntimeError: {EXPLODING}")
    schema = doc["components"]["schemas"]["AttemptOut"]
    assert "traceback" in schema["required"]
    assert "16 KiB" in schema["properties"]["traceback"]["description"]


async def test_readyz_is_503_when_the_schema_is_not_known(
    app: AsyncApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with client(create_api(app, auth_required=False)) as c:
        assert ok(await c.get("/readyz"))["store"] == "sqlite"

        async def newer() -> None:
            raise SchemaError("database schema is v99; this duetime knows up to v2")

        monkeypatch.setattr(app.store, "check_schema", newer)
        body = problem(await c.get("/readyz"), 503)
        assert "v99" in body["detail"]
        ok(await c.get("/healthz"))


async def test_a_bug_is_a_logged_problem_500(
    app: AsyncApp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Jobs, "find", broken)
    async with client(create_api(app, auth_required=False)) as c:
        body = problem(await c.get("/api/v1/jobs"), 500)
    assert "a bug" not in body["detail"]  # internals are logged, not sent
    assert "a bug" in caplog.text


async def test_a_failing_sqlite_statement_is_a_500_not_an_outage(
    app: AsyncApp, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a database that is busy, locked or failing its I/O is an outage (503, retry): a
    statement that cannot work (here: a column gone) is a bug, a 500 with its traceback."""
    with sqlite3.connect(tmp_path / "api.db") as other:
        other.execute("ALTER TABLE jobs RENAME COLUMN name TO gone")
    async with client(create_api(app, auth_required=False)) as c:
        problem(await c.get("/api/v1/jobs"), 500)
    assert "no such column" in caplog.text
    assert "cannot be reached" not in caplog.text


async def test_a_locked_sqlite_database_is_an_outage(app: AsyncApp, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "api.db", timeout=0) as holder:
        holder.execute("BEGIN IMMEDIATE")
        other = sqlite3.connect(tmp_path / "api.db", timeout=0)
        with pytest.raises(sqlite3.OperationalError) as locked:
            other.execute("BEGIN IMMEDIATE")
        other.close()
        holder.rollback()
    with pytest.raises(sqlite3.OperationalError) as broken:
        holder.execute("SELECT gone FROM jobs")
    assert app.unreachable(locked.value)
    assert app.unreachable(sqlite3.OperationalError("database stayed locked; gave up"))
    assert not app.unreachable(broken.value)


async def test_openapi_documents_problems_and_the_worker_protocol(app: AsyncApp) -> None:
    async with client(create_api(app, auth_required=True)) as c:
        schema = ok(await c.get("/api/v1/openapi.json"))
        problem(await c.get("/api/v1/jobs"), 401)
    assert set(schema["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation["summary"], (method, path)
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert list(response["content"]) == ["application/problem+json"]
            if path.startswith("/api/v1/"):
                assert {"401", "403", "429"} <= set(operation["responses"]), (method, path)
    claim = schema["paths"]["/api/v1/worker/claim"]["post"]
    assert "token" in claim["description"]
    assert "lease" in claim["description"]
    complete = schema["paths"]["/api/v1/worker/complete"]["post"]
    assert "409" in complete["responses"]
    trigger = schema["paths"]["/api/v1/jobs/{job_id}/trigger"]["post"]
    assert {"200", "201", "409"} <= set(trigger["responses"])
