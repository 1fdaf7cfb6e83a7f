"""Scale: register millions of jobs through ``app.schedule_many``; does the due scan stay flat?

    python -m bench.scale                                  # milestones 10k, 1M, 10M
    python -m bench.scale --jobs 10000,1000000             # smaller

Jobs: 70% daily cron jobs (``M H * * *``, spread over the day's minutes), 25% hourly
(``M * * * *``), 5% one-shots spread over the next 24 h. The database grows milestone by
milestone; at each one: registration rate, database and ``jobs`` size, ``EXPLAIN (ANALYZE,
BUFFERS)`` of the scheduler's due scan (``jobs_due``, horizon 10 s, batch 500) and its median
time over 20 executions, and the resident memory of a `duetime scheduler` process serving the
database for ``--scheduler-seconds``.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench._common import (
    base_parser,
    create_database,
    drop_database,
    duetime_env,
    exit_on_sigterm,
    guarded_main,
    migrate,
    report,
    spawn,
    stop_all,
)
from duetime.app import AsyncApp
from duetime.registration import JobSpec
from duetime.store.sqlfile import load_queries

BYTES_PER_JOB = 1200
"""Rough on-disk size of one job with its indexes (measured: ~0.9 KB), for the disk check."""


def specs(first: int, last: int, now: datetime) -> Iterator[JobSpec]:
    for i in range(first, last):
        kind = i % 20
        if kind < 14:
            minute, hour = i % 60, (i // 60) % 24
            yield JobSpec(name=f"daily-{i}", task="duetime.noop", cron=f"{minute} {hour} * * *")
        elif kind < 19:
            yield JobSpec(name=f"hourly-{i}", task="duetime.noop", cron=f"{i % 60} * * * *")
        else:
            at = now + timedelta(seconds=(i * 7919) % 86_400 + 60)
            yield JobSpec(name=f"once-{i}", task="duetime.noop", at=at)


async def register(url: str, first: int, last: int) -> float:
    async with AsyncApp(url, migrate=False) as app:
        started = time.perf_counter()
        created = await app.schedule_many(specs(first, last, app.clock.now()))
        elapsed = time.perf_counter() - started
    if created != last - first:
        raise RuntimeError(f"created {created} of {last - first} jobs")
    return elapsed


def due_scan(url: str) -> tuple[str, float, bool]:
    """(plan text, median ms of 20 executions, whether the plan is an index scan of jobs_due)."""
    query = load_queries("postgres")["jobs_due"]
    params = {"limit": 500, "partition_low": 0, "partition_high": 255}
    with psycopg.connect(url) as conn:
        # the busiest scan: just after a minute boundary, when every job of that minute is due
        until = conn.execute(
            "SELECT date_trunc('minute', clock_timestamp()) + interval '70 seconds'"
        ).fetchone()
        params["until"] = until[0] if until else datetime.now(UTC)
        plan_rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + query,  # type: ignore[operator]
            params,
        ).fetchall()
        conn.rollback()
        times = []
        for _ in range(20):
            started = time.perf_counter()
            conn.execute(query, params).fetchall()  # type: ignore[arg-type]
            times.append((time.perf_counter() - started) * 1000)
            conn.rollback()  # release the row locks
    plan = "\n".join(r[0] for r in plan_rows)
    # an index range scan on jobs_due: a plain Index Scan, or a Bitmap Index Scan (which the
    # planner picks when few rows are due)
    uses_index = "Index Scan using jobs_due" in plan or "Bitmap Index Scan on jobs_due" in plan
    index_scan = uses_index and "Seq Scan" not in plan
    return plan, statistics.median(times), index_scan


def sizes(url: str) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE jobs")
        row = conn.execute(
            "SELECT pg_database_size(current_database()), pg_total_relation_size('jobs'), "
            "pg_relation_size('jobs_due')"
        ).fetchone()
    assert row is not None
    return {"db_mb": row[0] / 2**20, "jobs_mb": row[1] / 2**20, "due_index_mb": row[2] / 2**20}


def scheduler_memory(url: str, seconds: float) -> dict[str, float]:
    """Peak and final RSS of a `duetime scheduler` serving the database for ``seconds``; the
    runs it materialized meanwhile (no worker runs them)."""
    proc = spawn(
        [sys.executable, "-m", "duetime", "scheduler", "--log-level", "warning"],
        duetime_env(database_url=url),
    )
    peak = rss = 0.0
    to_next_minute = 60 - datetime.now(UTC).second + 5  # see one minute's jobs come due
    deadline = time.monotonic() + max(seconds, to_next_minute)
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        status = Path(f"/proc/{proc.pid}/status")
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
        except OSError:
            break
    errors = stop_all([proc])
    if errors:
        print("scheduler errors:\n" + "\n".join(errors), file=sys.stderr)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM runs").fetchone()
        conn.execute("DELETE FROM runs")  # the next milestone starts from jobs only
    return {"rss_peak_mb": peak, "rss_mb": rss, "runs_materialized": float(row[0] if row else 0)}


def check_disk(url: str, jobs: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    folder = row[0] if row and Path(row[0]).exists() else "/"
    free = shutil.disk_usage(folder).free
    need = jobs * BYTES_PER_JOB * 2  # the jobs, plus WAL and vacuum headroom
    print(f"free disk at {folder}: {free / 2**30:.1f} GiB; need about {need / 2**30:.1f} GiB")
    if free < need:
        raise SystemExit(f"not enough free disk for {jobs:,} jobs")


def run(milestones: list[int], scheduler_seconds: float) -> list[dict[str, Any]]:
    url = create_database("scale")
    try:
        migrate(url)
        check_disk(url, milestones[-1])
        results = []
        done = 0
        for target in milestones:
            elapsed = asyncio.run(register(url, done, target))
            rate = (target - done) / elapsed
            done = target
            size = sizes(url)
            plan, scan_ms, index_scan = due_scan(url)
            memory = scheduler_memory(url, scheduler_seconds) if scheduler_seconds > 0 else {}
            results.append({"jobs": target, "registration_per_s": rate, **size,
                            "due_scan_ms": scan_ms, "index_scan": index_scan, "plan": plan,
                            **memory})  # fmt: skip
            print(describe(results[-1]), flush=True)
        return results
    finally:
        drop_database(url)


def describe(r: dict[str, Any]) -> str:
    text = (
        f"{r['jobs']:,} jobs: registration {r['registration_per_s']:,.0f} jobs/s; database "
        f"{r['db_mb']:,.0f} MB (jobs with indexes {r['jobs_mb']:,.0f} MB, jobs_due index "
        f"{r['due_index_mb']:,.1f} MB); due scan {r['due_scan_ms']:.2f} ms "
        f"({'index range scan' if r['index_scan'] else 'NOT an index scan'})"
    )
    if "rss_mb" in r:
        text += (
            f"; scheduler RSS {r['rss_mb']:.0f} MB (peak {r['rss_peak_mb']:.0f} MB) while "
            f"materializing {r['runs_materialized']:,.0f} runs"
        )
    return text


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="10000,1000000,10000000", help="milestones")
    parser.add_argument("--scheduler-seconds", type=float, default=20.0)
    args = parser.parse_args()
    exit_on_sigterm()
    milestones = sorted(int(j) for j in args.jobs.split(","))
    results = run(milestones, args.scheduler_seconds)
    lines = [describe(r) for r in results]
    for r in results:
        lines.append(f"\ndue-scan plan at {r['jobs']:,} jobs:\n{r['plan']}")
    report("scale", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
