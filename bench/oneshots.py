"""One-shot jobs due at one instant, run by duetime as a new user would run them.

    python -m bench.oneshots --jobs 50000             # distinct jobs due at once: runs/s
    python -m bench.oneshots --jobs 100000            # the "midnight" burst: start lag

N one-shot jobs (``at``, every other setting the product's default: one tenant, queue and
priority, overlap policy ``skip``) are registered with ``app.schedule_many``; one
`duetime scheduler` and ``--workers`` `duetime worker` processes start with no settings at all.
Once the workers are registered and the scheduler leads, every job's instant is moved to
``--lead`` seconds from then (one SQL statement on ``jobs.at_instant`` and ``next_fire_at``,
followed by ``VACUUM ANALYZE jobs``: registration takes longer than a fixed lead would allow,
and the scheduler must meet the jobs as registered long before their instant). The default
lead is longer than the scheduler's horizon, as for jobs registered well ahead of midnight.

Figures, from the database: when the runs were made (``created_at``: half of them, all of
them, from the instant; the scheduler's share of the lag); runs/s = succeeded runs / (last
``finished_at`` − the earlier of the instant and the first claim: work done ahead of the
instant counts), and when the last run finished after the instant; start lag = the first
attempt's ``started_at`` − the run's ``scheduled_for`` (p50/p99/max). CPU (as in
bench.burndown): the processes' own and their PostgreSQL backends', from the moment the
instant is set to the end. Exits non-zero with the reason when a step fails or a job did not
run.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench._common import (
    BENCH_TAG,
    BackendMeter,
    BenchError,
    CpuMeter,
    base_parser,
    check_alive,
    guarded_main,
    lag_summary,
    measured_env,
    report,
    spawn,
    stop_all,
    wait_for,
)
from bench.burndown import Database, cpu_text, print_statements
from bench.minimal import per_run
from duetime.app import AsyncApp
from duetime.registration import JobSpec

PREFIX = "shot-"
SETTLED = (
    f"{BENCH_TAG} SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'active' "
    "AND next_fire_at IS NOT NULL) OR EXISTS (SELECT 1 FROM runs WHERE state = 'scheduled') "
    "OR EXISTS (SELECT 1 FROM runs WHERE state = 'running')"
)
"""The benchmark's own question, once a second: is any job still to fire or any run left?"""


async def _register(url: str, jobs: int) -> float:
    """``jobs`` one-shots due in a day (moved later); returns the registration's seconds."""
    at = datetime.now(UTC) + timedelta(days=1)
    started = time.perf_counter()
    async with AsyncApp(url, migrate=False) as app:
        count = await app.schedule_many(
            JobSpec(name=f"{PREFIX}{i}", task="duetime.noop", at=at) for i in range(jobs)
        )
    if count != jobs:
        raise BenchError(f"registered {count} of {jobs} one-shot jobs")
    return time.perf_counter() - started


def move_instant(
    url: str,
    jobs: int,
    due: datetime,
    meter: BackendMeter,
    procs: list[subprocess.Popen[bytes]],
) -> CpuMeter:
    """Move the instant of the ``jobs`` one-shots :func:`_register` made to ``due``, in one
    transaction; ``meter`` and the returned CPU meter of ``procs`` start just before its
    commit. Raises :class:`BenchError` unless every job moved."""
    with psycopg.connect(url) as tx:
        moved = tx.execute(
            "UPDATE jobs SET at_instant = %(due)s, next_fire_at = %(due)s "
            "WHERE substr(name, 1, %(n)s) = %(prefix)s",
            {"due": due, "n": len(PREFIX), "prefix": PREFIX},
        ).rowcount
        meter.start()
        cpu = CpuMeter([p.pid for p in procs])
        tx.commit()
    if moved != jobs:
        raise BenchError(f"moved the instant of {moved} of {jobs} jobs")
    return cpu


