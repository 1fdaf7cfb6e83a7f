"""Helpers for the REST API tests: a real ``duetime server`` (or ``up``) process on loopback,
its bound port read from its output, and API keys made through the Python API."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from duetime.app import AsyncApp

_URL = re.compile(r"(http://127\.0\.0\.1:\d+)")
PROBLEM_JSON = "application/problem+json"


@dataclass
class ServerProcess:
    url: str
    proc: subprocess.Popen[bytes]
    output: list[str] = field(default_factory=list)

    def client(self, key: str | None = None, **headers: str) -> httpx.Client:
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return httpx.Client(base_url=self.url + "/api/v1", headers=headers, timeout=15)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def text(self) -> str:
        return "".join(self.output)


def start(
    db_url: str,
    *args: str,
    command: str = "server",
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> ServerProcess:
    """Start ``duetime <command> --port 0 <args>`` on ``db_url``; return once it printed its
    URL. Its output keeps being collected (``.output``) so the pipe never fills."""
    environment = {
        **os.environ,
        "DUETIME_DATABASE_URL": db_url,
        "DUETIME_API_RATE_LIMIT": "0",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "duetime", command, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        cwd=cwd,
    )
    server = ServerProcess(url="", proc=proc)
    found = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode(errors="replace")
            server.output.append(line)
            match = _URL.search(line)
            if match and not found.is_set():
                server.url = match.group(1)
                found.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.05):
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise AssertionError(f"duetime {command} did not start:\n{server.text()}")
    return server


@dataclass(frozen=True)
class Keys:
    """Secrets of API keys: tenant ``acme`` (admin, operator, viewer), ``globex``, and a
    superadmin (of tenant ``default``)."""

    acme_admin: str
    acme_operator: str
    acme_viewer: str
    globex_admin: str
    globex_operator: str
    superadmin: str


def make_keys(db_url: str) -> Keys:
    async def go() -> Keys:
        async with AsyncApp(db_url, migrate=True) as app:
            acme, globex = app.for_tenant("acme"), app.for_tenant("globex")
            secrets = [
                (await tenant.create_key(role, name=f"test {role}"))[1]
                for tenant, role in (
                    (acme, "admin"),
                    (acme, "operator"),
                    (acme, "viewer"),
                    (globex, "admin"),
                    (globex, "operator"),
                    (app, "superadmin"),
                )
            ]
            return Keys(*secrets)

    return asyncio.run(go())


def unique(prefix: str = "job") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    """Assert ``response`` is a problem+json of ``status`` (naming ``field``); return it."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith(PROBLEM_JSON), response.headers
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"].startswith("urn:duetime:problem:")
    assert body["title"]
    assert body["detail"]
    if field is not None:
        assert body.get("field") == field, body
    return body


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json() if response.content else None


def make_job(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    """A job of a task of its own (so claims in one test never take another test's runs)."""
    body = {
        "name": unique(),
        "task": unique("task"),
        "cron": "0 3 * * *",
        "allow_unregistered": True,
        **fields,
    }
    return ok(client.post("/jobs", json=body), 201)  # type: ignore[no-any-return]


def claim(client: httpx.Client, worker: str, task: str, **fields: Any) -> list[dict[str, Any]]:
    body = {"worker_id": worker, "tasks": [task], **fields}
    runs: list[dict[str, Any]] = ok(client.post("/worker/claim", json=body))["runs"]
    return runs


EXPLODING = "boom <b>not bold</b>"
"""The message of :func:`fail_in_process`'s task: markup a page must show as text."""


async def fail_in_process(
    app: AsyncApp, job: str = "exploding", *, retried: bool = False
) -> uuid.UUID:
    """A run of ``job`` whose task ``explode_task`` raised ``RuntimeError(EXPLODING)``, failed
    by an in-process worker of ``app`` (so its attempt keeps the traceback): for good, or with
    ``retried`` scheduled again an hour later (no dead letter)."""
    from duetime import Retry
    from duetime._types import RunState
    from tests.waiting import eventually

    @app.task("tests.explode")
    def explode_task(ctx: Any) -> None:
        raise RuntimeError(EXPLODING)

    retry = Retry(max_attempts=2, backoff_base=3600, backoff_cap=3600) if retried else Retry(1)
    await app.schedule(job, task="tests.explode", cron="0 0 1 1 *", retry=retry)
    run = await app.trigger(job)
    stop = asyncio.Event()
    serving = asyncio.create_task(app.worker(tasks=["tests.explode"]).run(stop))

    async def failed() -> bool | None:
        now = await app.run(run.id)
        return (
            now.attempt == 1 and now.state is RunState.SCHEDULED
            if retried
            else (now.state is RunState.DEAD)
        ) or None

    try:
        await eventually(failed, what="the exploding run to fail")
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)
    return run.id


def make_dead_run(client: httpx.Client, job: dict[str, Any]) -> dict[str, Any]:
    """Trigger ``job`` and fail its run for good through the remote-worker protocol."""
    run = ok(client.post(f"/jobs/{job['id']}/trigger"), 201)
    worker = unique("worker")
    (claimed,) = claim(client, worker, job["task"])
    assert claimed["run_id"] == run["id"]
    done = ok(
        client.post(
            "/worker/complete",
            json={
                "worker_id": worker,
                "run_id": run["id"],
                "token": claimed["token"],
                "outcome": "failed",
                "error_class": "BoomError",
                "error_message": "boom",
                "retryable": False,
            },
        )
    )
    assert done["state"] == "dead"
    return ok(client.get(f"/runs/{run['id']}"))  # type: ignore[no-any-return]
