"""Burn-down: N runs already due, drained by real `duetime worker` processes.

    python -m bench.burndown                       # PostgreSQL, 100,000 no-op runs, 1 and 2 workers
    python -m bench.burndown --mix realistic       # 20 tenants x 5 queues x 3 priorities
    python -m bench.burndown --defaults            # `duetime worker` with no settings at all
    python -m bench.burndown --store sqlite --runs 20000
    python -m bench.burndown --task sleep1ms       # a task that sleeps 1 ms (sustained)
    python -m bench.burndown --sweep               # try worker settings, print the best
    python -m bench.burndown --profile bench/profiles   # py-spy the first worker

A template run is made by ``app.trigger`` and run by the workers, which are then idle. The N
measured runs are cloned from it in one SQL statement (new id, idempotency key ``bench:<i>``);
the template is never measured. Mixes: ``uniform`` (every run of one job, one tenant, queue,
priority and ``available_at``: the easiest claim) and ``realistic`` (runs of 300 jobs over 20
tenants x 5 queues x 3 priorities, each with its own ``available_at`` spread over the last
minute).

runs/s = succeeded measured runs / (last ``finished_at`` − first ``claimed_at`` of a measured
run), from the database. Each run keeps its attempt record and its fenced completion.

CPU: the window opens after the clone statement ran and before it commits (so the insert is
not counted, and every claim is), and closes when nothing is left. Worker CPU is the worker
processes' (``/proc``). PostgreSQL CPU is that of the backends serving the workers, found by
their ``application_name`` (see ``BackendMeter`` in bench/_common.py); with pg_stat_statements
preloaded on the server, also its statement time, WAL bytes and buffers per run. The whole
server's CPU is printed beside it (it includes background writers and anything else running
on that server). While waiting, the benchmark asks one cheap question per second on its own
connection (is any run still scheduled or running: two index probes, ``LIMIT 1``) — not a
``count(*)`` — and its own backend is never in the figures.

Exits non-zero with the reason when a step fails (workers that do not start, runs that do not
finish in ``--timeout`` seconds, fewer succeeded runs than N).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench._common import (
    BENCH_TAG,
    BackendMeter,
    BenchError,
    CpuMeter,
    Spread,
    base_parser,
    check_alive,
    create_database,
    drop_database,
    guarded_main,
    measured_env,
    migrate,
    report,
    spawn,
    stop_all,
    wait_for,
)
from duetime.app import AsyncApp
from duetime.registration import JobSpec

TASKS = {
    "noop": ("duetime.noop", None),
    "sleep1ms": ("duetime.sleep", {"seconds": 0.001}),
}
DEFAULTS = {
    "postgres": {"concurrency": 1000, "batch": 500},
    "sqlite": {"concurrency": 500, "batch": 500},
}
MIXES = ("uniform", "realistic")
MIX_TENANTS, MIX_QUEUES, MIX_PRIORITIES = 20, 5, (0, 5, 10)
"""The realistic mix: one job per (tenant, queue, priority), 300 jobs."""
MIX_SPREAD_S = 60
"""The realistic mix's ``available_at`` instants lie within this many seconds before now."""
MEASURED = "idempotency_key LIKE 'bench:%'"
"""The measured runs (the clones); the template and anything else are not."""


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

MIX_COLUMNS = {
    "job_id": "j.id",
    "tenant": "j.tenant",
    "job_name": "j.name",
    "queue": "j.queue",
    "priority": "j.priority",
    "partition_key": "j.partition_key",
}
"""Columns a realistic-mix clone takes from its job instead of the template."""


def _mix_jobs(prefix: str) -> str:
    """SQL: the realistic mix's jobs numbered ``k`` = 0 … ``n`` − 1."""
    return (
        "(SELECT jobs.*, row_number() OVER (ORDER BY name) - 1 AS k, count(*) OVER () AS n "
        f"FROM jobs WHERE substr(name, 1, {len(prefix)}) = '{prefix}') j"
    )


