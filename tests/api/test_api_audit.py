"""The audit trail over REST (issue 22, item 3): every mutating endpoint writes exactly one
record whose actor is the calling key (``key:<id>/<role>``); ``GET /api/v1/audit`` filters and
pages it; a tenant admin reads only its own tenant's (another's is 404, as everything of it);
a superadmin reads any with ``?tenant=``. In process (httpx over ASGI), on both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from duetime._clock import FrozenClock
from duetime._types import ApiKey, ApiRole, RetryPolicy
from duetime.api import create_api
from duetime.app import AsyncApp
from duetime.testing import FrozenApp, drain
from tests.api.apikit import ok, problem


class Kit:
    def __init__(self, app: AsyncApp) -> None:
        self.app = app
        self.api = create_api(app, auth_required=True)
        self.keys: dict[str, tuple[ApiKey, str]] = {}

    async def key(self, tenant: str, role: ApiRole) -> tuple[ApiKey, str]:
        name = f"{tenant}/{role}"
        if name not in self.keys:
            self.keys[name] = await self.app.for_tenant(tenant).create_key(role)
        return self.keys[name]

    def client(self, secret: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.api, raise_app_exceptions=False)  # type: ignore[arg-type]
        return httpx.AsyncClient(
            transport=transport,
            base_url="http://localhost/api/v1",
            headers={"Authorization": f"Bearer {secret}"},
        )


@pytest.fixture
async def kit(store_url: str, clock: FrozenClock) -> AsyncIterator[Kit]:
    async with FrozenApp(store_url, clock=clock) as app:
        acme = app.for_tenant("acme")
        await acme.schedule("nightly", task="duetime.noop", cron="0 3 * * *")
        await acme.schedule("flaky", task="duetime.fail", now=True, retry=RetryPolicy(1))
        await drain(acme)
        kit = Kit(app)
        await kit.key("acme", ApiRole.ADMIN)
        yield kit


Request = Callable[[httpx.AsyncClient, Kit], Awaitable[httpx.Response]]


async def _dead_run(kit: Kit) -> str:
    page = await kit.app.for_tenant("acme").dead_letters()
    return str(page.items[0].id)


async def _replay_one(c: httpx.AsyncClient, kit: Kit) -> httpx.Response:
    return await c.post(f"/dead-letters/{await _dead_run(kit)}/replay")


async def _cancel_run(c: httpx.AsyncClient, kit: Kit) -> httpx.Response:
    run = await kit.app.for_tenant("acme").trigger("nightly")
    return await c.post(f"/runs/{run.id}/cancel")


async def _revoke(c: httpx.AsyncClient, kit: Kit) -> httpx.Response:
    key, _ = await kit.app.for_tenant("acme").create_key("viewer")
    return await c.delete(f"/keys/{key.id}")


# (what, the request, the action recorded)
ENDPOINTS: list[tuple[str, Request, str]] = [
    (
        "POST /jobs",
        lambda c, k: c.post(
            "/jobs", json={"name": "new", "task": "duetime.noop", "cron": "* * * * *"}
        ),
        "created",
    ),
    ("PATCH /jobs/{id}", lambda c, k: c.patch("/jobs/nightly", json={"priority": 4}), "updated"),
    ("DELETE /jobs/{id}", lambda c, k: c.delete("/jobs/nightly"), "deleted"),
    ("POST /jobs/{id}/pause", lambda c, k: c.post("/jobs/nightly/pause"), "paused"),
    ("POST /jobs/{id}/cancel", lambda c, k: c.post("/jobs/nightly/cancel"), "cancelled"),
    ("POST /jobs/{id}/trigger", lambda c, k: c.post("/jobs/nightly/trigger"), "triggered"),
    ("POST /dead-letters/{id}/replay", _replay_one, "replayed"),
    (
        "POST /dead-letters/replay",
        lambda c, k: c.post("/dead-letters/replay", json={"all": True}),
        "replayed",
    ),
    ("POST /runs/{id}/cancel", _cancel_run, "cancelled"),
    ("POST /keys", lambda c, k: c.post("/keys", json={"role": "viewer", "name": "ci"}), "created"),
    ("DELETE /keys/{id}", _revoke, "revoked"),
    (
        "PUT /tenants/{id}/limits",
        lambda c, k: c.put("/tenants/acme/limits", json={"weight": 2}),
        "limits_set",
    ),
    (
        "PUT /tenants/{id}/alert-webhooks",
        lambda c, k: c.put(
            "/tenants/acme/alert-webhooks", json={"webhooks": ["https://example.com/h"]}
        ),
        "alert_webhooks_set",
    ),
]


@pytest.mark.parametrize(
    ("request_", "action"), [pytest.param(r, a, id=w) for w, r, a in ENDPOINTS]
)
async def test_each_mutating_endpoint_writes_one_record_as_the_calling_key(
    kit: Kit, request_: Request, action: str
) -> None:
    key, secret = await kit.key("acme", ApiRole.ADMIN)
    async with kit.client(secret) as c:
        before = ok(await c.get("/audit"))["items"]
        response = await request_(c, kit)
        assert response.status_code < 300, response.text
        after = ok(await c.get("/audit"))["items"]
    actor = f"key:{key.id}/admin"  # the helpers' own setup acts as the Python app
    mine = [r for r in after if r["actor"] == actor]
    assert len(mine) == len([r for r in before if r["actor"] == actor]) + 1
    assert (mine[0]["action"], mine[0]["tenant"]) == (action, "acme")


async def test_resume_writes_one_record(kit: Kit) -> None:
    _, secret = await kit.key("acme", ApiRole.OPERATOR)
    await kit.app.for_tenant("acme").pause("nightly")
    async with kit.client(secret) as c:
        ok(await c.post("/jobs/nightly/resume"))
    _, admin = await kit.key("acme", ApiRole.ADMIN)
    async with kit.client(admin) as c:
        [record] = ok(await c.get("/audit", params={"action": "resumed"}))["items"]
    assert record["actor"].endswith("/operator")
    assert record["subject_name"] == "nightly"
    assert record["change"] == {"before": {"status": "paused"}, "after": {"status": "active"}}


async def test_filters_and_pages(kit: Kit) -> None:
    key, secret = await kit.key("acme", ApiRole.ADMIN)
    async with kit.client(secret) as c:
        for _ in range(3):
            ok(await c.post("/jobs/nightly/trigger"), 201)
        mine = ok(await c.get("/audit", params={"actor": f"key:{key.id}/admin"}))["items"]
        assert [r["action"] for r in mine] == ["triggered"] * 3
        by_subject = ok(await c.get("/audit", params={"subject": "nightly", "limit": 2}))
        assert len(by_subject["items"]) == 2
        rest = ok(
            await c.get(
                "/audit",
                params={"subject": "nightly", "limit": 2, "cursor": by_subject["next_cursor"]},
            )
        )
        assert [r["action"] for r in rest["items"]] == ["triggered", "created"]
        assert rest["next_cursor"] is None
        problem(await c.get("/audit", params={"since": "2026-01-01T00:00:00"}), 422)
        problem(await c.get("/audit", params={"cursor": "nonsense"}), 422)


async def test_a_tenant_admin_cannot_read_another_tenants_trail(kit: Kit) -> None:
    await kit.app.for_tenant("globex").schedule("theirs", task="duetime.noop", cron="* * * * *")
    _, acme = await kit.key("acme", ApiRole.ADMIN)
    _, operator = await kit.key("acme", ApiRole.OPERATOR)
    _, superadmin = await kit.key("default", ApiRole.SUPERADMIN)
    async with kit.client(acme) as c:
        problem(await c.get("/audit", params={"tenant": "globex"}), 404)
        names = [r["subject_name"] for r in ok(await c.get("/audit"))["items"]]
        assert "theirs" not in names
    async with kit.client(operator) as c:
        problem(await c.get("/audit"), 403)
    async with kit.client(superadmin) as c:
        items = ok(await c.get("/audit", params={"tenant": "globex"}))["items"]
        assert [r["subject_name"] for r in items] == ["theirs"]


def test_the_openapi_document_lists_the_audit_endpoint(kit: Kit) -> None:
    schema: dict[str, Any] = kit.api.openapi()
    assert "get" in schema["paths"]["/api/v1/audit"]
