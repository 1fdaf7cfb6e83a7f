"""Burn-down: N runs already due, drained by real `duetime worker` processes.

    python -m bench.burndown                       # PostgreSQL, 100,000 no-op runs, 1 and 2 workers
    python -m bench.burndown --store sqlite --runs 20000
    python -m bench.burndown --task sleep1ms       # a task that sleeps 1 ms (sustained)
    python -m bench.burndown --sweep               # try worker settings, print the best
    python -m bench.burndown --profile bench/profiles   # py-spy the first worker

The runs are cloned in one SQL statement from a run made by ``app.trigger`` (a manual run with
its own idempotency key each), while the workers are already up and idle. runs/s is measured
from the database: succeeded runs / (last ``finished_at`` − first ``claimed_at``). Each run
keeps its attempt record and its fenced completion. The enqueue rate on its own is the clone
statement's rate and, for the product path, ``app.trigger`` one run at a time.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench._common import (
    CpuMeter,
    Spread,
    base_parser,
    create_database,
    drop_database,
    duetime_env,
    exit_on_sigterm,
    migrate,
    report,
    spawn,
    stop_all,
    wait_until,
)
from duetime.app import AsyncApp

TASKS = {
    "noop": ("duetime.noop", None),
    "sleep1ms": ("duetime.sleep", {"seconds": 0.001}),
}
DEFAULTS = {
    "postgres": {"concurrency": 1000, "batch": 500},
    "sqlite": {"concurrency": 500, "batch": 500},
}


FRESH = {
    "state": "'scheduled'",
    "token": "0",
    "attempt": "0",
    **dict.fromkeys(
        "lease_owner lease_expires_at claimed_at started_at finished_at reason "
        "last_error_class last_error_message".split(),
        "NULL",
    ),
}
"""Columns of a cloned run that make it a fresh, due run whatever the template went through."""


class Database:
    """A benchmark database: a fresh PostgreSQL database or SQLite file, with raw SQL access."""

    def __init__(self, store: str) -> None:
        self.store = store
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if store == "postgres":
            self.url = create_database("burn")
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="duetime-bench-")
            self.url = str(Path(self._tmp.name) / "bench.db")
        try:
            migrate(self.url)
        except BaseException:
            self.drop()
            raise

    def query(self, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.store == "postgres":
            with psycopg.connect(self.url, autocommit=True) as conn:
                sql_text = text.replace("?", "%s")
                cur = conn.execute(sql_text, params or None)  # type: ignore[arg-type]
                return cur.fetchall() if cur.description else []
        with sqlite3.connect(self.url, timeout=60) as conn:
            return conn.execute(text, params).fetchall()

    def drop(self) -> None:
        if self.store == "postgres":
            drop_database(self.url)
        elif self._tmp is not None:
            self._tmp.cleanup()

    def columns(self, table: str) -> list[str]:
        if self.store == "postgres":
            rows = self.query(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "AND table_schema = current_schema() ORDER BY ordinal_position",
                (table,),
            )
            return [r[0] for r in rows]
        return [r[1] for r in self.query(f"PRAGMA table_info({table})")]

    def clone_runs(self, template: str, count: int) -> float:
        """``count`` copies of run ``template`` (new id and idempotency key each), one
        transaction; returns the seconds it took."""
        if count <= 0:
            return 0.0
        cols = self.columns("runs")
        if self.store == "postgres":
            exprs = {**FRESH, "id": "gen_random_uuid()", "idempotency_key": "'bench:' || g"}
            select = ", ".join(exprs.get(c, f"r.{c}") for c in cols)
            text = (
                f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} FROM runs r "
                "CROSS JOIN generate_series(1, %s) g WHERE r.id = %s"
            )
            started = time.perf_counter()
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(text, (count, template))  # type: ignore[arg-type]
                conn.execute("SELECT pg_notify('duetime_runs', '')")
            return time.perf_counter() - started
        h = "lower(hex(randomblob(16)))"
        uuid_expr = (
            "substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || substr(h, 13, 4) || '-' || "
            "substr(h, 17, 4) || '-' || substr(h, 21, 12)"
        )
        exprs = {**FRESH, "id": uuid_expr, "idempotency_key": "'bench:' || g.i"}
        select = ", ".join(exprs.get(c, f"r.{c}") for c in cols)
        text = (
            "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) "
            f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} "
            f"FROM (SELECT *, {h} AS h FROM g) g, runs r WHERE r.id = ?"
        )
        started = time.perf_counter()
        with sqlite3.connect(self.url, timeout=60) as conn:
            conn.execute(text, (count, template))
        return time.perf_counter() - started


async def _seed(url: str, task: str) -> tuple[str, float]:
    """One job and one manual run of it (the template); also times ``app.trigger``."""
    name, payload = TASKS[task]
    async with AsyncApp(url, migrate=False) as app:
        # independent runs of one job: overlap "allow" (the default "skip" serializes them)
        for job in ("bench.burn", "bench.trigger"):
            await app.schedule(job, task=name, cron="0 0 1 1 *", payload=payload, overlap="allow")
        run = await app.trigger("bench.burn")
        count = 300
        started = time.perf_counter()
        for _ in range(count):
            await app.trigger("bench.trigger")
        trigger_rate = count / (time.perf_counter() - started)
    return str(run.id), trigger_rate


def _finished(db: Database) -> bool:
    row = db.query("SELECT count(*) FROM runs WHERE state IN ('scheduled', 'running')")
    return row[0][0] == 0


def duetime_burndown(
    store: str,
    runs: int,
    workers: int,
    *,
    task: str = "noop",
    concurrency: int | None = None,
    batch: int | None = None,
    profile: Path | None = None,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """One burn-down; returns its figures (runs_per_s, enqueue rates, CPU per run)."""
    concurrency = concurrency or DEFAULTS[store]["concurrency"]
    batch = batch or DEFAULTS[store]["batch"]
    db = Database(store)
    procs: list[subprocess.Popen[bytes]] = []
    spy: subprocess.Popen[bytes] | None = None
    try:
        template, trigger_rate = asyncio.run(_seed(db.url, task))
        # the trigger-rate runs are not part of the burn-down
        db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
        env = duetime_env(
            database_url=db.url,
            worker_concurrency=concurrency,
            worker_batch=batch,
            worker_poll_interval=0.2,
        )
        procs = [
            spawn([sys.executable, "-m", "duetime", "worker", "--log-level", "warning"], env)
            for _ in range(workers)
        ]
        if not wait_until(lambda: db.query("SELECT count(*) FROM workers")[0][0] >= workers, 60):
            raise RuntimeError("workers did not register: " + "\n".join(stop_all(procs)))
        # the template run may already be done: count it either way
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            out = profile / f"burndown-{store}-{task}-w{workers}.txt"
            spy = subprocess.Popen(
                ["py-spy", "record", "-p", str(procs[0].pid), "-r", "250", "-f", "raw",
                 "-o", str(out)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1.0)
        meter = CpuMeter([p.pid for p in procs])
        enqueue_s = db.clone_runs(template, runs - 1)
        if not wait_until(lambda: _finished(db), timeout, 0.3):
            raise RuntimeError(f"burn-down did not finish within {timeout:.0f} s")
        cpu = meter.stop()
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        if store == "postgres":
            row = db.query(
                "SELECT count(*) FILTER (WHERE state = 'succeeded'), "
                "extract(epoch FROM max(finished_at) - min(claimed_at)) FROM runs "
                "WHERE job_name = 'bench.burn'"
            )[0]
            succeeded, span = int(row[0]), float(row[1])
        else:
            row = db.query(
                "SELECT sum(state = 'succeeded'), max(finished_at) - min(claimed_at) FROM runs "
                "WHERE job_name = 'bench.burn'"
            )[0]
            succeeded, span = int(row[0]), row[1] / 1e6
        attempts = db.query("SELECT count(*) FROM attempts")[0][0]
        errors = stop_all(procs)
        procs = []
        if errors:
            print("worker errors:\n" + "\n".join(errors), file=sys.stderr)
        if succeeded != runs or attempts < runs:
            raise RuntimeError(f"expected {runs} succeeded runs, got {succeeded} ({attempts} att)")
        return {
            "store": store,
            "task": task,
            "workers": workers,
            "concurrency": concurrency,
            "batch": batch,
            "runs": runs,
            "runs_per_s": succeeded / span,
            "span_s": span,
            "enqueue_per_s": (runs - 1) / enqueue_s if enqueue_s else float("nan"),
            "trigger_per_s": trigger_rate,
            "pg_cpu_us_per_run": cpu["pg_cpu_s"] / runs * 1e6,
            "worker_cpu_us_per_run": cpu["app_cpu_s"] / runs * 1e6,
        }
    finally:
        if spy is not None and spy.poll() is None:
            spy.kill()
        stop_all(procs)
        db.drop()


def describe(result: dict[str, Any]) -> str:
    return (
        f"{result['store']} {result['task']} workers={result['workers']} "
        f"concurrency={result['concurrency']} batch={result['batch']} N={result['runs']}: "
        f"{result['runs_per_s']:,.0f} runs/s; worker CPU {result['worker_cpu_us_per_run']:.0f} "
        f"µs/run, PostgreSQL CPU {result['pg_cpu_us_per_run']:.0f} µs/run"
    )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2", help="comma-separated process counts")
    parser.add_argument("--task", choices=sorted(TASKS), default="noop")
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sweep", action="store_true", help="try concurrency x batch settings")
    parser.add_argument("--profile", type=Path, help="py-spy the first worker into this folder")
    args = parser.parse_args()
    exit_on_sigterm()
    worker_counts = [int(w) for w in args.workers.split(",")]
    lines: list[str] = []
    if args.sweep:
        for concurrency in (200, 1000, 2000):
            for batch in (100, 500, 1000):
                if batch > concurrency:
                    continue
                r = duetime_burndown(
                    args.store, args.runs, max(worker_counts), task=args.task,
                    concurrency=concurrency, batch=batch,
                )  # fmt: skip
                lines.append(describe(r))
                print(lines[-1], flush=True)
        report(f"burn-down sweep ({args.store}, {args.task})", lines, record=args.record)
        return
    for workers in worker_counts:
        results = []
        for _ in range(args.repeat):
            r = duetime_burndown(
                args.store, args.runs, workers, task=args.task,
                concurrency=args.concurrency, batch=args.batch, profile=args.profile,
            )  # fmt: skip
            print("  " + describe(r), flush=True)
            results.append(r)
        rate = Spread.of([r["runs_per_s"] for r in results])
        last = results[-1]
        lines.append(
            f"duetime {args.store} {args.task}, {workers} worker process(es) "
            f"(concurrency={last['concurrency']}, batch={last['batch']}), N={args.runs:,}: "
            f"{rate.show()} runs/s; worker CPU "
            f"{Spread.of([r['worker_cpu_us_per_run'] for r in results]).show('.0f')} µs/run, "
            f"PostgreSQL CPU {Spread.of([r['pg_cpu_us_per_run'] for r in results]).show('.0f')}"
            " µs/run"
        )
    enqueue = Spread.of([r["enqueue_per_s"] for r in results])
    trigger = Spread.of([r["trigger_per_s"] for r in results])
    lines.append(f"enqueue on its own ({args.store}): bulk clone {enqueue.show()} runs/s")
    lines.append(f"enqueue on its own ({args.store}): app.trigger one at a time {trigger.show()}/s")
    report(f"burn-down ({args.store}, {args.task})", lines, record=args.record)


if __name__ == "__main__":
    main()
