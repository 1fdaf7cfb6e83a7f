"""Scale-out: many worker and scheduler processes on one PostgreSQL primary.

    python -m bench.scaleout --private-port 5480 --private-dir /tmp/scaleout   # the matrix
    python -m bench.scaleout --workers 2 --schedulers 1 --runs 200 --rounds 1  # a smoke run

Two kinds of cell, each with its own fresh database and its own processes, started once and
measured ``--rounds`` times (medians, with the spread):

- **worker cells** (``--workers``, default 2, 8 and 32 ``duetime worker`` processes with
  ``worker_concurrency`` 4 each, no scheduler): a burn-down of ``--runs`` no-op runs cloned at
  once (bench/burndown.py's clone). runs/s = succeeded runs / (last finish − first claim).
- **scheduler cells** (``--schedulers``, default 1, 2 and 4 ``duetime scheduler`` processes
  leasing the 256 partitions between them): ``--jobs`` every-second jobs plus a backlog of
  ``--backlog`` cloned runs at the start of each ``--window``-second window, executed by 4
  workers (concurrency 16). runs/s = runs finished in the window / the window; the cron
  occurrences materialized in the window against those due, and their fire lag (start −
  scheduled instant).

Measured in each round, without the benchmark's own queries:

- **PostgreSQL CPU per run**: CPU seconds (``/proc``) of the backends serving the measured
  processes — found by ``application_name`` (``PGAPPNAME``: one name for the workers, one for
  the schedulers) and sampled every half second — divided by the runs. The whole server's CPU
  (background writers, autovacuum, the benchmark's polling) is printed beside it. "runs/s per
  PostgreSQL core" is its inverse: runs one fully busy core serves.
- **statement time per run** and **claim efficiency** from pg_stat_statements (preloaded on
  the private server; absent on a server without it): the claim (the statements taking runs
  with ``FOR UPDATE … SKIP LOCKED`` and setting ``lease_owner``) — its calls, the rows it
  claimed per call and its time per claimed run. PostgreSQL counts no rows *skipped* by
  ``SKIP LOCKED``; contention shows as claims that come back with fewer rows than their
  workers asked for, so more calls per run and more claim time per run as processes are
  added. The scheduler's due-job lock (``jobs … FOR UPDATE SKIP LOCKED``) is reported the
  same way.
- **connections**: the most backends of the measured processes seen at once (sampled every
  half second), and per process.

``--private-port`` starts a PostgreSQL 15 of its own (initdb in ``--private-dir``, durable
defaults: fsync and synchronous_commit on; pg_stat_statements preloaded; max_connections
500), stopped at the end; without it the server of ``DUETIME_BENCH_PG_URL`` is used (a fresh
database per cell, dropped afterwards). Exits non-zero with the reason when a step fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from bench._common import (
    BENCH_TAG,
    PG_URL_ENV,
    BenchError,
    Spread,
    base_parser,
    check_alive,
    duetime_env,
    guarded_main,
    percentile,
    pg_stat_statements_ready,
    postgres_cpu_seconds,
    proc_cpu_seconds,
    report,
    spawn,
    stop_all,
    wait_for,
)
from bench.burndown import Database, _figures, _seed, _Waiter
from duetime.app import AsyncApp
from duetime.registration import JobSpec

PG_BIN = "/usr/lib/postgresql/15/bin"
WORKER_APP = "duetime-bench-worker"
SCHEDULER_APP = "duetime-bench-scheduler"
CONCURRENCY = 4
"""Each worker's concurrency in the worker cells: low, so processes (not slots) scale."""
SCHEDULER_CELL_WORKERS, SCHEDULER_CELL_CONCURRENCY = 4, 16
SAMPLE_S = 0.5
CLAIM = "query ILIKE '%%skip locked%%' AND query ILIKE '%%lease_owner%%'"
DUE_JOBS = "query ILIKE '%%from jobs%%skip locked%%'"
MEASURED_RUNS = "idempotency_key LIKE 'bench:%%'"


# --- a private server -------------------------------------------------------------------------


