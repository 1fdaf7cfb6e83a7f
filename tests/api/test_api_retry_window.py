"""Issue 16 item 6 over HTTP (real server process, both stores): the retry window and the
error classification in ``retry`` are created, shown, merged by PATCH (``within: null``
removes the window) and refused with the field at fault."""

from __future__ import annotations

import pytest

from tests.api.apikit import Keys, ServerProcess, claim, make_job, ok, problem, unique

pytestmark = pytest.mark.slow

RULES = {
    "max_attempts": 10,
    "within": 3600,
    "permanent_on": ["KeyError", "ValueError", "myapp.errors.Fatal"],
    "retry_on": ["myapp.errors.Flaky"],
    "permanent_on_status": [404, 410],
    "retry_on_status": [409],
}


def new_job(client, **retry) -> dict:
    body = {
        "name": unique(),
        "task": "api.test",
        "every": 60,
        "allow_unregistered": True,
        "retry": retry,
    }
    return ok(client.post("/jobs", json=body), 201)


def test_window_and_classification_round_trip(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = new_job(c, **RULES)
        assert job["retry"] == {
            "max_attempts": 10,
            "backoff_base": job["retry"]["backoff_base"],
            "backoff_factor": job["retry"]["backoff_factor"],
            "backoff_cap": job["retry"]["backoff_cap"],
            "within": 3600.0,
            "permanent_on": ["KeyError", "ValueError", "myapp.errors.Fatal"],
            "retry_on": ["myapp.errors.Flaky"],
            "permanent_on_status": [404, 410],
            "retry_on_status": [409],
        }
        url = f"/jobs/{job['id']}"
        assert ok(c.get(url))["retry"] == job["retry"]
        patched = ok(c.patch(url, json={"retry": {"max_attempts": 4}}))
        assert patched["retry"] == {**job["retry"], "max_attempts": 4}, "the rest is kept"
        cleared = ok(c.patch(url, json={"retry": {"within": None, "permanent_on": []}}))
        assert cleared["retry"]["within"] is None
        assert cleared["retry"]["permanent_on"] == []
        assert cleared["retry"]["retry_on"] == ["myapp.errors.Flaky"]


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        pytest.param({"within": -5}, "retry.within", id="negative-window"),
        pytest.param({"within": 0}, "retry.within", id="zero-window"),
        pytest.param({"within": "soon"}, "retry.within", id="window-not-a-number"),
        pytest.param({"permanent_on": ["ValueErorr"]}, "retry.permanent_on", id="typo-builtin"),
        pytest.param({"retry_on": ["not a class"]}, "retry.retry_on", id="not-a-name"),
        pytest.param(
            {"permanent_on": ["ValueError"], "retry_on": ["ValueError"]},
            "retry.retry_on",
            id="in-both-lists",
        ),
        pytest.param({"retry_on_status": [99]}, "retry.retry_on_status", id="status-below-100"),
        pytest.param(
            {"permanent_on_status": [600]}, "retry.permanent_on_status", id="status-above-599"
        ),
        pytest.param(
            {"permanent_on_status": [200]}, "retry.permanent_on_status", id="status-success"
        ),
        pytest.param(
            {"retry_on_status": ["500"]}, "retry.retry_on_status", id="status-not-a-number"
        ),
        pytest.param(
            {"permanent_on_status": [503], "retry_on_status": [503]},
            "retry.retry_on_status",
            id="status-in-both-lists",
        ),
    ],
)
def test_bad_rules_are_field_errors(
    server: ServerProcess, keys: Keys, retry: dict, field: str
) -> None:
    with server.client(keys.acme_operator) as c:
        body = {"name": unique(), "task": "x", "every": 5, "allow_unregistered": True}
        refused = problem(c.post("/jobs", json={**body, "retry": retry}), 422)
        assert refused["field"].startswith(field), refused


def test_a_remote_workers_failure_is_classified_by_its_class_name(
    server: ServerProcess, keys: Keys
) -> None:
    """The server decides a remote worker's retries: the job's lists match the reported
    ``error_class`` exactly (no MRO is known), and its window applies."""
    with server.client(keys.acme_operator) as c:
        task = unique("remote.classified")
        retry = {
            "max_attempts": 5,
            "backoff_base": 0,
            "backoff_cap": 0,
            "within": 600,
            "permanent_on": ["myapp.errors.Fatal"],
        }
        job = make_job(c, task=task, retry=retry)

        def fail(**fields: object) -> dict:
            (held,) = claim(c, "w1", task)
            body = {"worker_id": "w1", "run_id": held["run_id"], "token": held["token"]}
            return ok(c.post("/worker/complete", json={**body, "outcome": "failed", **fields}))

        fatal = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        assert fail(error_class="myapp.errors.Fatal")["state"] == "dead"
        assert ok(c.get(f"/runs/{fatal['id']}"))["reason"] == "permanent_error"

        flaky = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        assert fail(error_class="myapp.errors.Flaky")["state"] == "scheduled"
        assert fail(error_class="myapp.errors.Flaky", retry_after=3600)["state"] == "dead"
        assert ok(c.get(f"/runs/{flaky['id']}"))["reason"] == "retry_window_exhausted"
