"""The API's list and history pages and its metrics gauges read a real streaming replica, and
only they do: with the standby's replay paused, they show the state before the pause while
the primary (a run's own page, the job's own page) already has what the API just wrote.
Writes through the API go to the primary; a replica's sessions refuse writes; a bad replica
URL stops ``duetime server`` at start with one clear line."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from duetime.app import AsyncApp
from duetime.store import Pooling
from duetime.store.reads import open_replica
from tests.api.apikit import ServerProcess, make_dead_run, make_job, ok, start
from tests.replica.pair import StreamingPair

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def server(pair: StreamingPair) -> Iterator[ServerProcess]:
    """``duetime server`` on the primary, reading its list pages from the standby."""
    proc = start(
        pair.url("primary", "duetime"),
        "--no-auth",
        "--replica-url",
        pair.url("standby", "duetime"),
    )
    yield proc
    proc.stop()


def ids(page: dict[str, Any] | list[dict[str, Any]]) -> set[str]:
    items = page if isinstance(page, list) else page["items"]
    return {item["id"] for item in items}


def due_gauge(metrics: str) -> float:
    """``duetime_runs_due`` of tenant ``default`` in a /metrics exposition (0 when absent)."""
    found = re.search(r'^duetime_runs_due\{tenant="default"\} (\S+)$', metrics, re.MULTILINE)
    return 0.0 if found is None else float(found.group(1))


def primary_due(url: str) -> int:
    async def read() -> int:
        async with AsyncApp(url) as app:
            stats = await app.cluster_stats()
        return sum(t.due for t in stats.tenants if t.tenant == "default")

    return asyncio.run(read())


def test_list_pages_and_gauges_read_the_replica(pair: StreamingPair, server: ServerProcess) -> None:
    with server.client() as c:
        job, doomed = make_job(c), make_job(c)
        first = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        pair.wait_caught_up()
        assert ids(ok(c.get("/runs", params={"job_id": job["id"]}))) == {first["id"]}

        pair.pause_replay()
        try:
            # writes while the standby replays nothing: each reaches the primary
            second = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
            dead = make_dead_run(c, doomed)
            ok(c.post(f"/jobs/{job['id']}/pause", json={"note": "replica test"}))

            # fresh reads (a run's page, a job's page) come from the primary ...
            assert ok(c.get(f"/runs/{second['id']}"))["state"] == "scheduled"
            assert ok(c.get(f"/jobs/{job['id']}"))["status"] == "paused"
            # ... the list and history pages from the replica, as it was before the pause
            assert ids(ok(c.get("/runs", params={"job_id": job["id"]}))) == {first["id"]}
            assert ids(ok(c.get(f"/jobs/{job['id']}/runs"))) == {first["id"]}
            assert ids(ok(c.get("/dead-letters", params={"job_id": doomed["id"]}))) == set()
            assert ok(c.get(f"/jobs/{job['id']}/history"))["items"] == []
            # the gauges too: its first scrape, during the pause, misses the new due run
            metrics = c.get(server.url + "/metrics").text
            assert due_gauge(metrics) == primary_due(pair.url("primary", "duetime")) - 1
        finally:
            pair.resume_replay()

        pair.wait_caught_up()
        listed = ids(ok(c.get("/runs", params={"job_id": job["id"]})))
        assert listed == {first["id"], second["id"]}
        assert ids(ok(c.get("/dead-letters", params={"job_id": doomed["id"]}))) == {dead["id"]}
        history = ok(c.get(f"/jobs/{job['id']}/history"))["items"]
        assert [event["kind"] for event in history] == ["paused"]


def test_the_api_holds_sessions_on_the_standby(pair: StreamingPair, server: ServerProcess) -> None:
    with server.client() as c:
        ok(c.get("/runs"))
    sessions = pair.query(
        "standby",
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'duetime' "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    assert sessions >= 1


async def test_replica_sessions_refuse_writes_even_on_a_primary(pair: StreamingPair) -> None:
    # a replica URL that names a primary by mistake: reads work, writes are refused
    reads = await open_replica(pair.url("primary", "duetime"), Pooling(pool_size=1))
    try:
        assert (await reads.db_now()).tzinfo is not None
        store: Any = reads  # the pool under the ReadStore type, to try what it cannot express
        async with store.pool.connection() as conn:
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await conn.execute("CREATE TABLE replica_must_not_write (x int)")
    finally:
        await reads.close()


def serve_with_replica(db: str, replica: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DUETIME_DATABASE_URL": db}
    command = [sys.executable, "-m", "duetime", "server", "--port", "0", "--no-auth"]
    return subprocess.run(
        [*command, "--replica-url", replica],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("replica", "says"),
    [
        ("postgresql://postgres@127.0.0.1:1/duetime", "cannot connect to postgresql://"),
        ("replica.db", "replica_url: must be a postgresql:// URL"),
        ("STANDBY_WITHOUT_SCHEMA", "database has no duetime schema"),
    ],
)
def test_a_bad_replica_url_stops_the_server_at_start(
    pair: StreamingPair, replica: str, says: str
) -> None:
    if replica == "STANDBY_WITHOUT_SCHEMA":
        replica = pair.url("standby", "postgres")
    done = serve_with_replica(pair.url("primary", "duetime"), replica)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "listening on" not in done.stdout


def test_a_replica_of_sqlite_is_refused(pair: StreamingPair, tmp_path: Path) -> None:
    done = serve_with_replica(str(tmp_path / "duetime.db"), pair.url("standby", "duetime"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "replica_url: a read replica needs a PostgreSQL database_url" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_worker_whose_metrics_read_a_bad_replica_stops_at_start(pair: StreamingPair) -> None:
    # --metrics-port serves the same cluster gauges, so it reads the replica too
    env = {
        **os.environ,
        "DUETIME_DATABASE_URL": pair.url("primary", "duetime"),
        "DUETIME_REPLICA_URL": "postgresql://postgres@127.0.0.1:1/duetime",
    }
    done = subprocess.run(
        [sys.executable, "-m", "duetime", "worker", "--metrics-port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot connect to postgresql://postgres@127.0.0.1:1/duetime" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_workers_metrics_read_the_replica(pair: StreamingPair) -> None:
    env = {
        **os.environ,
        "DUETIME_DATABASE_URL": pair.url("primary", "duetime"),
        "DUETIME_REPLICA_URL": pair.url("standby", "duetime"),
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "duetime", "worker", "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = ""
        for raw in iter(proc.stdout.readline, b""):  # ends when the worker exits
            found = re.search(rb"metrics: (http://\S+/metrics)", raw)
            if found:
                url = found.group(1).decode()
                break
        assert url, "the worker did not serve /metrics"
        pair.wait_caught_up()
        pair.pause_replay()
        try:
            # a run of a task no worker serves: it stays due
            async def trigger() -> None:
                async with AsyncApp(pair.url("primary", "duetime")) as app:
                    await app.schedule(
                        "replica-metrics", task="nobody.serves.this", cron="0 3 * * *",
                        allow_unregistered=True,
                    )  # fmt: skip
                    await app.trigger("replica-metrics")

            asyncio.run(trigger())
            with httpx.Client(timeout=15) as client:
                scraped = due_gauge(client.get(url).text)
            assert scraped == primary_due(pair.url("primary", "duetime")) - 1
        finally:
            pair.resume_replay()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