@contextlib.contextmanager
def private_server(port: int, base: Path) -> Iterator[str]:
    """A PostgreSQL 15 of this benchmark's own on ``port``, data under ``base`` (wiped
    first), stopped on the way out; yields its ``postgres`` database URL."""
    if not os.access(f"{PG_BIN}/initdb", os.X_OK):
        raise BenchError(f"--private-port needs PostgreSQL 15's initdb in {PG_BIN}")
    user = "postgres" if os.geteuid() == 0 else None
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    if user is not None:
        owner = pwd.getpwnam(user)
        os.chown(base, owner.pw_uid, owner.pw_gid)
    data = base / "data"

    def tool(*args: str) -> None:
        done = subprocess.run(
            [f"{PG_BIN}/{args[0]}", *args[1:]],
            capture_output=True, text=True, timeout=120, user=user, cwd="/tmp", check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise BenchError(f"{args[0]} failed: {(done.stderr or done.stdout).strip()[-500:]}")

    tool("initdb", "-D", str(data), "-U", "postgres", "--auth=trust")
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{base}'\n"
            "max_connections = 500\nshared_buffers = 256MB\n"
            "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.max = 1000\n"
        )
    started = False
    try:
        tool("pg_ctl", "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60", "start")
        started = True
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            tool("pg_ctl", "-D", str(data), "stop", "-m", "fast", "-w")


# --- measuring --------------------------------------------------------------------------------


class Meter:
    """The database work of the measured processes between :meth:`start` and :meth:`stop`:
    their backends' CPU per role (``application_name``), their peak connections, and (with
    pg_stat_statements) statement time and the claim's counts. The meter's own connection has
    another name, and its statements begin with ``BENCH_TAG``: neither is counted."""

    ROLES = (WORKER_APP, SCHEDULER_APP)

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.statements = pg_stat_statements_ready(url)
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.role: dict[int, str] = {}
        self.peak: dict[str, int] = {}
        self.server0 = 0.0

    def _backends(self) -> list[tuple[int, str]]:
        rows = self.conn.execute(
            f"{BENCH_TAG} SELECT pid, application_name FROM pg_stat_activity "
            "WHERE application_name = ANY(%s) AND datname = current_database()",
            (list(self.ROLES),),
        ).fetchall()
        return [(int(pid), str(name)) for pid, name in rows]

    def start(self) -> None:
        if self.statements:
            self.conn.execute(
                f"{BENCH_TAG} SELECT pg_stat_statements_reset(0, "
                "(SELECT oid FROM pg_database WHERE datname = current_database()), 0)"
            )
        self.base.clear()
        self.last.clear()
        self.peak = dict.fromkeys(self.ROLES, 0)
        for pid, name in self._backends():
            self.base[pid] = self.last[pid] = proc_cpu_seconds(pid)
            self.role[pid] = name
        self.server0 = postgres_cpu_seconds()

    def sample(self) -> None:
        counts = dict.fromkeys(self.ROLES, 0)
        for pid, name in self._backends():
            counts[name] += 1
            self.role[pid] = name
            cpu = proc_cpu_seconds(pid)
            self.base.setdefault(pid, 0.0)
            self.last[pid] = max(cpu, self.last.get(pid, 0.0))
        for name, count in counts.items():
            self.peak[name] = max(self.peak.get(name, 0), count)

    def stop(self) -> dict[str, float]:
        self.sample()
        out: dict[str, float] = {"server_cpu_s": postgres_cpu_seconds() - self.server0}
        for name in self.ROLES:
            out[f"cpu_s:{name}"] = sum(
                self.last[pid] - self.base[pid] for pid in self.last if self.role[pid] == name
            )
            out[f"peak:{name}"] = float(self.peak.get(name, 0))
        if self.statements:
            where = (
                "dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                f"AND query NOT LIKE '{BENCH_TAG}%%'"
            )
            for label, extra in (("all", "TRUE"), ("claim", CLAIM), ("due_jobs", DUE_JOBS)):
                row = self.conn.execute(
                    f"{BENCH_TAG} SELECT coalesce(sum(total_exec_time + total_plan_time), 0), "
                    f"coalesce(sum(calls), 0), coalesce(sum(rows), 0) FROM pg_stat_statements "
                    f"WHERE {where} AND {extra}"
                ).fetchone()
                assert row is not None
                out[f"ms:{label}"], out[f"calls:{label}"], out[f"rows:{label}"] = map(float, row)
        return out

    def close(self) -> None:
        self.conn.close()


