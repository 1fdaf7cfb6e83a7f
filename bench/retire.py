"""Burn-down while old history is retired: does retention slow the hot path?

    python -m bench.retire --history 10000000 --runs 50000 --rounds 3

Each round, twice, interleaved: a fresh PostgreSQL database holding ``--history`` finished
runs, each with its attempt, ended 97 to 167 days ago (past the 90-day retention, in weekly
attempt partitions as the leader keeps them), vacuumed; then a burn-down of ``--runs`` no-op
runs by 2 ``duetime worker`` processes with the product's defaults (bench.burndown). Once
as it is ("quiet"), once with a retention process beside it ("retiring") that runs the
leader's retention pass (``RetentionPruner.run_once``: the weeks past retention dropped, the
default partition's old attempts and up to 20,000 runs deleted) back to back (``--pace
flat``, the hardest the product ever retires) or once a minute as the leader does (``--pace
product``). Reported: the burn-down's
runs/s (median and spread) both ways and their ratio, and the history rows the retention
process retired during the burn-down. Exits non-zero with the reason when a step fails.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bench._common import (
    BenchError,
    base_parser,
    exit_on_sigterm,
    guarded_main,
    measured_env,
    report,
)
from bench.burndown import Database, duetime_burndown

OLDEST_DAYS = 167
NEWEST_DAYS = 97
"""The history's end instants: all past the default 90-day retention."""


def seed_history(count: int) -> Callable[[Database], None]:
    """Fill the database with ``count`` finished runs of the burn-down's job and an attempt
    each, then vacuum and analyze (as autovacuum would have by then)."""

    def prepare(db: Database) -> None:
        from duetime.store import create_store
        from duetime.store.base import AttemptPartitionsParams

        now = datetime.now(UTC)
        oldest = now - timedelta(days=OLDEST_DAYS)
        weeks = (OLDEST_DAYS - NEWEST_DAYS) // 7 + 1

        async def partitions() -> None:
            store = create_store(db.url)
            await store.open()
            try:
                await store.attempts_partitions(
                    AttemptPartitionsParams(
                        before=oldest - timedelta(days=90), now=oldest, ahead=weeks
                    )
                )
            finally:
                await store.close()

        asyncio.run(partitions())
        cols = db.columns("runs")
        step = timedelta(days=OLDEST_DAYS - NEWEST_DAYS) / max(count, 1)
        at = "(%(oldest)s::timestamptz + %(step)s::interval * g)"
        exprs = {
            "id": "gen_random_uuid()",
            "state": "'succeeded'",
            "idempotency_key": "'old:' || g",
            "scheduled_for": at,
            "available_at": at,
            "created_at": at,
            "claimed_at": at,
            "started_at": at,
            "finished_at": f"{at} + interval '1 second'",
            "token": "1",
            "attempt": "1",
            "lease_owner": "NULL",
            "lease_expires_at": "NULL",
            "misfire_at": "NULL",
        }
        select = ", ".join(exprs.get(c, f"r.{c}") for c in cols)
        template = db.query(
            "SELECT id FROM runs WHERE job_name = 'bench.burn' ORDER BY created_at LIMIT 1"
        )[0][0]
        db.query(
            f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} FROM runs r "
            "CROSS JOIN generate_series(1, %(count)s) g WHERE r.id = %(template)s",
            {"oldest": oldest, "step": step, "count": count, "template": template},
        )
        db.query(
            "INSERT INTO attempts (run_id, token, job_id, tenant, number, worker_id, claimed_at, "
            "started_at, finished_at, outcome) SELECT id, 1, job_id, tenant, 1, 'old', "
            "claimed_at, started_at, finished_at, 'succeeded' FROM runs "
            "WHERE idempotency_key LIKE 'old:%%'"
        )
        db.query("VACUUM ANALYZE")

    return prepare