def duetime_oneshots(
    jobs: int, *, workers: int = 2, lead: float = 15.0, timeout: float = 600.0
) -> dict[str, Any]:
    """One burst of ``jobs`` one-shots due at one instant; its figures (``runs_per_s``, the
    start-lag summary, CPU per run). Raises :class:`BenchError` when a step fails."""
    db = Database("postgres")
    procs: list[subprocess.Popen[bytes]] = []
    meter: BackendMeter | None = None
    try:
        registration_s = asyncio.run(_register(db.url, jobs))
        env = measured_env(database_url=db.url)
        py = [sys.executable, "-m", "duetime"]
        procs = [spawn([*py, "scheduler", "--log-level", "warning"], env)]
        procs += [spawn([*py, "worker", "--log-level", "warning"], env) for _ in range(workers)]
        meter = BackendMeter(db.url)
        conn = meter.conn

        def ready() -> bool:
            check_alive(procs, "a duetime process")
            row = conn.execute(
                f"{BENCH_TAG} SELECT (SELECT count(*) FROM workers), "
                "(SELECT count(*) FROM leader WHERE expires_at > now())"
            ).fetchone()
            return row is not None and row[0] >= workers and row[1] >= 1

        wait_for("the scheduler and workers", ready, 60, 0.25)
        due = datetime.now(UTC) + timedelta(seconds=lead)
        cpu = move_instant(db.url, jobs, due, meter, procs)
        conn.execute("VACUUM ANALYZE jobs")
        if datetime.now(UTC) > due:
            raise BenchError(f"setting the instant took longer than --lead {lead} s")

        def settled() -> bool:
            if datetime.now(UTC) < due:
                return False
            row = conn.execute(SETTLED).fetchone()
            return row is not None and not row[0]

        def tick() -> None:
            check_alive(procs, "a duetime process")
            meter.sample()

        wait_for(f"{jobs:,} one-shot jobs", settled, lead + timeout, 1.0, tick)
        used = cpu.stop()
        db_cpu = meter.stop()
        if os.environ.get("DUETIME_BENCH_STATEMENTS"):
            print_statements(db)
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), extract(epoch FROM "
            "max(finished_at) - least(min(claimed_at), %(due)s)), "
            "extract(epoch FROM max(finished_at) - %(due)s) FROM runs", {"due": due}
        ).fetchone()  # fmt: skip
        assert row is not None
        succeeded, span, done_after = int(row[0]), float(row[1] or 0.0), float(row[2] or 0.0)
        made = conn.execute(
            "SELECT extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY created_at) "
            "- %(due)s), extract(epoch FROM max(created_at) - %(due)s) FROM runs",
            {"due": due},
        ).fetchone()
        assert made is not None
        lags = [
            float(r[0])
            for r in conn.execute(
                "SELECT extract(epoch FROM a.started_at - r.scheduled_for) * 1000 FROM runs r "
                "JOIN attempts a ON a.run_id = r.id AND a.number = 1"
            )
        ]
        errors = stop_all(procs)
        procs = []
        if errors:
            print("process errors:\n" + "\n".join(errors), file=sys.stderr)
        if succeeded != jobs or len(lags) != jobs or span <= 0:
            raise BenchError(
                f"one-shots: expected {jobs} succeeded runs, got {succeeded} "
                f"({len(lags)} started, span {span:.3f} s)"
            )
        return {
            "jobs": jobs,
            "workers": workers,
            "lead_s": lead,
            "registration_per_s": jobs / registration_s,
            "runs_per_s": succeeded / span,
            "span_s": span,
            "done_after_s": done_after,
            "made_p50_s": float(made[0] or 0.0),
            "made_last_s": float(made[1] or 0.0),
            **lag_summary(lags),
            **per_run(used, db_cpu, jobs),
        }
    finally:
        stop_all(procs)
        if meter is not None:
            meter.close()
        db.drop()


def describe(r: dict[str, Any]) -> str:
    return (
        f"duetime {r['jobs']:,} one-shot jobs due at once, 1 scheduler + {r['workers']} workers "
        f"(no settings), lead {r['lead_s']:.0f} s: {r['runs_per_s']:,.0f} runs/s, the last "
        f"finished {r['done_after_s']:.2f} s after the instant; start lag "
        f"p50 {r['p50_ms'] / 1000:.2f} s, p99 {r['p99_ms'] / 1000:.2f} s, max "
        f"{r['max_ms'] / 1000:.2f} s; runs made (materialized) by {r['made_p50_s']:+.2f} s "
        f"(half) and {r['made_last_s']:+.2f} s (all) from the instant; "
        f"{cpu_text([r], 'scheduler + worker')}"
    )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lead", type=float, default=15.0, help="seconds to the instant")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    if args.jobs < 1 or args.workers < 1 or args.repeat < 1 or args.lead <= 0:
        raise BenchError("--jobs, --workers and --repeat must be at least 1, --lead above 0")
    lines = []
    for _ in range(args.repeat):
        r = duetime_oneshots(args.jobs, workers=args.workers, lead=args.lead,
                             timeout=args.timeout)  # fmt: skip
        lines.append(describe(r))
        print("  " + lines[-1], flush=True)
    report(f"one-shot jobs due at once ({args.jobs:,})", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