class Database:
    """A benchmark database: a fresh PostgreSQL database or SQLite file, with raw SQL access."""

    def __init__(self, store: str, *, url: str | None = None) -> None:
        """A fresh database, migrated; or, given ``url``, that existing PostgreSQL database
        as it is (dropped by :meth:`drop` all the same)."""
        self.store = store
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if url is not None:
            self.url = url
            return
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

    def query(
        self, text: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        if self.store == "postgres":
            with psycopg.connect(self.url, autocommit=True) as conn:
                sql_text = text.replace("?", "%s")
                cur = conn.execute(sql_text, params or None)
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

    def clone_runs(
        self,
        template: str,
        count: int,
        *,
        mix: str = "uniform",
        before_commit: Callable[[], None] | None = None,
    ) -> float:
        """``count`` copies of run ``template`` (new id, idempotency key ``bench:<i>``), one
        transaction; returns the seconds the statement took. ``mix="realistic"`` spreads them
        over the jobs named ``bench.mix.*`` (see :data:`MIX_COLUMNS`) with distinct
        ``available_at`` = ``scheduled_for`` instants over the last :data:`MIX_SPREAD_S`
        seconds. ``before_commit`` runs after the statement and before its commit (it is
        where a measurement starts: the insert is not measured, every claim of a clone is)."""
        if count <= 0:
            return 0.0
        cols = self.columns("runs")
        realistic = mix == "realistic"
        if self.store == "postgres":
            exprs = {**FRESH, "id": "gen_random_uuid()", "idempotency_key": "'bench:' || g"}
            source = "FROM runs r CROSS JOIN generate_series(1, %(count)s) g"
            if realistic:
                instant = (
                    f"statement_timestamp() - interval '{MIX_SPREAD_S} seconds' * "
                    "(((g::bigint * 7919) %% %(count)s)::float8 / %(count)s)"
                )
                exprs |= MIX_COLUMNS | {"available_at": instant, "scheduled_for": instant}
                source += f" JOIN {_mix_jobs('bench.mix.')} ON j.k = g %% j.n"
            select = ", ".join(exprs.get(c, f"r.{c}") for c in cols)
            text = (
                f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} {source} "
                "WHERE r.id = %(template)s"
            )
            with psycopg.connect(self.url) as conn:
                started = time.perf_counter()
                conn.execute(text, {"count": count, "template": template})
                conn.execute("SELECT pg_notify('duetime_runs', '')")
                took = time.perf_counter() - started
                if before_commit is not None:
                    before_commit()
                conn.commit()
            return took
        h = "lower(hex(randomblob(16)))"
        uuid_expr = (
            "substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || substr(h, 13, 4) || '-' || "
            "substr(h, 17, 4) || '-' || substr(h, 21, 12)"
        )
        exprs = {**FRESH, "id": uuid_expr, "idempotency_key": "'bench:' || g.i"}
        source = f"FROM (SELECT *, {h} AS h FROM g) g, runs r"
        if realistic:
            now_us = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"
            instant = f"{now_us} - ((g.i * 7919) % :count) * {MIX_SPREAD_S * 1_000_000} / :count"
            exprs |= MIX_COLUMNS | {"available_at": instant, "scheduled_for": instant}
            source += f" JOIN {_mix_jobs('bench.mix.')} ON j.k = g.i % j.n"
        select = ", ".join(exprs.get(c, f"r.{c}") for c in cols)
        text = (
            "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :count) "
            f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} {source} "
            "WHERE r.id = :template"
        )
        # explicit transaction: the sqlite3 module opens none before a statement led by WITH
        lite = sqlite3.connect(self.url, timeout=60, isolation_level=None)
        try:
            lite.execute("BEGIN IMMEDIATE")
            started = time.perf_counter()
            lite.execute(text, {"count": count, "template": template})
            took = time.perf_counter() - started
            if before_commit is not None:
                before_commit()
            lite.execute("COMMIT")
        finally:
            lite.close()
        return took


async def _seed(url: str, task: str, mix: str = "uniform") -> tuple[str, float]:
    """One job and one manual run of it (the template); also times ``app.trigger``. The
    realistic mix also registers its jobs (one per tenant, queue and priority)."""
    name, payload = TASKS[task]
    async with AsyncApp(url, migrate=False) as app:
        # independent runs of one job: overlap "allow" (the default "skip" serializes them)
        for job in ("bench.burn", "bench.trigger"):
            await app.schedule(job, task=name, cron="0 0 1 1 *", payload=payload, overlap="allow")
        if mix == "realistic":
            for t in range(MIX_TENANTS):
                tenant = f"bench-t{t:02d}"
                await app.for_tenant(tenant).schedule_many(
                    JobSpec(
                        name=f"bench.mix.{tenant}.q{q}.p{p}", task=name, cron="0 0 1 1 *",
                        payload=payload, overlap="allow", queue=f"q{q}", priority=p,
                    )
                    for q in range(MIX_QUEUES)
                    for p in MIX_PRIORITIES
                )  # fmt: skip
        run = await app.trigger("bench.burn")
        count = 300
        started = time.perf_counter()
        for _ in range(count):
            await app.trigger("bench.trigger")
        trigger_rate = count / (time.perf_counter() - started)
    return str(run.id), trigger_rate


