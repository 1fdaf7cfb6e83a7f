"""The observability endpoints in process (httpx over ASGI): who am I, the overview, the
timeline, live nodes, alerts, ``/metrics`` and the dashboard's files — tenant-filtered and
behind API keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from duetime._config import Settings
from duetime._monitoring import AlertCondition, AlertKind
from duetime.api import create_api
from duetime.app import AsyncApp
from duetime.errors import ValidationError
from duetime.maintenance.depth import DepthSampler
from duetime.store.base import IncidentsApplyParams
from tests.observability.obskit import open_app


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    opened = await open_app(str(tmp_path / "obs.db"))
    try:
        yield opened
    finally:
        await opened.close()


def client(api: object, key: str | None = None) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


async def test_endpoints_answer_for_the_callers_tenant(app: AsyncApp) -> None:
    acme, globex = app.for_tenant("acme"), app.for_tenant("globex")
    _, viewer = await acme.create_key("viewer", name="dash viewer")
    _, operator = await globex.create_key("operator")
    await acme.schedule("late", task="duetime.noop", at=timedelta(seconds=-5))
    await app.store.incidents_apply(
        IncidentsApplyParams(
            open=[
                AlertCondition(AlertKind.RUN_DEAD, "r1", "acme's run died", tenant="acme"),
                AlertCondition(AlertKind.RUN_DEAD, "r2", "globex's run died", tenant="globex"),
                AlertCondition(AlertKind.NO_WORKER, "t", "nobody serves t"),
            ]
        )
    )
    await acme.trigger("late")  # a run due now
    await DepthSampler(app.store).run_once()  # the leader's duty: no API process involved
    api = create_api(app, auth_required=True)
    async with client(api) as anonymous:
        assert (await anonymous.get("/api/v1/whoami")).status_code == 401
        config = (await anonymous.get("/dashboard-config")).json()
        assert config == {"auth_required": True}
        page = await anonymous.get("/")
        assert page.status_code == 200
        assert "/dashboard/app.js" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        script = await anonymous.get("/dashboard/app.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        assert (await anonymous.get("/dashboard/app.css")).status_code == 200
        metrics = await anonymous.get("/metrics")
        assert metrics.status_code == 200
        assert "duetime_jobs_overdue 1.0" in metrics.text
    async with client(api, viewer) as c:
        me = (await c.get("/api/v1/whoami")).json()
        assert me == {
            "tenant": "acme",
            "role": "viewer",
            "auth_required": True,
            "key_name": "dash viewer",
            "key_prefix": me["key_prefix"],
        }
        overview = (await c.get("/api/v1/stats/overview")).json()
        assert overview["tenant"] == "acme"
        assert overview["queue"]["overdue_jobs"] == 1
        assert {a["summary"] for a in overview["alerts_firing"]} == {
            "acme's run died",
            "nobody serves t",
        }
        (sample,) = overview["depth"]  # read from the leader's history, the tenant's own
        assert (sample["due"], sample["running"], sample["dead_letters"]) == (1, 0, 0)
        narrow = {"depth_window": 5}
        assert (await c.get("/api/v1/stats/overview", params=narrow)).status_code == 422
        timeline = (
            await c.get("/api/v1/stats/timeline", params={"window": 600, "step": 60})
        ).json()
        assert len(timeline["buckets"]) == 10
        assert (await c.get("/api/v1/stats/timeline", params={"window": 5})).status_code == 422
        alerts = (await c.get("/api/v1/alerts", params={"state": "all"})).json()["items"]
        assert {a["subject"] for a in alerts} == {"r1", "t"}
        cluster = (await c.get("/api/v1/cluster")).json()
        assert set(cluster) == {"leader", "nodes", "workers"}
    async with client(api, operator) as c:
        alerts = (await c.get("/api/v1/alerts")).json()["items"]
        assert {a["subject"] for a in alerts} == {"r2", "t"}
        assert (await c.get("/api/v1/whoami")).json()["role"] == "operator"


async def test_openapi_documents_the_new_endpoints(app: AsyncApp) -> None:
    api = create_api(app, auth_required=False)
    async with client(api) as c:
        paths = (await c.get("/api/v1/openapi.json")).json()["paths"]
    for path in (
        "/api/v1/whoami",
        "/api/v1/stats/overview",
        "/api/v1/stats/timeline",
        "/api/v1/cluster",
        "/api/v1/alerts",
        "/api/v1/jobs/{job_id}/explain",
    ):
        assert path in paths, path


async def test_metrics_can_require_a_superadmin_key(tmp_path: Path) -> None:
    """With ``metrics_auth=admin`` ``/metrics`` (whose labels name every tenant) needs the
    installation's admin key, a superadmin's (one tenant's admin is refused) — even where the
    rest of the API needs none."""
    app = await open_app(str(tmp_path / "metrics.db"), metrics_auth="admin")
    try:
        acme = app.for_tenant("acme")
        _, admin = await app.create_key("superadmin")
        _, operator = await acme.create_key("operator")
        _, tenant_admin = await acme.create_key("admin")
        for auth_required in (True, False):
            api = create_api(app, auth_required=auth_required)
            async with client(api) as anonymous:
                refused = await anonymous.get("/metrics")
                assert refused.status_code == 401
                assert refused.headers["content-type"].startswith("application/problem+json")
                assert "duetime_" not in refused.text
            for lower in (operator, tenant_admin):
                async with client(api, lower) as c:
                    assert (await c.get("/metrics")).status_code == 403
            async with client(api, admin) as c:
                scraped = await c.get("/metrics")
                assert scraped.status_code == 200
                assert "duetime_workers_live" in scraped.text
    finally:
        await app.close()
    wrong = AsyncApp(settings=Settings(database_url=str(tmp_path / "m.db"), metrics_auth="open"))
    with pytest.raises(ValidationError) as refused_setting:
        create_api(wrong, auth_required=True)
    assert refused_setting.value.field == "metrics_auth"
