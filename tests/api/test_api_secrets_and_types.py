"""In process (httpx over ASGI, SQLite, API keys): webhook credentials in a job's
``target.headers`` read as ``"<redacted>"`` for every role and in every job representation,
a write-back keeps the stored value, and the marker with nothing to keep is refused; numbers
and booleans are strict (``true`` is not 1 second) and NaN / Infinity are refused, with the
field named."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime._types import ApiRole
from duetime.api import create_api
from duetime.app import AsyncApp
from tests.api.apikit import ok, problem

SECRET = "Bearer s3cret-token-123"
MARKER = "<redacted>"
TARGET = {
    "type": "http",
    "url": "https://hooks.example.com/settle",
    "headers": {"Authorization": SECRET, "X-Team": "billing-ops"},
}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "api.db")) as opened:
        yield opened


@pytest.fixture
async def keys(app: AsyncApp) -> dict[str, str]:
    return {role.value: (await app.create_key(role))[1] for role in ApiRole}


def client(api: object, key: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)  # type: ignore[arg-type]
    return httpx.AsyncClient(
        transport=transport,
        base_url="http://test/api/v1",
        headers={"Authorization": f"Bearer {key}"},
    )


def redacted(job: dict[str, Any]) -> None:
    assert job["target"]["headers"] == {"Authorization": MARKER, "X-Team": MARKER}, job
    assert job["target"]["url"] == TARGET["url"]


# --- webhook credentials ----------------------------------------------------------------------


async def test_header_values_are_redacted_in_every_job_representation(
    app: AsyncApp, keys: dict[str, str]
) -> None:
    api = create_api(app, auth_required=True)
    async with client(api, keys["operator"]) as c:
        created = ok(
            await c.post("/jobs", json={"name": "hook", "target": TARGET, "every": 60}), 201
        )
        redacted(created)
        job_id = created["id"]
        redacted(ok(await c.post(f"/jobs/{job_id}/pause")))
        redacted(ok(await c.post(f"/jobs/{job_id}/resume")))
        redacted(ok(await c.patch(f"/jobs/{job_id}", json={"priority": 5})))
    for role in ("viewer", "operator", "admin", "superadmin"):
        async with client(api, keys[role]) as c:
            one = await c.get(f"/jobs/{job_id}")
            page = await c.get("/jobs")
            for response in (one, page):
                assert SECRET not in response.text
                assert "billing-ops" not in response.text
            redacted(ok(one))
            [listed] = ok(page)["items"]
            redacted(listed)
    # the stored value is untouched: the worker sends it, the Python API reads it
    assert (await app.get("hook")).target["headers"]["Authorization"] == SECRET  # type: ignore[index]


async def test_a_job_written_back_as_read_keeps_its_credentials(
    app: AsyncApp, keys: dict[str, str]
) -> None:
    api = create_api(app, auth_required=True)
    async with client(api, keys["operator"]) as c:
        job = ok(await c.post("/jobs", json={"name": "hook", "target": TARGET, "every": 60}), 201)
        read = ok(await c.get(f"/jobs/{job['id']}"))
        changed = {**read["target"], "url": "https://hooks.example.com/v2"}
        ok(await c.patch(f"/jobs/{job['id']}", json={"target": changed}))
        stored = (await app.get("hook")).target
        assert stored is not None
        assert stored["url"] == "https://hooks.example.com/v2"
        assert stored["headers"] == TARGET["headers"]
        # header names match without regard to case; a rotated value is simply written
        rotated = {**changed, "headers": {"authorization": "Bearer new", "x-team": MARKER}}
        after = ok(await c.patch(f"/jobs/{job['id']}", json={"target": rotated}))
        assert after["target"]["headers"] == {"authorization": MARKER, "x-team": MARKER}
        stored = (await app.get("hook")).target
        assert stored is not None
        assert stored["headers"] == {"authorization": "Bearer new", "x-team": "billing-ops"}
        # POST of a known name is still a conflict, marker or not
        problem(
            await c.post("/jobs", json={"name": "hook", "target": read["target"], "every": 60}), 409
        )


async def test_the_marker_with_nothing_to_keep_is_a_field_error(
    app: AsyncApp, keys: dict[str, str]
) -> None:
    api = create_api(app, auth_required=True)
    async with client(api, keys["operator"]) as c:
        fresh = {**TARGET, "headers": {"Authorization": MARKER}}
        body = problem(
            await c.post("/jobs", json={"name": "new", "target": fresh, "every": 60}),
            422,
            "target.headers.Authorization",
        )
        assert "redaction marker" in body["detail"]
        job = ok(await c.post("/jobs", json={"name": "hook", "target": TARGET, "every": 60}), 201)
        more = {**TARGET, "headers": {"Authorization": MARKER, "X-New": MARKER}}
        problem(
            await c.patch(f"/jobs/{job['id']}", json={"target": more}), 422, "target.headers.X-New"
        )
        # a job that had a task, not a target, has no value to keep either
        task_job = ok(
            await c.post(
                "/jobs",
                json={"name": "t", "task": "x", "every": 60, "allow_unregistered": True},
            ),
            201,
        )
        problem(
            await c.patch(f"/jobs/{task_job['id']}", json={"target": fresh}),
            422,
            "target.headers.Authorization",
        )
    stored = (await app.get("hook")).target
    assert stored is not None
    assert stored["headers"] == TARGET["headers"]


# --- strict types -----------------------------------------------------------------------------

JOB = {"name": "strict", "task": "x", "allow_unregistered": True}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"every": True}, "every"),
        ({"every": False}, "every"),
        ({"every": [60]}, "every"),
        ({"every": 0}, "every"),
        ({"cron": "* * * * *", "priority": True}, "priority"),
        ({"cron": "* * * * *", "priority": "5"}, "priority"),
        ({"cron": "* * * * *", "priority": 2.0}, "priority"),
        ({"cron": "* * * * *", "timeout": True}, "timeout"),
        ({"cron": "* * * * *", "timeout": "30"}, "timeout"),
        ({"cron": "* * * * *", "jitter": True}, "jitter"),
        ({"cron": "* * * * *", "misfire_grace": True}, "misfire_grace"),
        ({"cron": "* * * * *", "sla": True}, "sla"),
        ({"cron": "* * * * *", "max_backfill": True}, "max_backfill"),
        ({"cron": "* * * * *", "overlap": "allow", "max_concurrency": True}, "max_concurrency"),
        ({"cron": "* * * * *", "retry": {"max_attempts": True}}, "retry.max_attempts"),
        ({"cron": "* * * * *", "retry": {"backoff_factor": True}}, "retry.backoff_factor"),
        ({"now": 1}, "now"),
        ({"cron": "* * * * *", "allow_unregistered": "yes"}, "allow_unregistered"),
    ],
)
async def test_booleans_and_strings_are_not_numbers(
    app: AsyncApp, keys: dict[str, str], fields: dict[str, Any], field: str
) -> None:
    async with client(create_api(app, auth_required=True), keys["operator"]) as c:
        problem(await c.post("/jobs", json={**JOB, **fields}), 422, field)
    assert (await app.jobs.find()).items == []


async def test_numbers_are_still_numbers(app: AsyncApp, keys: dict[str, str]) -> None:
    async with client(create_api(app, auth_required=True), keys["operator"]) as c:
        job = ok(await c.post("/jobs", json={**JOB, "every": 90, "timeout": 5, "jitter": 1}), 201)
        assert (job["schedule"]["every_seconds"], job["timeout"], job["jitter"]) == (90, 5, 1)
        again = ok(await c.patch(f"/jobs/{job['id']}", json={"every": "PT2M", "priority": -3}))
        assert (again["schedule"]["every_seconds"], again["priority"]) == (120, -3)


async def test_tenant_limits_are_strict(app: AsyncApp, keys: dict[str, str]) -> None:
    async with client(create_api(app, auth_required=True), keys["superadmin"]) as c:
        for body, field in (
            ({"max_in_flight": True}, "max_in_flight"),
            ({"max_in_flight": 2.0}, "max_in_flight"),
            ({"weight": True}, "weight"),
            ({"max_starts_per_second": True}, "max_starts_per_second"),
        ):
            problem(await c.put("/tenants/acme/limits", json=body), 422, field)
        ok(await c.put("/tenants/acme/limits", json={"max_in_flight": 3, "weight": 2}))
        body = '{"max_starts_per_second": NaN}'
        sent = await c.put("/tenants/acme/limits", content=body, headers=_JSON)
        problem(sent, 422, "max_starts_per_second")
    assert (await app.tenant_limits_get("acme")).max_in_flight == 3


_JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('"every": 60, "payload": {"x": [1, NaN]}', "payload.x[1]"),
        ('"every": 60, "payload": Infinity', "payload"),
        ('"every": 60, "metadata": {"big": 1e999}', "metadata.big"),
        ('"every": 60, "metadata": {"deep": {"n": -Infinity}}', "metadata.deep.n"),
        ('"every": Infinity', "every"),
        ('"every": NaN', "every"),
        ('"cron": "* * * * *", "timeout": NaN', "timeout"),
        ('"cron": "* * * * *", "misfire_grace": Infinity', "misfire_grace"),
        ('"cron": "* * * * *", "retry": {"backoff_base": -Infinity}', "retry.backoff_base"),
        ('"cron": "* * * * *", "priority": NaN', "priority"),
        ('"cron": "* * * * *", "jitter": NaN', "jitter"),
    ],
)
async def test_nan_and_infinity_are_refused_where_they_are(
    app: AsyncApp, keys: dict[str, str], raw: str, field: str
) -> None:
    body = '{"name": "nan", "task": "x", "allow_unregistered": true, ' + raw + "}"
    async with client(create_api(app, auth_required=True), keys["operator"]) as c:
        found = problem(await c.post("/jobs", content=body, headers=_JSON), 422, field)
    assert found["type"] == "urn:duetime:problem:validation"
    assert (await app.jobs.find()).items == []


async def test_nan_in_a_trigger_or_a_patch_payload_is_refused(
    app: AsyncApp, keys: dict[str, str]
) -> None:
    async with client(create_api(app, auth_required=True), keys["operator"]) as c:
        job = ok(await c.post("/jobs", json={**JOB, "every": 60, "payload": {"v": 1}}), 201)
        body = '{"payload": {"v": NaN}}'
        problem(
            await c.post(f"/jobs/{job['id']}/trigger", content=body, headers=_JSON),
            422,
            "payload.v",
        )
        problem(await c.patch(f"/jobs/{job['id']}", content=body, headers=_JSON), 422, "payload.v")
    assert (await app.get("strict")).payload == {"v": 1}
    assert (await app.runs("strict")).items == []
