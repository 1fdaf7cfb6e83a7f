"""Overlap options over REST against a real server, on both stores (issue 16 items 1 and 4,
decision 0016): a remote worker learns of a ``replace`` at its next heartbeat, and the new
options are validated field by field."""

from __future__ import annotations

import httpx
import pytest

from tests.api.apikit import Keys, ServerProcess, claim, make_job, ok, problem, unique

pytestmark = pytest.mark.slow


def heartbeat(c: httpx.Client, worker: str, *runs: dict) -> dict:
    held = [{"run_id": r["run_id"], "token": r["token"]} for r in runs]
    return ok(c.post("/worker/heartbeat", json={"worker_id": worker, "runs": held}))


def test_a_remote_worker_learns_of_a_replace_at_its_next_heartbeat(
    server: ServerProcess, keys: Keys
) -> None:
    with server.client(keys.acme_operator) as c:
        task = unique("remote.replace")
        job = make_job(c, task=task, overlap="replace", replace_timeout=600)
        ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        (old,) = claim(c, "w1", task)
        new = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        assert claim(c, "w1", task) == []  # before: the newer run was handed out at once
        beat = heartbeat(c, "w1", old)
        assert beat["kept"] == [old["run_id"]]  # its lease holds while it stops
        assert beat["cancel_requested"] == [old["run_id"]]
        body = {"worker_id": "w1", "run_id": old["run_id"], "token": old["token"]}
        stopped = ok(c.post("/worker/complete", json={**body, "outcome": "failed"}))
        assert stopped["state"] == "cancelled"
        assert ok(c.get(f"/runs/{old['run_id']}"))["reason"] == "replaced"
        (successor,) = claim(c, "w1", task)
        assert successor["run_id"] == new["id"]


def test_the_overlap_options_are_validated_and_shown(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        base = {"name": unique(), "task": unique("t"), "every": 60, "allow_unregistered": True}
        for fields, field in (
            ({"overlap": "replace", "replace_timeout": -1}, "replace_timeout"),
            ({"overlap": "replace", "replace_timeout": 0}, "replace_timeout"),
            ({"overlap": "serialize", "max_waiting": -1}, "max_waiting"),
            ({"overlap": "serialize", "max_waiting": 2.0}, "max_waiting"),
            ({"overlap": "skip", "max_waiting": 2}, "max_waiting"),
            ({"overlap": "buffer_once"}, "overlap"),
            # nothing ever waits for allow without a limit: the cap would mean nothing
            ({"overlap": "allow", "max_waiting": 2}, "max_waiting"),
            ({"overlap": "replace", "replace_timeout": 0.05}, "replace_timeout"),
            ({"overlap": "replace", "replace_timeout": 1e-9}, "replace_timeout"),
        ):
            problem(c.post("/jobs", json={**base, **fields}), 422, field)
        limited = {"overlap": "allow", "max_concurrency": 2, "max_waiting": 2}
        assert (
            ok(c.post("/jobs", json={**base, "name": unique(), **limited}), 201)["max_waiting"] == 2
        )
        quick = {"overlap": "replace", "replace_timeout": 0.1}
        assert (
            ok(c.post("/jobs", json={**base, "name": unique(), **quick}), 201)["replace_timeout"]
            == 0.1
        )
        job = ok(c.post("/jobs", json={**base, "overlap": "buffer_one"}), 201)
        assert (job["overlap"], job["max_waiting"], job["replace_timeout"]) == ("buffer_one", 0, 30)
        changed = ok(c.patch(f"/jobs/{job['id']}", json={"overlap": "serialize", "max_waiting": 3}))
        assert (changed["overlap"], changed["max_waiting"]) == ("serialize", 3)
        problem(c.patch(f"/jobs/{job['id']}", json={"max_waiting": -2}), 422, "max_waiting")
        # back to a policy that never queues: the cap goes with it
        assert ok(c.patch(f"/jobs/{job['id']}", json={"overlap": "skip"}))["max_waiting"] == 0
