"""In real processes: ``duetime worker --metrics-port 0 --log-format json`` serves /metrics and
logs JSON lines; the jobs listing the dashboard pages through stays fast on 100,000 jobs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from duetime.app import AsyncApp
from tests.waiting import eventually_sync

pytestmark = pytest.mark.slow
METRICS_URL = re.compile(r"metrics: (http://127\.0\.0\.1:\d+/metrics)")


def test_worker_serves_metrics_and_logs_json(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")

    async def migrate() -> None:
        async with AsyncApp(db, migrate=True):
            pass

    asyncio.run(migrate())
    env = {**os.environ, "DUETIME_DATABASE_URL": db, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "duetime", "worker", "--metrics-port", "0", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    stdout: list[str] = []
    found = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            stdout.append(raw.decode())
            if METRICS_URL.search(stdout[-1]):
                found.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert found.wait(30), "".join(stdout)
        (url,) = [m.group(1) for line in stdout if (m := METRICS_URL.search(line))]

        def live() -> str | None:
            text = httpx.get(url, timeout=10).text
            return text if "duetime_workers_live 1.0" in text else None

        text = eventually_sync(live, what="the worker to count itself live", every=0.2)
        assert "duetime_leader_present" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    assert lines, err.decode()
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert any("worker" in str(line["message"]) for line in lines)


async def test_job_pages_stay_fast_on_100k_jobs(tmp_path: Path) -> None:
    """A page of jobs (first, by name prefix, after a cursor) walks the (tenant, name) index
    and stops at its limit: its SQLite VM steps stay under a tenth of one scan of the 100,000
    jobs. Counted with SQLite's progress handler, never timed."""
    import sqlite3

    from duetime.api import create_api
    from duetime.store.sqlfile import load_queries

    db = tmp_path / "big.db"
    async with AsyncApp(str(db)) as app:
        specs = (
            {"name": f"job-{i:06d}", "task": "duetime.noop", "cron": "0 3 * * *"}
            for i in range(100_000)
        )
        assert await app.schedule_many(specs) == 100_000
        tenant = app.tenant
        api = create_api(app, app.settings.with_(api_rate_limit=0), auth_required=False)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            for params in (
                {"limit": 50},
                {"limit": 50, "name_prefix": "job-0999"},
                {"limit": 50, "cursor": "job-099900"},
                {"limit": 50, "status": "paused"},
            ):
                response = await c.get("/api/v1/jobs", params=params)
                assert response.status_code == 200
            assert [j["name"] for j in response.json()["items"]] == []
        page = await app.jobs.find(name_prefix="job-0999", limit=50)
        assert page.items[0].name == "job-099900"

    def steps(sql: str, params: dict[str, object]) -> int:
        counted = [0]

        def tick() -> int:
            counted[0] += 1
            return 0

        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.set_progress_handler(tick, 100)
            conn.execute(sql, params).fetchall()
        return counted[0] * 100

    scan = steps(
        "SELECT count(*) FROM jobs WHERE tenant = :tenant AND pause_note IS NULL",
        {"tenant": tenant},
    )
    page_query = load_queries("sqlite")["job_list"]
    base = {
        "tenant": tenant,
        "status": None,
        "name_prefix": None,
        "name_until": None,
        "tag": None,
        "after_name": None,
        "limit": 51,
    }
    prefixed = {"name_prefix": "job-0999", "name_until": "job-099:"}
    for extra in ({}, prefixed, {"after_name": "job-099900"}):
        walked = steps(page_query, {**base, **extra})
        assert walked < scan / 10, (extra, walked, scan)
