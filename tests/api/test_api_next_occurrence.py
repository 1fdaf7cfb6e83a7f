"""The job's "next fire" over the REST API in process (httpx over ASGI, SQLite; issue 17, item
7): ``next_occurrence_at`` is the earliest occurrence not fired yet, while ``next_fire_at``
stays the scheduler's own instant, past the runs it wrote ahead."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from duetime.api import create_api
from duetime.app import AsyncApp
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from tests.api.apikit import ok


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "api.db")) as opened:
        yield opened


def client(app: AsyncApp) -> httpx.AsyncClient:
    api = create_api(app, auth_required=False)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


async def test_job_reads_carry_the_earliest_occurrence_not_fired(app: AsyncApp) -> None:
    job = await app.schedule("ticker", task="duetime.noop", every=60)
    assert job.next_fire_at is not None
    first = job.next_fire_at
    await materialize(app.store, plan_job, horizon=299.0, now=first)  # 5 runs written ahead
    cursor = first + timedelta(minutes=5)
    async with client(app) as c:
        listed = ok(await c.get("/api/v1/jobs"))["items"]
        one = ok(await c.get(f"/api/v1/jobs/{job.id}"))
        explained = ok(await c.get(f"/api/v1/jobs/{job.id}/explain"))
        preview = ok(await c.post("/api/v1/schedules/preview", json={"job_id": str(job.id)}))
        doc = ok(await c.get("/api/v1/openapi.json"))
    for read in (*listed, one, explained):
        assert datetime.fromisoformat(read["next_occurrence_at"]) == first
        assert datetime.fromisoformat(read["next_fire_at"]) == cursor
    assert datetime.fromisoformat(preview["items"][0]["utc"]) == first
    fields = doc["components"]["schemas"]["JobOut"]["properties"]
    assert "not fired yet" in fields["next_occurrence_at"]["description"]