class _Waiter:
    """The benchmark's own question "is anything left?", on one connection kept open: two
    ``LIMIT 1`` probes of the partial indexes on scheduled and running runs, asked once a
    second (the burn-down's span and rate come from the database's timestamps, not from
    when this notices the end)."""

    QUESTION = (
        f"{BENCH_TAG} SELECT EXISTS (SELECT 1 FROM runs WHERE state = 'scheduled') "
        "OR EXISTS (SELECT 1 FROM runs WHERE state = 'running')"
    )

    def __init__(self, db: Database) -> None:
        self.db = db
        self._pg = psycopg.connect(db.url, autocommit=True) if db.store == "postgres" else None
        self._lite = sqlite3.connect(db.url, timeout=60) if db.store == "sqlite" else None

    def settled(self) -> bool:
        if self._pg is not None:
            row = self._pg.execute(self.QUESTION).fetchone()
        else:
            assert self._lite is not None
            row = self._lite.execute(self.QUESTION).fetchone()
        return row is not None and not row[0]

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self._lite is not None:
            self._lite.close()


def _figures(db: Database) -> tuple[int, int, float]:
    """(succeeded measured runs, their attempts, seconds from the first claim of a measured
    run to the last finish of one)."""
    if db.store == "postgres":
        row = db.query(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), "
            "extract(epoch FROM max(finished_at) - min(claimed_at)) FROM runs "
            f"WHERE {MEASURED.replace('%', '%%')}"
        )[0]
        attempts = db.query(
            "SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id "
            f"WHERE r.{MEASURED.replace('%', '%%')}"
        )[0][0]
        return int(row[0]), int(attempts), float(row[1] or 0.0)
    row = db.query(
        "SELECT sum(state = 'succeeded'), max(finished_at) - min(claimed_at) FROM runs "
        f"WHERE {MEASURED}"
    )[0]
    attempts = db.query(
        f"SELECT count(*) FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.{MEASURED}"
    )[0][0]
    return int(row[0] or 0), int(attempts), (row[1] or 0) / 1e6


