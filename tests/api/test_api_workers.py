"""The remote-worker protocol over HTTP against a real server, on both stores: claim,
heartbeat, complete; retries and dead letters decided by the server; a run whose lease was lost
and taken over by another worker refuses the first worker's late outcome (409), and the newer
attempt's outcome stands."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess, claim, make_job, ok, problem, unique

pytestmark = pytest.mark.slow


def complete(c: httpx.Client, worker: str, run: dict, **fields: object) -> httpx.Response:
    body = {"worker_id": worker, "run_id": run["run_id"], "token": run["token"], **fields}
    return c.post("/worker/complete", json=body)


def heartbeat(c: httpx.Client, worker: str, *runs: dict, **fields: object) -> dict:
    held = [{"run_id": r["run_id"], "token": r["token"]} for r in runs]
    return ok(c.post("/worker/heartbeat", json={"worker_id": worker, "runs": held, **fields}))


def test_claim_heartbeat_complete(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        task = unique("remote.task")
        job = make_job(c, task=task, payload={"hello": "world"}, timeout=12)
        assert claim(c, "w1", task) == []  # nothing due yet
        run = ok(c.post(f"/jobs/{job['id']}/trigger", json={"payload": {"n": 1}}), 201)
        (held,) = claim(c, "w1", task, max_runs=5, lease_seconds=30)
        assert held["run_id"] == run["id"]
        assert held["attempt"] == 1
        assert held["token"] >= 1
        assert held["payload"] == {"n": 1}
        assert held["task"] == task
        assert held["timeout"] == 12
        assert held["job_name"] == job["name"]
        assert held["max_attempts"] == 3
        lease = datetime.fromisoformat(held["lease_expires_at"])
        assert claim(c, "w2", task) == []  # leased: nobody else gets it
        beat = heartbeat(c, "w1", held, lease_seconds=60)
        assert beat == {"kept": [run["id"]], "lost": [], "cancel_requested": []}
        assert datetime.fromisoformat(ok(c.get(f"/runs/{run['id']}"))["lease_expires_at"]) > lease
        assert heartbeat(c, "w2", held)["lost"] == [run["id"]]  # not w2's lease
        done = ok(complete(c, "w1", held, outcome="succeeded"))
        assert done["state"] == "succeeded"
        assert done["attempt"] == 1
        problem(complete(c, "w1", held, outcome="succeeded"), 409)  # already completed
        detail = ok(c.get(f"/runs/{run['id']}"))
        assert detail["state"] == "succeeded"
        assert [(a["outcome"], a["worker_id"]) for a in detail["attempts"]] == [
            ("succeeded", "acme/w1")
        ]
        # the worker's task names are now known: a job may name them without the override
        ok(c.post("/jobs", json={"name": unique(), "task": task, "every": 60}), 201)


def test_failures_retry_then_die(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        task = unique("remote.flaky")
        job = make_job(c, task=task, retry={"max_attempts": 2, "backoff_base": 0, "backoff_cap": 0})
        run = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        (first,) = claim(c, "w1", task)
        retry = ok(complete(c, "w1", first, outcome="failed", error_message="try again"))
        assert retry["state"] == "scheduled"
        (second,) = claim(c, "w1", task)
        assert second["attempt"] == 2
        assert second["token"] > first["token"]
        dead = ok(complete(c, "w1", second, outcome="failed", error_class="E", error_message="x"))
        assert dead["state"] == "dead"
        detail = ok(c.get(f"/runs/{run['id']}"))
        assert detail["reason"] == "attempts_exhausted"
        assert detail["last_error_class"] == "E"
        assert [a["outcome"] for a in detail["attempts"]] == ["failed", "failed"]

        later = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        (held,) = claim(c, "w1", task)
        delayed = ok(complete(c, "w1", held, outcome="failed", retry_after=3600))
        assert delayed["state"] == "scheduled"
        available = datetime.fromisoformat(delayed["available_at"])
        created = datetime.fromisoformat(later["created_at"])
        assert 3590 < (available - created).total_seconds() < 3700
        assert claim(c, "w1", task) == []  # not due for an hour

        permanent = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        (held,) = claim(c, "w1", task)
        gone = ok(complete(c, "w1", held, outcome="failed", retryable=False))
        assert gone["state"] == "dead"
        assert ok(c.get(f"/runs/{permanent['id']}"))["reason"] == "permanent_error"
        problem(complete(c, "w1", held, outcome="maybe"), 422, "outcome")
        problem(
            c.post("/worker/claim", json={"worker_id": "w1", "tasks": [], "max_runs": 1}),
            422,
            "tasks",
        )


def test_cancelled_run_is_reported_and_its_completion_refused(
    server: ServerProcess, keys: Keys
) -> None:
    with server.client(keys.acme_operator) as c:
        task = unique("remote.cancel")
        job = make_job(c, task=task)
        run = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        (held,) = claim(c, "w1", task)
        ok(c.post(f"/runs/{run['id']}/cancel"))
        beat = heartbeat(c, "w1", held)
        assert beat == {"kept": [], "lost": [], "cancel_requested": [run["id"]]}
        problem(complete(c, "w1", held, outcome="succeeded"), 409)
        assert ok(c.get(f"/runs/{run['id']}"))["state"] == "cancelled"


async def test_late_completion_after_a_lost_lease_is_refused(
    server: ServerProcess, keys: Keys, api_db: str
) -> None:
    with server.client(keys.acme_operator) as c:
        task = unique("remote.slow")
        job = make_job(c, task=task)
        run = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        (first,) = claim(c, "slow-worker", task, lease_seconds=1)
        await asyncio.sleep(1.3)  # the lease runs out; no heartbeat came
        async with AsyncApp(api_db) as app:
            reaped = await app.reaper().run_once()
        assert reaped.rescheduled >= 1
        assert heartbeat(c, "slow-worker", first)["lost"] == [run["id"]]
        (second,) = claim(c, "fast-worker", task)
        assert second["run_id"] == run["id"]
        assert second["token"] > first["token"]
        assert second["attempt"] == 2
        ok(complete(c, "fast-worker", second, outcome="succeeded"))

        late = problem(complete(c, "slow-worker", first, outcome="failed", retryable=False), 409)
        assert "token" in late["detail"]
        detail = ok(c.get(f"/runs/{run['id']}"))
        assert detail["state"] == "succeeded"
        assert detail["attempt"] == 2
        outcomes = {(a["worker_id"], a["outcome"]) for a in detail["attempts"]}
        assert outcomes == {("acme/slow-worker", "stale"), ("acme/fast-worker", "succeeded")}
        # a token never issued changes nothing either
        bogus = {**second, "token": second["token"] + 100}
        problem(complete(c, "fast-worker", bogus, outcome="failed"), 409)
        assert len(ok(c.get(f"/runs/{run['id']}"))["attempts"]) == 2


def test_the_documented_httpx_worker_runs_a_job(
    server: ServerProcess, keys: Keys, tmp_path: Path
) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "remote-workers.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)
    assert len(code.strip().splitlines()) <= 40
    (tmp_path / "worker.py").write_text(code)
    env = {
        **os.environ,
        "DUETIME_API": server.url + "/api/v1",
        "DUETIME_API_KEY": keys.globex_operator,  # its own tenant: no other test's runs
    }
    proc = subprocess.Popen(
        [sys.executable, "worker.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with server.client(keys.globex_operator) as c:
            job = make_job(c, task="billing.settle", payload={"ledger": "eu"})
            run = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
            deadline = time.monotonic() + 20
            while ok(c.get(f"/runs/{run['id']}"))["state"] != "succeeded":
                assert time.monotonic() < deadline, "the documented worker did not run it"
                time.sleep(0.1)
            (attempt,) = ok(c.get(f"/runs/{run['id']}"))["attempts"]
            assert attempt["worker_id"] == "globex/billing-worker-1"
    finally:
        proc.kill()
        output = proc.communicate(timeout=10)[0].decode()
    assert "running billing.settle with {'ledger': 'eu'}" in output
