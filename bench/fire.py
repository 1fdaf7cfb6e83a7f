"""Fire accuracy: how late do runs start, against their scheduled instant?

    python -m bench.fire                           # PostgreSQL: 1,600 triggers/s for 60 s
    python -m bench.fire --burst                   # 5,000 one-shots within one second
    python -m bench.fire --store sqlite            # the embedded default (`duetime up`)

Jobs are registered up front with ``app.schedule_many``: one-shot ``at`` jobs spread evenly
over the window plus ``every_second`` cron jobs (``* * * * * *``). Then real processes run them
(PostgreSQL: one `duetime scheduler` and `--workers` `duetime worker` processes; SQLite: one
`duetime up`). Fire lag = the first attempt's ``started_at`` − the run's ``scheduled_for``,
both from the database, for every run scheduled inside the window; a run that never started
counts as missing. Every cron job must have a run for each second of the window.

`duetime up` serves its API on a free port (``--port 0``). Exits non-zero with the reason when a
process exits early or no run in the window started (instead of reporting 0/N).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import (
    BenchError,
    Spread,
    base_parser,
    check_alive,
    duetime_env,
    guarded_main,
    lag_summary,
    report,
    spawn,
    stop_all,
    wait_for,
    wait_until,
)
from bench.burndown import Database
from duetime.app import AsyncApp
from duetime.registration import JobSpec

LEAD = 12.0
"""Default seconds between registration and the window's start (processes start meanwhile)."""


async def _register(url: str, start: datetime, rate: float, seconds: float, crons: int) -> int:
    oneshots = max(0, round(rate * seconds) - crons * round(seconds))
    step = seconds / oneshots if oneshots else 0.0
    specs = [
        JobSpec(name=f"at-{i}", task="duetime.noop", at=start + timedelta(seconds=i * step))
        for i in range(oneshots)
    ]
    specs += [
        JobSpec(name=f"cron-{i}", task="duetime.noop", cron="* * * * * *") for i in range(crons)
    ]
    async with AsyncApp(url, migrate=False) as app:
        return await app.schedule_many(specs)


def _lags(db: Database, start: datetime, end: datetime) -> tuple[list[float], int, int, int]:
    """(lags in ms, runs in window, runs never started, cron seconds missing)."""
    if db.store == "postgres":
        rows = db.query(
            "SELECT extract(epoch FROM a.started_at - r.scheduled_for) * 1000, "
            "r.started_at IS NULL AND a.run_id IS NULL FROM runs r "
            "LEFT JOIN attempts a ON a.run_id = r.id AND a.number = 1 "
            "WHERE r.scheduled_for >= ? AND r.scheduled_for < ?",
            (start, end),
        )
        cron_rows = db.query(
            "SELECT j.name, count(DISTINCT r.scheduled_for) FROM jobs j LEFT JOIN runs r "
            "ON r.job_id = j.id AND r.scheduled_for >= ? AND r.scheduled_for < ? "
            "WHERE j.name LIKE 'cron-%%' GROUP BY j.name",
            (start, end),
        )
    else:
        s, e = _micros(start), _micros(end)
        rows = db.query(
            "SELECT (a.started_at - r.scheduled_for) / 1000.0, a.run_id IS NULL FROM runs r "
            "LEFT JOIN attempts a ON a.run_id = r.id AND a.number = 1 "
            "WHERE r.scheduled_for >= ? AND r.scheduled_for < ?",
            (s, e),
        )
        cron_rows = db.query(
            "SELECT j.name, count(DISTINCT r.scheduled_for) FROM jobs j LEFT JOIN runs r "
            "ON r.job_id = j.id AND r.scheduled_for >= ? AND r.scheduled_for < ? "
            "WHERE j.name LIKE 'cron-%' GROUP BY j.name",
            (s, e),
        )
    lags = [float(r[0]) for r in rows if r[0] is not None]
    never = sum(1 for r in rows if r[0] is None)
    seconds = round((end - start).total_seconds())
    cron_missing = sum(max(0, seconds - int(r[1])) for r in cron_rows)
    return lags, len(rows), never, cron_missing