RETIRER = """
import asyncio, signal, sys
from duetime._config import Settings
from duetime.maintenance.retention import RetentionPruner
from duetime.store import create_store
from duetime.store.base import LeaderElectParams, LeaderFence

async def main() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    store = create_store(sys.argv[1])
    await store.open()
    held = await store.leader_elect(LeaderElectParams(node_id="retirer", ttl=3600.0))
    assert held is not None
    fence = LeaderFence("retirer", held.term)
    pruner = RetentionPruner(store, Settings(database_url=sys.argv[1]))
    print("ready", flush=True)
    deleted = 0
    pause = float(sys.argv[2])
    while not stop.is_set():
        count = await pruner.run_once(fence)
        deleted += count
        if count == 0:
            break
        if pause > 0:
            try:
                await asyncio.wait_for(stop.wait(), pause)
            except TimeoutError:
                pass
    await stop.wait()
    await store.close()

asyncio.run(main())
"""


PAUSES = {"flat": 0.0, "product": 60.0}
"""Seconds between two retention passes: none, or the leader's interval."""


def retirer(pace: str) -> Callable[[Database], Callable[[], dict[str, float]]]:
    """Start the retention process at ``pace``; returns its stop (idempotent), which reports
    the runs and attempts it retired."""

    def start(db: Database) -> Callable[[], dict[str, float]]:
        return _start_retirer(db, PAUSES[pace])

    return start


def _start_retirer(db: Database, pause: float) -> Callable[[], dict[str, float]]:
    before = _history(db)
    proc = subprocess.Popen(
        [sys.executable, "-c", RETIRER, db.url, str(pause)],
        env=measured_env(database_url=db.url),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        raise BenchError("the retention process did not start")
    stopped: dict[str, float] = {}

    def stop() -> dict[str, float]:
        if not stopped:
            after = _history(db)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            stopped["history_retired"] = float(before - after)
        return stopped

    return stop


def _history(db: Database) -> int:
    """Old runs plus old attempts still in the database (counted before the measured runs
    exist and after the last one ended: outside the burn-down's span)."""
    runs = db.query("SELECT count(*) FROM runs WHERE idempotency_key LIKE 'old:%'")[0][0]
    attempts = db.query("SELECT count(*) FROM attempts WHERE worker_id = 'old'")[0][0]
    return int(runs) + int(attempts)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pace",
        choices=sorted(PAUSES),
        default="flat",
        help="retention passes back to back (flat) or once a minute as the leader runs them",
    )
    args = parser.parse_args()
    exit_on_sigterm()
    rates: dict[str, list[float]] = {"quiet": [], "retiring": []}
    retired: list[float] = []
    started = time.perf_counter()
    for _ in range(args.rounds):
        for mode in ("quiet", "retiring"):
            result = duetime_burndown(
                "postgres",
                args.runs,
                2,
                defaults=True,
                prepare=seed_history(args.history),
                alongside=retirer(args.pace) if mode == "retiring" else None,
            )
            rates[mode].append(result["runs_per_s"])
            if mode == "retiring":
                retired.append(result.get("history_retired", 0.0))
    quiet = statistics.median(rates["quiet"])
    retiring = statistics.median(rates["retiring"])
    lines = [
        f"history {args.history:,} finished runs with an attempt each, {NEWEST_DAYS}–"
        f"{OLDEST_DAYS} days old; burn-down of {args.runs:,} no-op runs, 2 workers, product "
        f"defaults; retention {args.pace}; {args.rounds} rounds, interleaved "
        f"({time.perf_counter() - started:.0f} s)",
        f"  quiet:    {quiet:,.0f} runs/s ({min(rates['quiet']):,.0f}–{max(rates['quiet']):,.0f})",
        f"  retiring: {retiring:,.0f} runs/s ({min(rates['retiring']):,.0f}–"
        f"{max(rates['retiring']):,.0f}); history rows (runs and attempts) retired meanwhile: "
        f"{statistics.median(retired):,.0f} median",
        f"  ratio retiring/quiet: {retiring / quiet:.2f}",
    ]
    report("burn-down while history is retired", lines, record=args.record)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    guarded_main(main)
