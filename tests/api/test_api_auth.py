"""Keys, roles and tenant isolation over HTTP against a real server, on both stores: no or bad
key → 401, role too low → 403, another tenant's ids → 404 on every endpoint (and its name
in ``?tenant=`` unless the key is a superadmin's); health, readiness and the offline docs need
no key."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from tests.api.apikit import (
    Keys,
    ServerProcess,
    claim,
    make_dead_run,
    make_job,
    ok,
    problem,
    unique,
)

pytestmark = pytest.mark.slow


def test_no_key_or_a_bad_key_is_401(server: ServerProcess, keys: Keys) -> None:
    with server.client() as c:
        body = problem(c.get("/jobs"), 401)
        assert "API key" in body["detail"]
        assert c.get("/jobs").headers["www-authenticate"].startswith("Bearer")
    with server.client("dt_not-a-real-key") as c:
        problem(c.get("/jobs"), 401)
    with server.client(Authorization="Basic dXNlcjpwdw==") as c:
        problem(c.get("/jobs"), 401)
    with server.client(**{"X-API-Key": keys.acme_viewer}) as c:
        ok(c.get("/jobs"))


def test_revoked_key_is_refused_at_once(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_admin) as admin:
        created = ok(admin.post("/keys", json={"role": "viewer", "name": "temp"}), 201)
        assert created["key"].startswith("dt_")
        assert created["tenant"] == "acme"
        assert created["prefix"] == created["key"][:10]
        with server.client(created["key"]) as temp:
            ok(temp.get("/jobs"))
            listed = ok(admin.get("/keys"))["items"]
            mine = next(k for k in listed if k["id"] == created["id"])
            assert "key" not in mine
            assert mine["last_used_at"] is not None
            assert admin.delete(f"/keys/{created['id']}").status_code == 204
            problem(temp.get("/jobs"), 401)
        assert admin.delete(f"/keys/{created['id']}").status_code == 204  # idempotent
        problem(admin.delete(f"/keys/{uuid.uuid4()}"), 404)
        problem(admin.delete("/keys/nope"), 404)
        problem(admin.post("/keys", json={"role": "root"}), 422, "role")


def test_a_key_cannot_revoke_itself(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_admin) as admin:
        created = ok(admin.post("/keys", json={"role": "admin", "name": "second admin"}), 201)
        with server.client(created["key"]) as second:
            body = problem(second.delete(f"/keys/{created['id']}"), 409)
            assert "cannot revoke itself" in body["detail"]
            ok(second.get("/keys"))  # still valid
            upper = created["id"].upper()
            problem(second.delete(f"/keys/{upper}"), 409)
        assert admin.delete(f"/keys/{created['id']}").status_code == 204
        with server.client(created["key"]) as second:
            problem(second.get("/keys"), 401)


@pytest.fixture(scope="module")
def acme_job(server: ServerProcess, keys: Keys) -> dict:
    """A job of tenant ``acme`` for tests that only read it or fail to change it."""
    with server.client(keys.acme_operator) as operator:
        return make_job(operator)


def test_viewer_reads(server: ServerProcess, keys: Keys, acme_job: dict) -> None:
    with server.client(keys.acme_viewer) as viewer:
        ok(viewer.get(f"/jobs/{acme_job['id']}"))
        ok(viewer.get("/runs"))
        ok(viewer.get("/dead-letters"))
        ok(viewer.post("/schedules/preview", json={"cron": "* * * * *", "count": 1}))


Request = tuple[str, str, dict | None]


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(
            lambda job: ("POST", "/jobs", {"name": unique(), "task": "t", "every": 5}),
            id="create-job",
        ),
        pytest.param(lambda job: ("PATCH", f"/jobs/{job['id']}", {"priority": 1}), id="patch"),
        pytest.param(lambda job: ("DELETE", f"/jobs/{job['id']}", None), id="delete"),
        pytest.param(lambda job: ("POST", f"/jobs/{job['id']}/pause", None), id="pause"),
        pytest.param(lambda job: ("POST", f"/jobs/{job['id']}/trigger", None), id="trigger"),
        pytest.param(lambda job: ("POST", f"/runs/{uuid.uuid4()}/cancel", None), id="cancel-run"),
        pytest.param(
            lambda job: ("POST", "/dead-letters/replay", {"all": True}), id="replay-dead-letters"
        ),
        pytest.param(
            lambda job: ("POST", "/worker/claim", {"worker_id": "w", "tasks": [job["task"]]}),
            id="claim",
        ),
        pytest.param(lambda job: ("POST", "/keys", {"role": "viewer"}), id="create-key"),
        pytest.param(lambda job: ("GET", "/keys", None), id="list-keys"),
    ],
)
def test_viewer_cannot_write(
    server: ServerProcess, keys: Keys, acme_job: dict, write: Callable[[dict], Request]
) -> None:
    method, path, body = write(acme_job)
    with server.client(keys.acme_viewer) as viewer:
        problem(viewer.request(method, path, json=body), 403)
    with server.client(keys.acme_operator) as operator:
        assert ok(operator.get(f"/jobs/{acme_job['id']}"))["status"] == "active"  # untouched


def test_only_admins_manage_keys_and_only_superadmins_pick_a_tenant(
    server: ServerProcess, keys: Keys
) -> None:
    with server.client(keys.acme_operator) as operator:
        problem(operator.get("/keys"), 403)
        problem(operator.get("/jobs", params={"tenant": "globex"}), 404)
        ok(operator.get("/jobs", params={"tenant": "acme"}))
    with server.client(keys.acme_admin) as admin:
        # a tenant's admin manages its own tenant only: the other is not found, in every form
        ok(admin.get("/keys"))
        ok(admin.get("/tenants/acme/limits"))
        body = problem(admin.get("/jobs", params={"tenant": "globex"}), 404)
        assert "only superadmin keys act on another tenant" in body["detail"]
        problem(admin.post("/keys", params={"tenant": "globex"}, json={"role": "viewer"}), 404)
        problem(admin.get("/tenants/globex/limits"), 404)
        problem(admin.put("/tenants/globex/limits", json={"weight": 5}), 404)
        problem(admin.post("/keys", json={"role": "superadmin"}), 403)
        mine = ok(admin.post("/keys", json={"role": "admin"}), 201)
        assert (mine["tenant"], mine["role"]) == ("acme", "admin")
    with server.client(keys.superadmin) as root:
        name = unique()
        job = ok(
            root.post(
                "/jobs",
                params={"tenant": "globex"},
                json={"name": name, "task": "t", "every": 60, "allow_unregistered": True},
            ),
            201,
        )
        assert job["tenant"] == "globex"
        problem(root.get(f"/jobs/{job['id']}"), 404)  # not in the superadmin's own tenant
        ok(root.get(f"/jobs/{job['id']}", params={"tenant": "globex"}))
        key = ok(root.post("/keys", params={"tenant": "globex"}, json={"role": "viewer"}), 201)
        assert key["tenant"] == "globex"
        problem(root.delete(f"/keys/{key['id']}"), 404)  # another tenant's key
        assert root.delete(f"/keys/{key['id']}", params={"tenant": "globex"}).status_code == 204
        assert ok(root.put("/tenants/globex/limits", json={"weight": 5}))["weight"] == 5
        another = ok(root.post("/keys", json={"role": "superadmin"}), 201)
        assert another["role"] == "superadmin"
        problem(root.get("/jobs", params={"tenant": "a\u0001b"}), 422, "tenant")
    with server.client(keys.globex_operator) as globex:
        ok(globex.get(f"/jobs/{job['id']}"))


@dataclass(frozen=True)
class AcmeThings:
    """Ids of tenant ``acme``: a job, its dead run, a run claimed by ``worker``, a key."""

    job: dict
    pending: dict
    dead: dict
    held: dict
    worker: str
    key: dict


def make_acme_things(server: ServerProcess, keys: Keys) -> AcmeThings:
    with server.client(keys.acme_operator) as acme:
        job = make_job(acme)
        dead = make_dead_run(acme, job)
        pending = ok(acme.post(f"/jobs/{job['id']}/trigger"), 201)
        worker = unique("worker")
        (held,) = claim(acme, worker, job["task"])
    with server.client(keys.acme_admin) as acme_admin:
        acme_key = ok(acme_admin.post("/keys", json={"role": "viewer"}), 201)
    return AcmeThings(job, pending, dead, held, worker, acme_key)


@pytest.fixture(scope="module")
def acme_things(server: ServerProcess, keys: Keys) -> AcmeThings:
    """Made once for the cases below: none of them may change anything of it."""
    return make_acme_things(server, keys)


def assert_acme_untouched(server: ServerProcess, keys: Keys, things: AcmeThings) -> None:
    with server.client(keys.acme_operator) as acme:
        assert ok(acme.get(f"/jobs/{things.job['id']}"))["status"] == "active"
        assert ok(acme.get(f"/runs/{things.pending['id']}"))["state"] in ("scheduled", "running")
        assert ok(acme.get(f"/runs/{things.dead['id']}"))["state"] == "dead"
    with server.client(things.key["key"]) as acme_viewer:
        ok(acme_viewer.get("/jobs"))  # the key still works


def _complete(t: AcmeThings) -> dict:
    held = t.held
    return {
        "worker_id": t.worker,
        "run_id": held["run_id"],
        "token": held["token"],
        "outcome": "succeeded",
    }


@pytest.mark.parametrize(
    "reach",
    [
        pytest.param(lambda t: ("GET", f"/jobs/{t.job['id']}", None), id="get-job"),
        pytest.param(lambda t: ("PATCH", f"/jobs/{t.job['id']}", {"priority": 1}), id="patch"),
        pytest.param(lambda t: ("DELETE", f"/jobs/{t.job['id']}", None), id="delete"),
        pytest.param(lambda t: ("POST", f"/jobs/{t.job['id']}/pause", None), id="pause"),
        pytest.param(lambda t: ("POST", f"/jobs/{t.job['id']}/resume", None), id="resume"),
        pytest.param(lambda t: ("POST", f"/jobs/{t.job['id']}/cancel", None), id="cancel-job"),
        pytest.param(lambda t: ("POST", f"/jobs/{t.job['id']}/trigger", None), id="trigger"),
        pytest.param(lambda t: ("GET", f"/jobs/{t.job['id']}/runs", None), id="job-runs"),
        pytest.param(lambda t: ("GET", f"/runs/{t.pending['id']}", None), id="get-run"),
        pytest.param(lambda t: ("GET", f"/runs/{t.dead['id']}", None), id="get-dead-run"),
        pytest.param(lambda t: ("POST", f"/runs/{t.pending['id']}/cancel", None), id="cancel-run"),
        pytest.param(lambda t: ("GET", "/runs?job_id=" + t.job["id"], None), id="runs-of-job"),
        pytest.param(
            lambda t: ("GET", "/dead-letters?job_id=" + t.job["id"], None),
            id="dead-letters-of-job",
        ),
        pytest.param(
            lambda t: ("POST", f"/dead-letters/{t.dead['id']}/replay", None), id="replay-one"
        ),
        pytest.param(
            lambda t: ("POST", "/dead-letters/replay", {"job_id": t.job["id"]}),
            id="replay-of-job",
        ),
        pytest.param(
            lambda t: ("POST", "/schedules/preview", {"job_id": t.job["id"]}), id="preview-job"
        ),
        pytest.param(lambda t: ("DELETE", f"/keys/{t.key['id']}", None), id="revoke-key"),
        pytest.param(lambda t: ("POST", "/worker/complete", _complete(t)), id="complete-run"),
    ],
)
def test_another_tenants_ids_are_404(
    server: ServerProcess,
    keys: Keys,
    acme_things: AcmeThings,
    reach: Callable[[AcmeThings], Request],
) -> None:
    method, path, body = reach(acme_things)
    with server.client(keys.globex_admin) as globex:
        problem(globex.request(method, path, json=body), 404)
    assert_acme_untouched(server, keys, acme_things)


def test_another_tenants_ids_are_in_no_listing_and_no_claim(
    server: ServerProcess, keys: Keys
) -> None:
    things = make_acme_things(server, keys)
    job, held, worker, acme_key = things.job, things.held, things.worker, things.key
    j, r, d = job["id"], things.pending["id"], things.dead["id"]
    with server.client(keys.globex_admin) as globex:
        # listings show none of them; claims and heartbeats cannot reach them
        assert j not in {x["id"] for x in ok(globex.get("/jobs", params={"limit": 1000}))["items"]}
        run_ids = {x["id"] for x in ok(globex.get("/runs", params={"limit": 1000}))["items"]}
        assert not run_ids & {r, d, held["run_id"]}
        assert d not in {x["id"] for x in ok(globex.get("/dead-letters"))["items"]}
        assert acme_key["id"] not in {k["id"] for k in ok(globex.get("/keys"))["items"]}
        # a tenant's admin asking for the other tenant explicitly finds nothing there
        problem(globex.post(f"/jobs/{j}/trigger", params={"tenant": "acme"}), 404)
        assert claim(globex, worker, job["task"]) == []
        beat = ok(
            globex.post(
                "/worker/heartbeat",
                json={
                    "worker_id": worker,
                    "runs": [{"run_id": held["run_id"], "token": held["token"]}],
                },
            )
        )
        assert beat == {"kept": [], "lost": [held["run_id"]], "cancel_requested": []}
    with server.client(keys.superadmin) as root:
        # a superadmin asking for the tenant explicitly may act on it
        trigger = ok(root.post(f"/jobs/{j}/trigger", params={"tenant": "acme"}), 201)
    with server.client(keys.acme_operator) as acme:
        # nothing changed on acme's side
        assert ok(acme.get(f"/jobs/{j}"))["status"] == "active"
        assert ok(acme.get(f"/runs/{r}"))["state"] in ("scheduled", "running")
        assert ok(acme.get(f"/runs/{d}"))["state"] == "dead"
        assert ok(acme.get(f"/runs/{trigger['id']}"))["tenant"] == "acme"


def test_health_readiness_and_offline_docs_need_no_key(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        assert ok(c.get("/healthz")) == {"status": "ok"}
        ready = ok(c.get("/readyz"))
        assert ready["status"] == "ready"
        assert ready["schema_version"] >= 2
        schema = ok(c.get("/api/v1/openapi.json"))
        assert schema["openapi"].startswith("3.")
        assert "/api/v1/worker/claim" in schema["paths"]
        docs = c.get("/api/v1/docs")
        assert docs.status_code == 200
        assert "swagger-ui" in docs.text
        linked = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)""", docs.text)
        assert linked
        assert all(u.startswith("/") for u in linked), linked  # served here, never a CDN
        assert "://" not in docs.text
        for asset in re.findall(r"""(?:src|href)=['"](/api/v1/docs/assets/[^'"]+)""", docs.text):
            response = c.get(asset)
            assert response.status_code == 200, asset
            assert len(response.content) > 1000, asset
        problem(c.get("/nowhere"), 404)