def duetime_burndown(
    store: str,
    runs: int,
    workers: int,
    *,
    task: str = "noop",
    concurrency: int | None = None,
    batch: int | None = None,
    defaults: bool = False,
    mix: str = "uniform",
    profile: Path | None = None,
    timeout: float = 600.0,
    prepare: Callable[[Database], None] | None = None,
    alongside: Callable[[Database], Callable[[], dict[str, float]]] | None = None,
    database: Callable[[], tuple[Database, str]] | None = None,
) -> dict[str, Any]:
    """One burn-down of ``runs`` measured runs; returns its figures (runs_per_s, enqueue
    rates, CPU per run). ``defaults``: the workers get no settings at all (the product's
    defaults) instead of the benchmark's. ``prepare`` fills the database before the workers
    start; ``alongside`` starts something that runs during the burn-down (from just before
    the measured runs exist) and returns how to stop it, whose figures join the result.
    ``database`` instead gives a database seeded already (the job, its template run and
    whatever ``prepare`` would add) and the template run's id: no seeding, no trigger rate.
    Raises :class:`BenchError` when a step fails."""
    if defaults:
        settings: dict[str, object] = {}
    else:
        settings = {
            "worker_concurrency": concurrency or DEFAULTS[store]["concurrency"],
            "worker_batch": batch or DEFAULTS[store]["batch"],
            "worker_poll_interval": 0.2,
        }
    if database is not None:
        db, template = database()
    else:
        db = Database(store)
    procs: list[subprocess.Popen[bytes]] = []
    spy: subprocess.Popen[bytes] | None = None
    waiter: _Waiter | None = None
    backends: BackendMeter | None = None
    stop_alongside: Callable[[], dict[str, float]] | None = None
    try:
        trigger_rate = float("nan")
        if database is None:
            template, trigger_rate = asyncio.run(_seed(db.url, task, mix))
            # the trigger-rate runs are not part of the burn-down
            db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
            if prepare is not None:
                prepare(db)
        env = measured_env(database_url=db.url, **settings)
        procs = [
            spawn([sys.executable, "-m", "duetime", "worker", "--log-level", "warning"], env)
            for _ in range(workers)
        ]
        waiter = _Waiter(db)

        def registered() -> bool:
            check_alive(procs, "a worker")
            return int(db.query("SELECT count(*) FROM workers")[0][0]) >= workers

        wait_for("the workers' registration", registered, 60, 0.25)
        wait_for("the template run", waiter.settled, 60, 0.25)  # the workers are idle now
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
        if store == "postgres":
            backends = BackendMeter(db.url)
        meters: list[CpuMeter] = []

        def start_measuring() -> None:
            if backends is not None:
                backends.start()
            meters.append(CpuMeter([p.pid for p in procs]))

        stop_alongside = alongside(db) if alongside is not None else None
        enqueue_s = db.clone_runs(template, runs, mix=mix, before_commit=start_measuring)

        def tick() -> None:
            check_alive(procs, "a worker")
            if backends is not None:
                backends.sample()

        wait_for(f"burn-down of {runs:,} runs", waiter.settled, timeout, 1.0, tick)
        cpu = meters[0].stop()
        db_cpu = backends.stop() if backends is not None else {}
        beside = stop_alongside() if stop_alongside is not None else {}
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        if os.environ.get("DUETIME_BENCH_STATEMENTS") and store == "postgres":
            print_statements(db)
        succeeded, attempts, span = _figures(db)
        errors = stop_all(procs)
        procs = []
        if errors:
            print("worker errors:\n" + "\n".join(errors), file=sys.stderr)
        if succeeded != runs or attempts < runs or span <= 0:
            raise BenchError(
                f"burn-down: expected {runs} succeeded runs, got {succeeded} "
                f"({attempts} attempts, span {span:.3f} s)"
            )
        result: dict[str, Any] = {
            "store": store,
            "task": task,
            "mix": mix,
            "workers": workers,
            "settings": "product defaults" if defaults else "benchmark settings",
            "concurrency": settings.get("worker_concurrency", "default"),
            "batch": settings.get("worker_batch", "default"),
            "runs": runs,
            "runs_per_s": succeeded / span,
            "span_s": span,
            "enqueue_per_s": runs / enqueue_s if enqueue_s else float("nan"),
            "trigger_per_s": trigger_rate,
            "server_cpu_us_per_run": cpu["pg_cpu_s"] / runs * 1e6,
            "worker_cpu_us_per_run": cpu["app_cpu_s"] / runs * 1e6,
        }
        result.update(beside)
        if "backend_cpu_s" in db_cpu:
            result["pg_cpu_us_per_run"] = db_cpu["backend_cpu_s"] / runs * 1e6
        if "statements_s" in db_cpu:
            result["pg_statements_us_per_run"] = db_cpu["statements_s"] / runs * 1e6
            result["wal_bytes_per_run"] = db_cpu["wal_bytes"] / runs
            result["buffers_per_run"] = db_cpu["buffers"] / runs
        return result
    finally:
        if spy is not None and spy.poll() is None:
            spy.kill()
        if stop_alongside is not None:
            stop_alongside()  # idempotent: a second call after the figures changes nothing
        stop_all(procs)
        if waiter is not None:
            waiter.close()
        if backends is not None:
            backends.close()
        db.drop()


def statements_shown() -> int:
    """How many statements DUETIME_BENCH_STATEMENTS asks for: its value when a number above
    1 (``DUETIME_BENCH_STATEMENTS=20``), else 8."""
    value = os.environ.get("DUETIME_BENCH_STATEMENTS", "")
    return int(value) if value.isdigit() and int(value) > 1 else 8


def print_statements(db: Database) -> None:
    """With DUETIME_BENCH_STATEMENTS set: the measured statements that took longest, and
    what autovacuum did to ``runs`` meanwhile (to stderr; not a figure of the benchmark)."""
    rows = db.query(
        "SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 2), "
        "rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) FROM pg_stat_statements "
        "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"ORDER BY total_exec_time DESC LIMIT {statements_shown()}"
    )
    for calls, total, mean, count, text in rows:
        print(f"  {calls:>6} calls {total:>9} ms (mean {mean} ms) {count:>7} rows  {text}",
              file=sys.stderr)  # fmt: skip
    vac = db.query(
        "SELECT autovacuum_count, autoanalyze_count, n_dead_tup FROM pg_stat_user_tables "
        "WHERE relname = 'runs'"
    )
    print(f"  runs: autovacuums {vac[0][0]}, autoanalyzes {vac[0][1]}, dead {vac[0][2]}",
          file=sys.stderr)  # fmt: skip