def _micros(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def duetime_fire(
    store: str,
    *,
    rate: float = 1600.0,
    seconds: float = 60.0,
    crons: int = 100,
    workers: int = 2,
    concurrency: int = 4000,
    batch: int = 500,
    settle: float = 30.0,
    lead: float = LEAD,
) -> dict[str, Any]:
    db = Database(store)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        start = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
        end = start + timedelta(seconds=seconds)
        t0 = time.perf_counter()
        registered = asyncio.run(_register(db.url, start, rate, seconds, crons))
        registration_s = time.perf_counter() - t0
        env = duetime_env(
            database_url=db.url,
            worker_concurrency=concurrency,
            worker_batch=batch,
            log_level="warning",
            shutdown_grace=5,
        )
        py = [sys.executable, "-m", "duetime"]
        if store == "postgres":
            procs.append(spawn([*py, "scheduler"], env))
            procs += [spawn([*py, "worker"], env) for _ in range(workers)]
        else:
            # its API on a free port: a fixed one may be taken (it then exits and nothing runs)
            procs.append(spawn([*py, "up", "--port", "0"], env))
        if datetime.now(UTC) > start - timedelta(seconds=2):
            raise BenchError("registration took too long: raise --lead")
        wait_for(
            "the window",
            lambda: datetime.now(UTC) >= end + timedelta(seconds=2),
            seconds + lead + 5.0,
            0.5,
            lambda: check_alive(procs, "a duetime process"),
        )
        last = end.replace(tzinfo=UTC)

        def drained() -> bool:
            _, total, never, _ = _lags(db, start, last)
            return never == 0 and total > 0

        wait_until(drained, settle, 1.0)
        check_alive(procs, "a duetime process")
        lags, total, never, cron_missing = _lags(db, start, last)
        if not lags:
            raise BenchError(
                f"fire ({store}): none of the {total:,} runs in the window started "
                f"({registered:,} jobs registered)"
            )
        write_late = _start_write_lateness(db, start, last)
        causes = _late_causes(db, start, last)
        errors = stop_all(procs)
        procs = []
        if errors:
            print("process errors:\n" + "\n".join(errors), file=sys.stderr)
        expected = round(rate * seconds)
        return {
            "store": store,
            "rate": rate,
            "seconds": seconds,
            "registered": registered,
            "registration_per_s": registered / registration_s,
            "expected": expected,
            "in_window": total,
            "never_started": never + max(0, expected - total),
            "cron_seconds_missing": cron_missing,
            **lag_summary(lags),
            "start_written_late": write_late,
            "late_causes": causes,
        }
    finally:
        stop_all(procs)
        db.drop()


def _start_write_lateness(db: Database, start: datetime, end: datetime) -> float | None:
    """Share of runs whose start was written after their instant (PostgreSQL): the store
    stamps a start written ahead with the instant itself, so ``started_at > scheduled_for``
    means the write was late; the rest of the lag is the worker calling the task late."""
    if db.store != "postgres":
        return None
    rows = db.query(
        "SELECT count(*) FILTER (WHERE started_at > scheduled_for + interval '1 ms'), count(*) "
        "FROM runs WHERE scheduled_for >= ? AND scheduled_for < ? AND started_at IS NOT NULL",
        (start, end),
    )
    late, n = rows[0]
    return None if not n else late / n


LATE_MS = 10.0
"""A run that started this much after its instant counts as late in :func:`_late_causes`."""


def _late_causes(db: Database, start: datetime, end: datetime) -> dict[str, int] | None:
    """Why runs started more than :data:`LATE_MS` late (PostgreSQL), each run counted once,
    by its first late step: inserted by the scheduler less than a lookahead (1 s) before its
    instant, claimed by a worker less than 100 ms before its instant (too close for its start
    to be written ahead), its start written after its instant
    (``runs.started_at`` later than the instant), or else its task called late."""
    if db.store != "postgres":
        return None
    rows = db.query(
        "SELECT CASE "
        "WHEN r.created_at > r.scheduled_for - interval '1 s' THEN 'inserted' "
        "WHEN a.claimed_at > r.scheduled_for - interval '100 ms' THEN 'claimed' "
        "WHEN r.started_at > r.scheduled_for + interval '1 ms' THEN 'start written' "
        "ELSE 'called' END, count(*) FROM runs r "
        "JOIN attempts a ON a.run_id = r.id AND a.number = 1 "
        "WHERE r.scheduled_for >= ? AND r.scheduled_for < ? "
        f"AND a.started_at > r.scheduled_for + interval '{LATE_MS} ms' GROUP BY 1",
        (start, end),
    )
    return {str(cause): int(n) for cause, n in rows}


def describe(r: dict[str, Any]) -> str:
    return (
        f"{r['store']} {r['rate']:,.0f}/s for {r['seconds']:.0f} s: runs {r['n']:,}/"
        f"{r['expected']:,} started (missing {r['never_started']}), lag p50 "
        f"{r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max "
        f"{r['max_ms']:.1f} ms; cron seconds missed {r['cron_seconds_missing']}"
        + (
            ""
            if r.get("start_written_late") is None
            else f"; starts written after the instant {100 * r['start_written_late']:.1f}%"
        )
        + (
            ""
            if r.get("late_causes") is None
            else f"; late > {LATE_MS:.0f} ms by cause "
            + (", ".join(f"{k} {v:,}" for k, v in sorted(r["late_causes"].items())) or "none")
        )
    )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--rate", type=float, default=1600.0, help="triggers per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="window length")
    parser.add_argument("--crons", type=int, default=100, help="every-second cron jobs")
    parser.add_argument("--burst", action="store_true", help="5,000 one-shots within 1 s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--lead", type=float, default=LEAD, help="seconds before the window")
    parser.add_argument("--settle", type=float, default=30.0, help="max wait after the window")
    args = parser.parse_args()
    if args.burst:
        args.rate, args.seconds, args.crons = 5000.0, 1.0, 0
    results = []
    for _ in range(args.repeat):
        r = duetime_fire(
            args.store, rate=args.rate, seconds=args.seconds, crons=args.crons,
            workers=args.workers, concurrency=args.concurrency, batch=args.batch,
            settle=args.settle, lead=args.lead,
        )  # fmt: skip
        print("  " + describe(r), flush=True)
        results.append(r)
    lines = [describe(r) for r in results]
    if len(results) > 1:
        for key in ("p50_ms", "p99_ms", "max_ms"):
            lines.append(f"median {key}: {Spread.of([r[key] for r in results]).show('.1f')}")
    title = "burst" if args.burst else f"{args.rate:,.0f}/s for {args.seconds:.0f} s"
    report(f"fire accuracy ({args.store}, {title})", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
