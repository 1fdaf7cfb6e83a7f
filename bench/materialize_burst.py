"""The scheduler alone on a burst: one-shot jobs due within its horizon, no worker.

    python -m bench.materialize_burst --jobs 100000

N one-shot jobs (every setting the product's default) are registered with
``app.schedule_many``; one `duetime scheduler` starts with no settings; once it leads, every
job's instant is moved to ``--lead`` seconds from then (inside the 10 s horizon: the whole burst
is due to be materialized at once). Figures: runs made per second (N / the time from the move
to the last run's ``created_at``), the scheduler's CPU and its PostgreSQL backends' per run, and
the statements' time, WAL and buffers per run (pg_stat_statements). No worker runs: the
figure is the scheduler's and the database's work alone, the part of the "midnight burst"
(bench.oneshots) before any run can start. Exits non-zero with the reason when a step fails or
a job got no run.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import (
    BENCH_TAG,
    BackendMeter,
    BenchError,
    base_parser,
    check_alive,
    guarded_main,
    measured_env,
    report,
    spawn,
    stop_all,
    wait_for,
)
from bench.burndown import Database, cpu_text
from bench.minimal import per_run
from bench.oneshots import _register, move_instant


def burst(jobs: int, *, lead: float = 5.0, timeout: float = 300.0) -> dict[str, Any]:
    """One burst of ``jobs`` one-shots materialized by one scheduler; its figures."""
    db = Database("postgres")
    procs: list[subprocess.Popen[bytes]] = []
    meter: BackendMeter | None = None
    try:
        asyncio.run(_register(db.url, jobs))
        env = measured_env(database_url=db.url)
        procs = [spawn([sys.executable, "-m", "duetime", "scheduler", "--log-level", "warning"],
                       env)]  # fmt: skip
        meter = BackendMeter(db.url)
        conn = meter.conn

        def leads() -> bool:
            check_alive(procs, "the scheduler")
            row = conn.execute(
                f"{BENCH_TAG} SELECT count(*) FROM leader WHERE expires_at > now()"
            ).fetchone()
            return row is not None and row[0] >= 1

        wait_for("the scheduler", leads, 60, 0.25)
        due = datetime.now(UTC) + timedelta(seconds=lead)
        cpu = move_instant(db.url, jobs, due, meter, procs)
        moved_at = datetime.now(UTC)

        def made() -> bool:
            row = conn.execute(
                f"{BENCH_TAG} SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE status = 'active' "
                "AND next_fire_at IS NOT NULL)"
            ).fetchone()
            return row is not None and bool(row[0])

        wait_for(f"{jobs:,} runs made", made, timeout, 0.5, meter.sample)
        used = cpu.stop()
        db_cpu = meter.stop()
        row = conn.execute(
            "SELECT count(*), extract(epoch FROM max(created_at) - %(at)s) FROM runs",
            {"at": moved_at},
        ).fetchone()
        assert row is not None
        runs, span = int(row[0]), float(row[1] or 0.0)
        errors = stop_all(procs)
        procs = []
        if errors:
            print("process errors:\n" + "\n".join(errors), file=sys.stderr)
        if runs != jobs or span <= 0:
            raise BenchError(f"expected {jobs} runs, got {runs} (span {span:.3f} s)")
        return {"jobs": jobs, "made_per_s": runs / span, "span_s": span,
                **per_run(used, db_cpu, jobs)}  # fmt: skip
    finally:
        stop_all(procs)
        if meter is not None:
            meter.close()
        db.drop()


def describe(r: dict[str, Any]) -> str:
    return (
        f"scheduler alone, {r['jobs']:,} one-shot jobs due within the horizon: "
        f"{r['made_per_s']:,.0f} runs made/s ({r['span_s']:.2f} s); "
        f"{cpu_text([r], 'scheduler')}"
    )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--lead", type=float, default=5.0, help="seconds to the instant")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    if args.jobs < 1 or args.repeat < 1 or args.lead <= 0:
        raise BenchError("--jobs and --repeat must be at least 1, --lead above 0")
    lines = []
    for _ in range(args.repeat):
        lines.append(describe(burst(args.jobs, lead=args.lead, timeout=args.timeout)))
        print("  " + lines[-1], flush=True)
    report(f"scheduler alone on a burst ({args.jobs:,})", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
