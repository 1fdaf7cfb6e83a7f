"""One trigger at a time: ``app.trigger`` and ``POST /api/v1/jobs/{job}/trigger``, each next to
the minimal script of the same write on the same server, interleaved.

    python -m bench.trigger --count 2000 --rounds 3

A round runs, in this order: the minimal script (one autocommit ``INSERT … SELECT`` of a run
from its job, returning the row, as a sequential loop over one connection), ``app.trigger``
(one ``AsyncApp`` on PostgreSQL, sequential awaits), and ``POST …/trigger`` over one keep-alive
HTTP connection to a ``duetime server`` started on a free port with an operator key. It reports
triggers per second (median and spread over the rounds), each as a ratio to the minimal
script of the same round, the client's CPU per trigger (this process, ``time.process_time``:
less disturbed by other load on the machine than the rates), the HTTP latencies (p50, p99) and
the server's CPU per ``POST`` (``/proc``) and the database statements each ``POST`` cost
(pg_stat_statements in the bench database, when the server preloads it: 1 means the API key
was served from the server's verified-key cache).
Exits non-zero with the reason when a step fails.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp
import psycopg

from bench._common import (
    BenchError,
    Spread,
    base_parser,
    create_database,
    drop_database,
    duetime_env,
    guarded_main,
    migrate,
    percentile,
    pg_stat_statements_ready,
    proc_cpu_seconds,
    report,
    run_cli,
    spawn,
    stop_all,
)
from duetime import AsyncApp

MINIMAL_SETUP = """
CREATE TABLE mini_jobs (id uuid PRIMARY KEY, name text UNIQUE, payload json NOT NULL);
CREATE TABLE mini_runs (
    id uuid PRIMARY KEY, job_id uuid NOT NULL, payload json NOT NULL,
    available_at timestamptz NOT NULL, state text NOT NULL, idempotency_key text NOT NULL,
    UNIQUE (job_id, idempotency_key)
);
CREATE INDEX mini_runs_ready ON mini_runs (available_at) WHERE state = 'scheduled';
INSERT INTO mini_jobs VALUES (gen_random_uuid(), 'bench.trigger', '{}');
"""

MINIMAL_TRIGGER = """
INSERT INTO mini_runs (id, job_id, payload, available_at, state, idempotency_key)
SELECT %(id)s, j.id, j.payload, clock_timestamp(), 'scheduled', %(key)s
FROM mini_jobs j WHERE j.name = 'bench.trigger'
RETURNING *
"""


STATEMENTS_RUN = """
SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


@dataclass(frozen=True, slots=True)
class Sequential:
    """One sequential measurement: triggers per second and client CPU (µs) per trigger."""

    rate: float
    cpu_us: float

    @classmethod
    def since(cls, count: int, start: float, cpu_start: float) -> Sequential:
        return cls(
            count / (time.perf_counter() - start),
            (time.process_time() - cpu_start) / count * 1e6,
        )


async def minimal(url: str, count: int) -> Sequential:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(count):
            run_id = uuid.uuid4()
            cur = await conn.execute(MINIMAL_TRIGGER, {"id": run_id, "key": f"auto:{run_id}"})
            if await cur.fetchone() is None:
                raise BenchError("the minimal trigger inserted nothing")
        return Sequential.since(count, start, cpu_start)


async def app_trigger(url: str, count: int) -> Sequential:
    async with AsyncApp(url, migrate=False) as app:
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(count):
            await app.trigger("bench.trigger")
        return Sequential.since(count, start, cpu_start)