def query(url: str, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(f"{BENCH_TAG} {text}", params or None)
        return cursor.fetchall() if cursor.description else []


def measured(app_name: str, **settings: object) -> dict[str, str]:
    env = duetime_env(**settings)
    env["PGAPPNAME"] = app_name
    return env


def duetime(role: str, env: dict[str, str]) -> Any:
    return spawn([sys.executable, "-m", "duetime", role, "--log-level", "warning"], env)


# --- the cells --------------------------------------------------------------------------------


def worker_cell(workers: int, runs: int, rounds: int, timeout: float) -> list[dict[str, float]]:
    """One worker cell: ``rounds`` burn-downs of ``runs`` runs by ``workers`` processes."""
    db = Database("postgres")
    procs: list[Any] = []
    waiter: _Waiter | None = None
    meter: Meter | None = None
    try:
        template, _ = asyncio.run(_seed(db.url, "noop"))
        db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
        env = measured(
            WORKER_APP, database_url=db.url, worker_concurrency=CONCURRENCY, worker_batch=100
        )
        procs = [duetime("worker", env) for _ in range(workers)]
        waiter = _Waiter(db)

        def registered() -> bool:
            check_alive(procs, "a worker")
            return int(db.query("SELECT count(*) FROM workers")[0][0]) >= workers

        wait_for(f"{workers} workers' registration", registered, 60 + 5 * workers, 0.5)
        wait_for("the template run", waiter.settled, 60, 0.25)
        meter = Meter(db.url)
        results = []
        for _ in range(rounds):
            db.clone_runs(template, runs, before_commit=meter.start)

            def tick() -> None:
                check_alive(procs, "a worker")
                assert meter is not None
                meter.sample()

            wait_for(f"burn-down of {runs:,} runs", waiter.settled, timeout, SAMPLE_S, tick)
            figures = meter.stop()
            succeeded, _, span = _figures(db)
            if succeeded != runs or span <= 0:
                raise BenchError(f"burn-down: {succeeded} of {runs} runs succeeded")
            figures |= {
                "runs": float(runs),
                "runs_per_s": succeeded / span,
                "processes": float(workers),
            }
            results.append(figures)
            db.query(f"DELETE FROM runs WHERE {MEASURED_RUNS}")
        return results
    finally:
        errors = stop_all(procs)
        if waiter is not None:
            waiter.close()
        if meter is not None:
            meter.close()
        db.drop()
        if errors:
            print("process errors:\n" + "\n".join(errors), file=sys.stderr)


async def _every_second_jobs(url: str, count: int) -> None:
    async with AsyncApp(url, migrate=False) as app:
        await app.schedule_many(
            JobSpec(name=f"bench.every.{i}", task="duetime.noop", every=1.0) for i in range(count)
        )


def scheduler_cell(
    schedulers: int, jobs: int, runs: int, window: float, rounds: int, timeout: float
) -> list[dict[str, float]]:
    """One scheduler cell: ``schedulers`` processes serving ``jobs`` every-second jobs, and a
    backlog of ``runs`` runs at the start of each ``window``, for ``rounds`` windows."""
    db = Database("postgres")
    procs: list[Any] = []
    meter: Meter | None = None
    try:
        template, _ = asyncio.run(_seed(db.url, "noop"))
        db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
        asyncio.run(_every_second_jobs(db.url, jobs))
        work = measured(
            WORKER_APP, database_url=db.url, worker_concurrency=SCHEDULER_CELL_CONCURRENCY,
            worker_batch=100,
        )  # fmt: skip
        procs = [duetime("worker", work) for _ in range(SCHEDULER_CELL_WORKERS)]
        plan = measured(SCHEDULER_APP, database_url=db.url)
        procs += [duetime("scheduler", plan) for _ in range(schedulers)]

        def every_job_fires() -> bool:
            check_alive(procs, "a worker or scheduler")
            row = db.query(
                "SELECT count(DISTINCT job_id) FROM runs WHERE job_name LIKE 'bench.every.%%' "
                "AND finished_at > now() - interval '2 seconds'"
            )
            return int(row[0][0]) >= jobs

        wait_for("every job firing", every_job_fires, 60 + 10 * schedulers, 0.5)
        meter = Meter(db.url)
        results = []
        for _ in range(rounds):
            figures = scheduler_round(db, meter, procs, template, runs, jobs, window)
            results.append(figures | {"processes": float(schedulers)})
            # the backlog's leftovers, if any, are gone before the next window
            wait_for("the backlog", lambda: not query(
                db.url, f"SELECT 1 FROM runs WHERE {MEASURED_RUNS} AND state IN "
                "('scheduled', 'running') LIMIT 1"), timeout, SAMPLE_S)  # fmt: skip
            db.query(f"DELETE FROM runs WHERE {MEASURED_RUNS}")
        return results
    finally:
        errors = stop_all(procs)
        if meter is not None:
            meter.close()
        db.drop()
        if errors:
            print("process errors:\n" + "\n".join(errors), file=sys.stderr)


def scheduler_round(
    db: Database, meter: Meter, procs: list[Any], template: str, runs: int, jobs: int,
    window: float,
) -> dict[str, float]:  # fmt: skip
    """One window of a scheduler cell: the backlog cloned, then ``window`` seconds."""
    t0: list[Any] = []

    def begin() -> None:
        meter.start()
        t0.append(query(db.url, "SELECT clock_timestamp()")[0][0])

    def tick() -> None:
        check_alive(procs, "a worker or scheduler")
        meter.sample()

    db.clone_runs(template, runs, before_commit=begin)
    ends = time.monotonic() + window
    wait_for("the window", lambda: time.monotonic() >= ends, window + 5, SAMPLE_S, tick)
    figures = meter.stop()
    t1 = query(db.url, "SELECT clock_timestamp()")[0][0]
    finished = query(
        db.url,
        "SELECT count(*) FROM runs WHERE state = 'succeeded' AND finished_at >= %s "
        "AND finished_at < %s",
        (t0[0], t1),
    )[0][0]
    # every occurrence of the window: its lag (start - scheduled instant), whether it had
    # not started 2 s after its instant, and the occurrences missing before it (gaps > 1 s)
    cron = query(
        db.url,
        "SELECT extract(epoch FROM started_at - scheduled_for) * 1000, "
        "started_at IS NULL AND scheduled_for < %s - interval '2 seconds', "
        "greatest(round(extract(epoch FROM scheduled_for - lag(scheduled_for) OVER "
        "(PARTITION BY job_id ORDER BY scheduled_for))) - 1, 0), scheduled_for >= %s "
        "FROM runs WHERE job_name LIKE 'bench.every.%%' AND scheduled_for < %s "
        "AND scheduled_for >= %s - interval '1 second'",
        (t1, t0[0], t1, t0[0]),
    )
    cron = [r for r in cron if r[3]]  # the second before the window only anchors the gaps
    span = (t1 - t0[0]).total_seconds()
    lags = [float(r[0]) for r in cron if r[0] is not None]
    return figures | {
        "runs": float(finished),
        "runs_per_s": finished / span,
        "cron_runs": float(len(cron)),
        "cron_late": float(sum(1 for r in cron if r[1])),
        "cron_missed": float(sum(int(r[2] or 0) for r in cron)),
        "lag_p50_ms": percentile(lags, 50),
        "lag_p95_ms": percentile(lags, 95),
    }


# --- reporting --------------------------------------------------------------------------------


def per_run(results: list[dict[str, float]], key: str, scale: float = 1e6) -> Spread | None:
    values = [r[key] / r["runs"] * scale for r in results if key in r and r["runs"]]
    return Spread.of(values) if values else None


def describe(kind: str, results: list[dict[str, float]], base_rate: float | None) -> str:
    processes = int(results[0]["processes"])
    rate = Spread.of([r["runs_per_s"] for r in results])
    role = WORKER_APP if kind == "workers" else SCHEDULER_APP
    pg_cpu = Spread.of(
        [(r[f"cpu_s:{WORKER_APP}"] + r[f"cpu_s:{SCHEDULER_APP}"]) / r["runs"] * 1e6
         for r in results]
    )  # fmt: skip
    per_core = 1e6 / pg_cpu.median if pg_cpu.median > 0 else float("nan")
    peak_workers = max(r[f"peak:{WORKER_APP}"] for r in results)
    peak_schedulers = max(r[f"peak:{SCHEDULER_APP}"] for r in results)
    count = processes if kind == "workers" else SCHEDULER_CELL_WORKERS
    parts = [
        f"{processes:>2} {kind:<10} runs/s {rate.show()}",
        f"x{rate.median / base_rate:.2f} of the first cell" if base_rate else "first cell",
        f"PostgreSQL CPU {pg_cpu.show(',.0f')} us/run (backends of the measured processes; "
        f"runs/s per busy core ~{per_core:,.0f})",
        f"whole server CPU {per_run(results, 'server_cpu_s').show(',.0f')} us/run",  # type: ignore[union-attr]
        f"connections peak: workers {peak_workers:.0f} ({peak_workers / count:.1f}/process)"
        + (
            f", schedulers {peak_schedulers:.0f} ({peak_schedulers / processes:.1f}/process)"
            if kind == "schedulers"
            else ""
        ),
    ]
    if kind == "schedulers":
        occurrences = sum(r["cron_runs"] for r in results)
        missed = sum(r["cron_missed"] for r in results)
        late = sum(r["cron_late"] for r in results)
        lag50 = Spread.of([r["lag_p50_ms"] for r in results])
        lag95 = Spread.of([r["lag_p95_ms"] for r in results])
        sched_cpu = Spread.of([r[f"cpu_s:{role}"] / r["cron_runs"] * 1e6 for r in results])
        parts.append(
            f"every-second occurrences {occurrences:,.0f}: missed {missed:.0f}, not started 2 s "
            f"after their instant {late:.0f}; fire lag "
            f"p50 {lag50.show('.1f')} ms p95 {lag95.show('.1f')} ms, scheduler backends "
            f"{sched_cpu.show(',.0f')} us per occurrence"
        )
    if all("calls:claim" in r for r in results):
        per_call = Spread.of(
            [r["rows:claim"] / r["calls:claim"] for r in results if r["calls:claim"]]
        )
        claim_us = per_run(results, "ms:claim", 1e3)
        calls = per_run(results, "calls:claim", 1.0)
        statements = per_run(results, "ms:all", 1e3)
        parts.append(
            f"claim: {per_call.show('.1f')} runs per call, {calls.show('.2f') if calls else '?'} "
            f"calls/run, {claim_us.show(',.0f') if claim_us else '?'} us/run; all statements "
            f"{statements.show(',.0f') if statements else '?'} us/run"
        )
        if kind == "schedulers":
            jobs_ms = per_run(results, "ms:due_jobs", 1e3)
            parts.append(f"due-job lock {jobs_ms.show(',.0f') if jobs_ms else '?'} us/run")
    return "; ".join(parts)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2,8,32", help="worker cells: process counts")
    parser.add_argument("--schedulers", default="1,2,4", help="scheduler cells: process counts")
    parser.add_argument("--runs", type=int, default=6000, help="runs per burn-down")
    parser.add_argument("--backlog", type=int, default=40000, help="scheduler cells' backlog")
    parser.add_argument("--jobs", type=int, default=100, help="every-second jobs")
    parser.add_argument("--window", type=float, default=10.0, help="scheduler cells' window, s")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per burn-down")
    parser.add_argument("--private-port", type=int, help="start a PostgreSQL of its own there")
    parser.add_argument("--private-dir", type=Path, help="its data (default: a temp directory)")
    args = parser.parse_args()
    if min(args.runs, args.backlog, args.jobs, args.rounds) < 1 or args.window <= 0:
        raise BenchError("--runs, --backlog, --jobs, --rounds must be at least 1, --window > 0")
    workers = [int(n) for n in args.workers.split(",") if n]
    schedulers = [int(n) for n in args.schedulers.split(",") if n]
    with contextlib.ExitStack() as stack:
        if args.private_port is not None:
            base = args.private_dir or Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="duetime-scaleout-"))
            )
            url = stack.enter_context(private_server(args.private_port, base))
            os.environ[PG_URL_ENV] = url
        lines: list[str] = []
        base_rate: float | None = None
        for count in workers:
            results = worker_cell(count, args.runs, args.rounds, args.timeout)
            lines.append(describe("workers", results, base_rate))
            base_rate = base_rate or statistics.median(r["runs_per_s"] for r in results)
            print(lines[-1], flush=True)
        base_rate = None
        for count in schedulers:
            results = scheduler_cell(
                count, args.jobs, args.backlog, args.window, args.rounds, args.timeout
            )
            lines.append(describe("schedulers", results, base_rate))
            base_rate = base_rate or statistics.median(r["runs_per_s"] for r in results)
            print(lines[-1], flush=True)
        lines.append(
            f"worker cells: concurrency {CONCURRENCY} per process, {args.runs:,} no-op runs per "
            f"burn-down; scheduler cells: {args.jobs} every-second jobs + {args.backlog:,} backlog "
            f"runs per {args.window:.0f} s window, {SCHEDULER_CELL_WORKERS} workers x "
            f"{SCHEDULER_CELL_CONCURRENCY}; {args.rounds} round(s) per cell, median (low-high)"
        )
        report("scale-out (postgres, one primary)", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
