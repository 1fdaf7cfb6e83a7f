"""``/api/v1/workflows`` and ``/api/v1/workflow-instances`` in process (httpx over ASGI, keys
required) on both stores: register and versions, trigger with an idempotency key, an
instance's graph with step states, results and timings, explain, cancel, retry, roles and
tenant isolation. Steps are run by duetime.testing's drain on the frozen clock."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from duetime import Permanent, RunContext
from duetime.api import create_api
from duetime.testing import FrozenApp, FrozenClock, drain
from tests.api.apikit import ok, problem

DOC: dict[str, Any] = {
    "name": "etl",
    "steps": [
        {"name": "extract", "task": "wf.extract"},
        {"name": "parts", "task": "wf.part", "map_over": "extract"},
        {"name": "load", "task": "wf.load", "after": ["parts"]},
        {"name": "report", "task": "wf.part", "after": ["load"]},
        {"name": "page", "task": "wf.part", "after": [{"step": "extract", "on": "on_failure"}]},
    ],
}


@dataclass
class Clients:
    acme_operator: httpx.AsyncClient
    acme_viewer: httpx.AsyncClient
    globex_operator: httpx.AsyncClient


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[FrozenApp]:
    async with FrozenApp(store_url, clock=clock) as opened:

        @opened.task("wf.extract")
        async def extract(ctx: RunContext) -> list[int]:
            return [1, 2, 3]

        @opened.task("wf.part")
        async def part(ctx: RunContext, payload: Any) -> Any:
            return payload * 10 if isinstance(payload, int) else "done"

        @opened.task("wf.load")
        async def load(ctx: RunContext) -> str:
            mode = (ctx.workflow.input or {}).get("mode") if ctx.workflow else None
            if mode == "fail":
                raise Permanent("the warehouse is gone")
            if mode == "retry":
                raise RuntimeError("the warehouse is busy")  # retried after a backoff
            return "loaded"

        yield opened


@pytest.fixture
async def clients(app: FrozenApp) -> AsyncIterator[Clients]:
    api = create_api(app, auth_required=True)
    made: list[httpx.AsyncClient] = []
    for tenant, role in (("acme", "operator"), ("acme", "viewer"), ("globex", "operator")):
        _, secret = await app.for_tenant(tenant).create_key(role, name=f"{tenant} {role}")
        transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
        made.append(
            httpx.AsyncClient(
                transport=transport,
                base_url="http://localhost/api/v1",
                headers={"Authorization": f"Bearer {secret}"},
            )
        )
    yield Clients(*made)
    for client in made:
        await client.aclose()


async def test_register_list_and_get_versions(clients: Clients) -> None:
    c, viewer, other = clients.acme_operator, clients.acme_viewer, clients.globex_operator
    first = ok(await c.post("/workflows", json=DOC), 201)
    assert (first["name"], first["version"]) == ("etl", 1)
    assert first["definition"] == DOC
    assert len(first["digest"]) == 64
    again = ok(await c.post("/workflows", json=DOC), 200)  # same content: the same version
    assert again == first
    changed = {**DOC, "steps": [*DOC["steps"], {"name": "tail", "task": "wf.part"}]}
    second = ok(await c.post("/workflows", json=changed), 201)
    assert second["version"] == 2

    listed = ok(await viewer.get("/workflows"))
    assert [(w["name"], w["version"], w["steps"]) for w in listed] == [("etl", 2, 6)]
    assert set(listed[0]) == {"name", "version", "digest", "created_at", "steps"}
    latest = ok(await viewer.get("/workflows/etl"))
    assert (latest["version"], latest["versions"]) == (2, [1, 2])
    assert latest["definition"] == changed
    old = ok(await viewer.get("/workflows/etl", params={"version": 1}))
    assert (old["version"], old["definition"], old["digest"]) == (1, DOC, first["digest"])

    problem(await viewer.get("/workflows/etl", params={"version": 9}), 404)
    problem(await viewer.get("/workflows/nothing"), 404)
    problem(await viewer.post("/workflows", json=DOC), 403)  # a viewer reads only
    assert ok(await other.get("/workflows")) == []  # another tenant's are not listed
    problem(await other.get("/workflows/etl"), 404)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (
            {"name": "bad", "steps": [{"name": "a", "task": "wf.part"},
                                      {"name": "b", "task": "wf.part", "after": ["zzz"]}]},
            "steps[1].after[0]",
        ),
        ({"name": "bad", "steps": []}, "steps"),
        ({"name": "bad", "steps": [{"name": "a", "task": "nobody.serves.this"}]}, "steps[0].task"),
        ({"name": "bad", "steps": [{"name": "a", "task": "wf.part", "rule": "most"}]},
         "steps[0].rule"),
        ({"steps": [{"name": "a", "task": "wf.part"}]}, "name"),
    ],
)  # fmt: skip
async def test_an_invalid_document_is_422_naming_where(
    clients: Clients, document: dict[str, Any], field: str
) -> None:
    problem(await clients.acme_operator.post("/workflows", json=document), 422, field)


async def test_allow_unregistered_accepts_tasks_no_worker_serves(clients: Clients) -> None:
    doc = {"name": "later", "steps": [{"name": "a", "task": "nobody.serves.this"}]}
    c = clients.acme_operator
    ok(await c.post("/workflows", params={"allow_unregistered": "true"}, json=doc), 201)
    problem(await c.post("/workflows", json=[1, 2]), 422)  # not an object


async def test_trigger_view_explain_retry_and_cancel(app: FrozenApp, clients: Clients) -> None:
    c, viewer = clients.acme_operator, clients.acme_viewer
    ok(await c.post("/workflows", json=DOC), 201)
    problem(await c.post("/workflows/nothing/trigger", json={}), 404)
    problem(await viewer.post("/workflows/etl/trigger", json={}), 403)

    created = ok(await c.post("/workflows/etl/trigger", json={"payload": {"mode": "fail"}}), 201)
    assert created["job_name"] == "workflow:etl"
    assert created["run_id"] is None  # the job is new: the scheduler makes its first run
    await drain(app)
    [failed] = ok(await viewer.get("/workflow-instances", params={"job_id": created["job_id"]}))
    assert failed["state"] == "failed"
    assert failed["input"] == {"mode": "fail"}
    assert "load" in failed["reason"]

    detail = ok(await viewer.get(f"/workflow-instances/{failed['id']}"))
    assert detail["definition"] == DOC
    assert {(e["from"], e["to"], e["on"]) for e in detail["edges"]} == {
        ("extract", "parts", "on_success"),
        ("parts", "load", "on_success"),
        ("load", "report", "on_success"),
        ("extract", "page", "on_failure"),
    }
    steps = {(s["step"], s["map_index"]): s for s in detail["steps"]}
    assert [k for k in steps] == [
        ("extract", -1), ("parts", -1), ("parts", 0), ("parts", 1), ("parts", 2),
        ("load", -1), ("report", -1), ("page", -1),
    ]  # fmt: skip
    assert steps[("extract", -1)]["result"] == [1, 2, 3]
    assert [steps[("parts", i)]["result"] for i in range(3)] == [10, 20, 30]
    extract = steps[("extract", -1)]
    assert extract["attempt"] == 1
    assert extract["ready_at"] <= extract["started_at"] <= extract["finished_at"]
    assert steps[("load", -1)]["state"] == "failed"
    assert steps[("report", -1)]["state"] == "skipped"
    assert steps[("report", -1)]["run_id"] is None

    why = ok(await viewer.get(f"/workflow-instances/{failed['id']}/explain"))
    assert why["state"] == "failed"
    by_step = {s["step"]: s for s in why["steps"]}
    assert set(by_step) == {"report", "page"}
    assert by_step["report"]["why"] == "skipped: parent load failed, edge on_success"
    assert by_step["report"]["edges"] == [
        {"from": "load", "on": "on_success", "parent_state": "failed", "satisfied": False}
    ]
    assert by_step["page"]["why"] == "skipped: parent extract succeeded, edge on_failure"

    problem(await c.post(f"/workflow-instances/{failed['id']}/cancel"), 409)  # it ended
    problem(await viewer.post(f"/workflow-instances/{failed['id']}/retry"), 403)
    retried = ok(await c.post(f"/workflow-instances/{failed['id']}/retry"))
    assert retried["state"] == "running"
    waiting = ok(await viewer.get(f"/workflow-instances/{failed['id']}/explain"))
    assert {s["step"]: s["why"] for s in waiting["steps"]}["report"] == (
        "waiting for load (on_success)"
    )
    cancelled = ok(await c.post(f"/workflow-instances/{failed['id']}/cancel"))
    assert cancelled["state"] == "cancelled"
    problem(await c.post(f"/workflow-instances/{failed['id']}/retry"), 409)  # not failed
    listed = ok(await viewer.get("/workflow-instances", params={"state": "cancelled"}))
    assert [i["id"] for i in listed] == [failed["id"]]


async def test_trigger_with_an_idempotency_key(app: FrozenApp, clients: Clients) -> None:
    c = clients.acme_operator
    ok(await c.post("/workflows", json=DOC), 201)
    body = {"payload": {"mode": "ok"}, "idempotency_key": "order-1"}
    first = ok(await c.post("/workflows/etl/trigger", json=body), 201)
    assert first["run_id"] is None
    await drain(app)
    repeat = ok(await c.post("/workflows/etl/trigger", json=body), 200)
    assert repeat["job_id"] == first["job_id"]
    assert repeat["run_id"] is not None  # the creating call's run, made by the scheduler
    [instance] = ok(await c.get("/workflow-instances", params={"workflow": "etl"}))
    assert instance["start_run_id"] == repeat["run_id"]
    assert instance["state"] == "succeeded"

    body2 = {"payload": {"mode": "ok"}, "idempotency_key": "order-2"}
    second = ok(await c.post("/workflows/etl/trigger", json=body2), 201)
    assert second["run_id"] is not None  # the job exists now: a trigger makes the run at once
    assert ok(await c.post("/workflows/etl/trigger", json=body2), 200) == second
    problem(
        await c.post(
            "/workflows/etl/trigger", json={"payload": {"mode": "x"}, "idempotency_key": "order-2"}
        ),
        409,
    )
    problem(await c.post("/workflows/etl/trigger", json={"idempotency_key": ""}), 422)
    problem(await c.post("/workflows/etl/trigger", json={"surprise": 1}), 422)
    await drain(app)
    instances = ok(await c.get("/workflow-instances", params={"workflow": "etl"}))
    assert len(instances) == 2
    assert ok(await c.get("/workflow-instances", params={"limit": 1})) == instances[:1]


async def test_a_step_waiting_on_a_retry_is_explained(app: FrozenApp, clients: Clients) -> None:
    c = clients.acme_operator
    ok(await c.post("/workflows", json=DOC), 201)
    ok(await c.post("/workflows/etl/trigger", json={"payload": {"mode": "retry"}}), 201)
    await drain(app)  # load's first attempt failed: its retry waits for its backoff
    [running] = ok(await c.get("/workflow-instances", params={"state": "running"}))
    why = ok(await c.get(f"/workflow-instances/{running['id']}/explain"))
    assert {s["step"]: s["why"] for s in why["steps"]} == {
        "report": "waiting for load (on_success)",
        "page": "skipped: parent extract succeeded, edge on_failure",
    }
    detail = ok(await c.get(f"/workflow-instances/{running['id']}"))
    load = next(s for s in detail["steps"] if s["step"] == "load")
    assert (load["state"], load["attempt"], load["finished_at"]) == ("running", 1, None)


async def test_another_tenants_workflows_and_instances_are_not_found(
    app: FrozenApp, clients: Clients
) -> None:
    c, other = clients.acme_operator, clients.globex_operator
    ok(await c.post("/workflows", json=DOC), 201)
    ok(await c.post("/workflows/etl/trigger", json={"payload": {"mode": "fail"}}), 201)
    await drain(app)
    [instance] = ok(await c.get("/workflow-instances"))
    path = f"/workflow-instances/{instance['id']}"
    for response in (
        await other.get(path),
        await other.get(path + "/explain"),
        await other.post(path + "/retry"),
        await other.post(path + "/cancel"),
        await other.post("/workflows/etl/trigger", json={}),
        await other.get(f"/workflow-instances/{uuid.uuid4()}"),
        await other.get("/workflow-instances/not-an-id"),
    ):
        problem(response, 404)
    assert ok(await other.get("/workflow-instances")) == []
    assert ok(await other.get("/workflow-instances", params={"job_id": instance["job_id"]})) == []
    problem(await c.get("/workflow-instances", params={"state": "asleep"}), 422, "state")
    assert ok(await c.get(path))["state"] == "failed"  # untouched by globex's attempts


async def test_the_openapi_document_lists_the_workflow_endpoints(clients: Clients) -> None:
    doc = ok(await clients.acme_viewer.get("/openapi.json"))
    paths = doc["paths"]
    assert set(paths["/api/v1/workflows"]) == {"get", "post"}
    for path in (
        "/api/v1/workflows/{name}",
        "/api/v1/workflows/{name}/trigger",
        "/api/v1/workflow-instances",
        "/api/v1/workflow-instances/{instance_id}",
        "/api/v1/workflow-instances/{instance_id}/cancel",
        "/api/v1/workflow-instances/{instance_id}/retry",
        "/api/v1/workflow-instances/{instance_id}/explain",
    ):
        assert path in paths, path
    trigger = paths["/api/v1/workflows/{name}/trigger"]["post"]
    assert {"200", "201", "404", "409", "422"} <= set(trigger["responses"])
    assert {"from", "to", "on"} <= set(doc["components"]["schemas"]["EdgeOut"]["properties"])