def statements_run(url: str) -> int:
    """Statements the bench database has run so far (pg_stat_statements; this query
    included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(STATEMENTS_RUN).fetchone()
    return 0 if row is None else int(row[0])


async def http_trigger(base: str, key: str, job_id: str, count: int) -> tuple[float, list[float]]:
    connector = aiohttp.TCPConnector(limit=1)
    headers = {"Authorization": f"Bearer {key}"}
    latencies: list[float] = []
    url = f"{base}/api/v1/jobs/{job_id}/trigger"
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        async with session.get(f"{base}/healthz") as warm:  # the connection, opened once
            await warm.read()
        start = time.perf_counter()
        for _ in range(count):
            t = time.perf_counter()
            async with session.post(url, json={}) as response:
                body = await response.read()
                if response.status not in (200, 201):
                    raise BenchError(f"POST trigger answered {response.status}: {body[:300]!r}")
            latencies.append((time.perf_counter() - t) * 1000)
        return count / (time.perf_counter() - start), latencies


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(base: str, server: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            if server.poll() is not None:
                raise BenchError(f"duetime server exited: {server.stderr.read()[-2000:]!r}")
            try:
                async with session.get(f"{base}/readyz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"duetime server not ready at {base} after {timeout:.0f} s")
            await asyncio.sleep(0.1)


async def register(url: str) -> str:
    """The trigger job's id."""
    async with AsyncApp(url, migrate=False) as app:
        # a job that never fires by itself (next 1 January); overlap "allow": independent runs
        job = await app.schedule(
            "bench.trigger", task="duetime.noop", cron="0 0 1 1 *", overlap="allow"
        )
    return str(job.id)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="triggers per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = create_database("trigger")
    server = None
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(MINIMAL_SETUP)
        job_id = asyncio.run(register(url))
        created = json.loads(
            run_cli(["keys", "create", "--db", url, "--role", "operator", "--json"])
        )
        key = created["key"]
        counted = pg_stat_statements_ready(url)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = spawn(
            [sys.executable, "-m", "duetime", "server", "--db", url, "--port", str(port)],
            env=duetime_env(log_level="warning", api_rate_limit=0),
        )
        asyncio.run(wait_ready(base, server))
        minis: list[Sequential] = []
        apps: list[Sequential] = []
        http_rates: list[float] = []
        lat: list[float] = []
        per_post: list[float] = []
        server_cpu: list[float] = []
        for _ in range(args.rounds):
            minis.append(asyncio.run(minimal(url, args.count)))
            apps.append(asyncio.run(app_trigger(url, args.count)))
            before = statements_run(url) if counted else 0
            cpu_before = proc_cpu_seconds(server.pid)
            rate, latencies = asyncio.run(http_trigger(base, key, job_id, args.count))
            server_cpu.append((proc_cpu_seconds(server.pid) - cpu_before) / args.count * 1e6)
            if counted:  # less the counting query itself
                per_post.append((statements_run(url) - before - 1) / args.count)
            http_rates.append(rate)
            lat.extend(latencies)
        mini = [m.rate for m in minis]
        app_ratio = Spread.of([a.rate / m for a, m in zip(apps, mini, strict=True)])
        http_ratio = Spread.of([h / m for h, m in zip(http_rates, mini, strict=True)])
        statements = Spread.of(per_post).show(".2f") if per_post else "n/a"
        lines = [
            f"minimal script: {Spread.of(mini).show()} triggers/s, "
            f"{Spread.of([m.cpu_us for m in minis]).show()} µs of client CPU a trigger",
            f"app.trigger: {Spread.of([a.rate for a in apps]).show()} triggers/s, "
            f"{app_ratio.show('.2f')} of the minimal script; "
            f"{Spread.of([a.cpu_us for a in apps]).show()} µs of client CPU a trigger",
            f"POST …/trigger (one keep-alive connection, operator key): "
            f"{Spread.of(http_rates).show()} triggers/s, {http_ratio.show('.2f')} of the "
            f"minimal script; latency p50 {percentile(lat, 50):.2f} ms, "
            f"p99 {percentile(lat, 99):.2f} ms; {Spread.of(server_cpu).show()} µs of server CPU "
            f"and {statements} database statements a request",
        ]
        report(f"sequential triggers ({args.count} a round)", lines, record=args.record)
    except (KeyError, aiohttp.ClientError) as exc:
        raise BenchError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        if server is not None:
            stop_all([server])
        drop_database(url)


if __name__ == "__main__":
    guarded_main(main)
