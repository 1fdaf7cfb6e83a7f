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
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess, claim, make_job, ok, problem, unique
from tests.waiting import eventually_sync

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
        # a remote worker's traceback is kept with the attempt: its last 16 KiB (issue 17)
        tb = "Traceback (most recent call last):\n" + "  frame\n" * 5000 + "E: x\n"
        dead = ok(
            complete(
                c, "w1", second, outcome="failed", error_class="E", error_message="x", traceback=tb
            )
        )
        assert dead["state"] == "dead"
        detail = ok(c.get(f"/runs/{run['id']}"))
        assert detail["reason"] == "attempts_exhausted"
        assert detail["last_error_class"] == "E"
        assert [a["outcome"] for a in detail["attempts"]] == ["failed", "failed"]
        assert [a["traceback"] is None for a in detail["attempts"]] == [True, False]
        kept = detail["attempts"][1]["traceback"]
        assert len(kept) <= 16 * 1024
        assert kept.endswith("  frame\nE: x\n")
        assert "earlier characters cut" in kept.splitlines()[0]

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
            eventually_sync(
                lambda: ok(c.get(f"/runs/{run['id']}"))["state"] == "succeeded",
                what="the documented worker to run it",
            )
            (attempt,) = ok(c.get(f"/runs/{run['id']}"))["attempts"]
            assert attempt["worker_id"] == "globex/billing-worker-1"
    finally:
        proc.kill()
        output = proc.communicate(timeout=10)[0].decode()
    assert "running billing.settle with {'ledger': 'eu'}" in output


# --- tenant isolation of remote workers (issue 13) ----------------------------------------------


def operator_key(api_db: str, tenant: str) -> str:
    """A fresh ``operator`` key of ``tenant`` (made through the Python API)."""

    async def go() -> str:
        async with AsyncApp(api_db) as app:
            return (await app.for_tenant(tenant).create_key("operator"))[1]

    return asyncio.run(go())


def cluster_of(c: httpx.Client, **params: str) -> dict:
    return ok(c.get("/cluster", params=params))  # type: ignore[no-any-return]


def wait_for_worker(c: httpx.Client, worker: str, **params: str) -> dict:
    """The caller's ``/cluster`` once it lists ``worker`` (the API caches it up to 5 s)."""

    def listed() -> dict | None:
        found = cluster_of(c, **params)
        return found if any(w["id"] == worker for w in found["workers"]) else None

    return eventually_sync(listed, what=f"{worker} to show up in /cluster", every=0.2)


def test_a_worker_id_with_a_slash_cannot_reach_another_tenants_runs(
    server: ServerProcess, api_db: str
) -> None:
    """Tenant ``a`` with worker ``x/y`` and tenant ``a/x`` with worker ``y`` both spell
    ``a/x/y``: neither may renew, complete or overwrite the other's lease or worker record."""
    attacker = unique("a")
    victim = f"{attacker}/x"
    with (
        server.client(operator_key(api_db, victim)) as v,
        server.client(operator_key(api_db, attacker)) as a,
    ):
        task = unique("remote.victim")
        job = make_job(v, task=task)
        run = ok(v.post(f"/jobs/{job['id']}/trigger"), 201)
        (held,) = claim(v, "y", task, lease_seconds=5)
        lease = datetime.fromisoformat(held["lease_expires_at"])

        # the attack: renew the victim's 5 s lease for an hour
        beat = heartbeat(a, "x/y", held, lease_seconds=3600)
        assert beat == {"kept": [], "lost": [run["id"]], "cancel_requested": []}
        after = ok(v.get(f"/runs/{run['id']}"))
        assert datetime.fromisoformat(after["lease_expires_at"]) == lease
        problem(complete(a, "x/y", held, outcome="failed", retryable=False), 404)
        assert claim(a, "x/y", task) == []
        other = unique("remote.attacker")
        assert claim(a, "x/y", other) == []  # records the attacker's worker and its tasks

        # the victim's worker still holds its run, and its record its own task names
        assert heartbeat(v, "y", held)["kept"] == [run["id"]]
        wait_for_worker(a, f"{attacker}/x/y")
        mine = [w for w in cluster_of(v)["workers"] if w["id"] == f"{victim}/y"]
        assert [w["tasks"] for w in mine] == [[task]]
        ok(complete(v, "y", held, outcome="succeeded"))
        detail = ok(v.get(f"/runs/{run['id']}"))
        assert detail["state"] == "succeeded"
        assert [a["worker_id"] for a in detail["attempts"]] == [f"{victim}/y"]


def test_cluster_and_overview_show_only_the_callers_remote_workers(
    server: ServerProcess, keys: Keys
) -> None:
    worker, secret = unique("globex-worker"), unique("globex.secret")
    with server.client(keys.globex_operator) as g:
        assert claim(g, worker, secret) == []
        seen = wait_for_worker(g, f"globex/{worker}")
        (mine,) = [w for w in seen["workers"] if w["id"] == f"globex/{worker}"]
        assert mine["tasks"] == [secret]
        assert mine["tenant"] == "globex"
    with server.client(keys.acme_viewer) as c:
        cluster = c.get("/cluster")
        overview = c.get("/stats/overview")
        for response in (cluster, overview):
            ok(response)
            assert secret not in response.text
            assert worker not in response.text
        workers = cluster.json()["workers"] + overview.json()["cluster"]["workers"]
        assert all(w["tenant"] in (None, "acme") for w in workers)
    with server.client(keys.superadmin) as c:  # a superadmin acting on globex sees globex's
        assert any(w["id"] == f"globex/{worker}" for w in cluster_of(c, tenant="globex")["workers"])
        assert worker not in c.get("/cluster").text


def test_a_task_name_claimed_by_one_tenant_is_unknown_to_the_others(
    server: ServerProcess, keys: Keys
) -> None:
    task = unique("globex.only")
    with server.client(keys.globex_operator) as g:
        assert claim(g, unique("w"), task) == []
        ok(g.post("/jobs", json={"name": unique(), "task": task, "every": 60}), 201)
    with server.client(keys.acme_operator) as c:
        refused = problem(c.post("/jobs", json={"name": unique(), "task": task, "every": 60}), 422)
        assert refused["field"] == "task"


def test_a_remote_success_keeps_its_result_within_the_limit(
    server: ServerProcess, keys: Keys
) -> None:
    with server.client(keys.acme_operator) as c:
        task = unique("remote.result")
        job = make_job(c, task=task)
        first = ok(c.post(f"/jobs/{job['id']}/trigger", json={}), 201)
        (held,) = claim(c, "w1", task)
        done = ok(complete(c, "w1", held, outcome="succeeded", result={"rows": [1, 2, 3]}))
        assert done["state"] == "succeeded"
        assert ok(c.get(f"/runs/{first['id']}"))["result"] == {"rows": [1, 2, 3]}

        second = ok(c.post(f"/jobs/{job['id']}/trigger", json={}), 201)
        (held,) = claim(c, "w1", task)
        # over the result limit (1 MiB, the body limit too here: that one answers first)
        huge = "x" * (1024 * 1024)
        answer = complete(c, "w1", held, outcome="succeeded", result=huge)
        assert answer.status_code in (413, 422), answer.text
        assert ok(c.get(f"/runs/{second['id']}"))["state"] == "running"  # nothing written
        assert ok(complete(c, "w1", held, outcome="succeeded"))["state"] == "succeeded"