def settings_label(result: dict[str, Any]) -> str:
    if result.get("settings") == "product defaults":
        return "product defaults"
    return f"concurrency={result['concurrency']}, batch={result['batch']}"


def cpu_text(results: list[dict[str, Any]], who: str = "worker") -> str:
    """CPU of the processes measured (``who``) and PostgreSQL's per run, medians with the
    spread, from the figures all of ``results`` have (burn-downs, minimal scripts, one-shots)."""

    def spread(key: str, fmt: str = ".0f") -> str:
        return Spread.of([r[key] for r in results]).show(fmt)

    text = f"{who} CPU {spread('worker_cpu_us_per_run')} µs/run"
    if all("pg_cpu_us_per_run" in r for r in results):
        text += f", PostgreSQL backends CPU {spread('pg_cpu_us_per_run')} µs/run"
    if all("pg_statements_us_per_run" in r for r in results):
        text += (
            f", statement time {spread('pg_statements_us_per_run', '.1f')} µs/run, WAL "
            f"{spread('wal_bytes_per_run')} B/run, {spread('buffers_per_run', '.1f')} "
            "buffers/run (pg_stat_statements)"
        )
    if all("server_cpu_us_per_run" in r for r in results) and results[0].get("store") != "sqlite":
        text += f"; whole server CPU {spread('server_cpu_us_per_run')} µs/run"
    return text


def describe(result: dict[str, Any]) -> str:
    return (
        f"{result['store']} {result['task']} {result['mix']} workers={result['workers']} "
        f"{settings_label(result)} N={result['runs']}: "
        f"{result['runs_per_s']:,.0f} runs/s; {cpu_text([result])}"
    )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2", help="comma-separated process counts")
    parser.add_argument("--task", choices=sorted(TASKS), default="noop")
    parser.add_argument("--mix", choices=MIXES, default="uniform")
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument(
        "--defaults", action="store_true", help="workers with no settings (the product's defaults)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per burn-down")
    parser.add_argument("--sweep", action="store_true", help="try concurrency x batch settings")
    parser.add_argument("--profile", type=Path, help="py-spy the first worker into this folder")
    args = parser.parse_args()
    if args.runs < 1 or args.repeat < 1:
        raise BenchError("--runs and --repeat must be at least 1")
    if args.defaults and (args.concurrency or args.batch or args.sweep):
        raise BenchError("--defaults takes no --concurrency, --batch or --sweep")
    worker_counts = [int(w) for w in args.workers.split(",")]
    lines: list[str] = []
    if args.sweep:
        for concurrency in (200, 1000, 2000):
            for batch in (100, 500, 1000):
                if batch > concurrency:
                    continue
                r = duetime_burndown(
                    args.store, args.runs, max(worker_counts), task=args.task,
                    concurrency=concurrency, batch=batch, mix=args.mix, timeout=args.timeout,
                )  # fmt: skip
                lines.append(describe(r))
                print(lines[-1], flush=True)
        report(f"burn-down sweep ({args.store}, {args.task})", lines, record=args.record)
        return
    results: list[dict[str, Any]] = []
    for workers in worker_counts:
        results = []
        for _ in range(args.repeat):
            r = duetime_burndown(
                args.store, args.runs, workers, task=args.task,
                concurrency=args.concurrency, batch=args.batch, defaults=args.defaults,
                mix=args.mix, profile=args.profile, timeout=args.timeout,
            )  # fmt: skip
            print("  " + describe(r), flush=True)
            results.append(r)
        rate = Spread.of([r["runs_per_s"] for r in results])
        lines.append(
            f"duetime {args.store} {args.task} {args.mix} mix, {workers} worker process(es) "
            f"({settings_label(results[-1])}), N={args.runs:,}: {rate.show()} runs/s; "
            f"{cpu_text(results)}"
        )
    enqueue = Spread.of([r["enqueue_per_s"] for r in results])
    trigger = Spread.of([r["trigger_per_s"] for r in results])
    lines.append(f"enqueue on its own ({args.store}): bulk clone {enqueue.show()} runs/s")
    lines.append(f"enqueue on its own ({args.store}): app.trigger one at a time {trigger.show()}/s")
    report(f"burn-down ({args.store}, {args.task}, {args.mix})", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
