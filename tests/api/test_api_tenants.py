"""``GET/PUT /api/v1/tenants/{id}/limits`` in process (httpx over ASGI, SQLite): the tenant's
admins, or a superadmin for any tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from duetime._types import ApiRole
from duetime.api import create_api
from duetime.app import AsyncApp
from tests.api.apikit import ok, problem


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "api.db")) as opened:
        yield opened


def client(api: object, key: str | None = None) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)  # type: ignore[arg-type]
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


async def test_put_and_get_limits(app: AsyncApp) -> None:
    async with client(create_api(app, auth_required=False)) as c:
        fresh = ok(await c.get("/api/v1/tenants/acme/limits"))
        assert fresh == {
            "tenant": "acme",
            "max_in_flight": None,
            "max_starts_per_second": None,
            "weight": 1,
            "max_jobs": None,
            "max_backfill_runs": None,
        }
        body = {"max_in_flight": 10, "max_starts_per_second": 2.5, "weight": 3}
        assert ok(await c.put("/api/v1/tenants/acme/limits", json=body)) == {
            "tenant": "acme",
            **body,
            "max_jobs": None,
            "max_backfill_runs": None,
        }
        assert ok(await c.get("/api/v1/tenants/acme/limits"))["weight"] == 3
        # PUT replaces them all: left out means no limit
        assert ok(await c.put("/api/v1/tenants/acme/limits", json={})) == fresh
    assert (await app.tenant_limits_get("acme")).max_in_flight is None


@pytest.mark.parametrize(
    "body",
    [
        {"max_in_flight": 0},
        {"max_in_flight": -1},
        {"max_starts_per_second": 0},
        {"weight": 0},
        {"weight": 1001},
        {"bogus": 1},
        {"max_in_flight": "many"},
    ],
)
async def test_bad_limits_are_422(app: AsyncApp, body: dict[str, object]) -> None:
    async with client(create_api(app, auth_required=False)) as c:
        problem(await c.put("/api/v1/tenants/acme/limits", json=body), 422)


async def test_only_admins_of_the_tenant_or_superadmins(app: AsyncApp) -> None:
    api = create_api(app, auth_required=True)
    _, operator = await app.create_key(ApiRole.OPERATOR)
    _, admin = await app.create_key(ApiRole.ADMIN)
    _, superadmin = await app.create_key(ApiRole.SUPERADMIN)
    async with client(api, operator) as c:
        problem(await c.get("/api/v1/tenants/default/limits"), 403)
        problem(await c.put("/api/v1/tenants/default/limits", json={"weight": 2}), 403)
    async with client(api) as c:
        problem(await c.get("/api/v1/tenants/default/limits"), 401)
    async with client(api, admin) as c:  # the admin of tenant `default`
        assert ok(await c.put("/api/v1/tenants/default/limits", json={"weight": 3}))["weight"] == 3
        problem(await c.put("/api/v1/tenants/other/limits", json={"weight": 2}), 404)
        problem(await c.get("/api/v1/tenants/other/limits"), 404)
    assert (await app.tenant_limits_get("other")).weight == 1  # untouched
    async with client(api, superadmin) as c:
        ok(await c.put("/api/v1/tenants/other/limits", json={"weight": 2}))
        assert ok(await c.get("/api/v1/tenants/other/limits"))["weight"] == 2


async def test_alert_webhooks_of_the_tenant_only(app: AsyncApp) -> None:
    api = create_api(app, auth_required=True)
    _, admin = await app.create_key(ApiRole.ADMIN)
    _, superadmin = await app.create_key(ApiRole.SUPERADMIN)
    urls = ["https://alerts.example.com/duetime", "https://pager.example.com/hook"]
    async with client(api, admin) as c:  # the admin of tenant `default`
        path = "/api/v1/tenants/default/alert-webhooks"
        assert ok(await c.get(path)) == {"tenant": "default", "webhooks": []}
        assert ok(await c.put(path, json={"webhooks": urls})) == {
            "tenant": "default",
            "webhooks": urls,
        }
        assert ok(await c.get(path))["webhooks"] == urls
        bad = {"webhooks": ["https://fine.example.com/", "gopher://old.example.com/"]}
        problem(await c.put(path, json=bad), 422, "webhooks[1]")
        problem(await c.put(path, json={"webhooks": ["https://a.example.com/"] * 11}), 422)
        problem(await c.put(path, json={"urls": urls}), 422)
        problem(await c.put("/api/v1/tenants/other/alert-webhooks", json={"webhooks": []}), 404)
        problem(await c.get("/api/v1/tenants/other/alert-webhooks"), 404)
    assert await app.tenant_alert_webhooks() == urls
    async with client(api, superadmin) as c:
        put = await c.put("/api/v1/tenants/other/alert-webhooks", json={"webhooks": urls[:1]})
        assert ok(put) == {"tenant": "other", "webhooks": urls[:1]}
    assert await app.tenant_alert_webhooks("other") == urls[:1]
