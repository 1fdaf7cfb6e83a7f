"""Job names in API paths (issue 17): ``/jobs/{job}`` and its sub-paths take a job's name as
well as its id — a value that parses as a UUID is an id, anything else a name in the key's
tenant — and a 404 names what was not found. Run paths take full ids only."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from tests.api.apikit import Keys, ServerProcess, ok, problem, unique

pytestmark = pytest.mark.slow


def new_job(client, name: str) -> dict:
    body = {"name": name, "task": "api.test", "cron": "0 3 * * *", "allow_unregistered": True}
    return ok(client.post("/jobs", json=body), 201)  # type: ignore[no-any-return]


def test_every_job_path_takes_the_name(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        name = f"{unique('nightly')} settle é"
        job = new_job(c, name)
        url = f"/jobs/{quote(name, safe='')}"
        assert ok(c.get(url)) == job
        assert ok(c.patch(url, json={"priority": 5}))["priority"] == 5
        assert ok(c.post(f"{url}/pause"))["status"] == "paused"
        assert ok(c.post(f"{url}/resume"))["status"] == "active"
        run = ok(c.post(f"{url}/trigger"), 201)
        assert run["job_id"] == job["id"]
        assert [r["id"] for r in ok(c.get(f"{url}/runs"))["items"]] == [run["id"]]
        assert ok(c.get(f"{url}/explain"))["job_id"] == job["id"]
        assert ok(c.post(f"{url}/cancel"))["status"] == "cancelled"
        assert c.delete(url).status_code == 204
        gone = problem(c.get(url), 404)
        assert gone["detail"] == f"job {name} not found"
        assert problem(c.get(f"/jobs/{job['id']}"), 404)["detail"] == f"job {job['id']} not found"


def test_a_name_is_looked_up_in_the_keys_tenant(server: ServerProcess, keys: Keys) -> None:
    name = unique("shared")
    with server.client(keys.acme_operator) as c:
        acme = new_job(c, name)
    with server.client(keys.globex_operator) as c:
        assert problem(c.get(f"/jobs/{name}"), 404)["detail"] == f"job {name} not found"
        problem(c.post(f"/jobs/{name}/trigger"), 404)
        globex = new_job(c, name)  # the same name, another tenant's job
        assert ok(c.get(f"/jobs/{name}"))["id"] == globex["id"]
    with server.client(keys.acme_viewer) as c:
        assert ok(c.get(f"/jobs/{name}"))["id"] == acme["id"]


def test_a_value_that_parses_as_a_uuid_is_an_id(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        named_like_an_id = str(uuid.uuid4())
        job = new_job(c, named_like_an_id)
        assert problem(c.get(f"/jobs/{named_like_an_id}"), 404)["detail"] == (
            f"job {named_like_an_id} not found"
        )
        assert ok(c.get(f"/jobs/{job['id']}"))["name"] == named_like_an_id


@pytest.mark.parametrize(
    "value",
    [pytest.param("x" * 201, id="too-long"), pytest.param("%20", id="blank")],
)
def test_text_that_can_be_no_name_is_404(server: ServerProcess, keys: Keys, value: str) -> None:
    with server.client(keys.acme_operator) as c:
        detail = problem(c.get(f"/jobs/{value}"), 404)["detail"]
        assert detail.endswith("not found (not a job id or name)")


def test_run_paths_take_full_ids_only(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = new_job(c, unique())
        run = ok(c.post(f"/jobs/{job['name']}/trigger"), 201)
        assert ok(c.get(f"/runs/{run['id']}"))["id"] == run["id"]
        problem(c.get(f"/runs/{run['id'][:8]}"), 404)
        problem(c.post(f"/runs/{run['id'][:8]}/cancel"), 404)
