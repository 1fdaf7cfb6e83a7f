"""Burn-down while old history is retired: does retention slow the hot path?

    python -m bench.retire --history 10000000 --runs 50000 --rounds 3

Each round, twice, interleaved: a fresh PostgreSQL database holding ``--history`` finished
runs, each with its attempt, ended 97 to 167 days ago (past the 90-day retention, in weekly
attempt partitions as the leader keeps them), vacuumed (seeded once, by set-based ``INSERT
… SELECT``, into a template database that every burn-down gets a file copy of: ``CREATE
DATABASE … TEMPLATE … STRATEGY FILE_COPY``); then a burn-down of ``--runs`` no-op
runs by 2 ``duetime worker`` processes with the product's defaults (bench.burndown). Once
as it is ("quiet"), once with a retention process beside it ("retiring") that runs the
leader's retention pass (``RetentionPruner.run_once``: the weeks past retention dropped, the
default partition's old attempts and up to 20,000 runs deleted) back to back (``--pace
flat``, the hardest the product ever retires) or at the leader's own pace (``--pace
product``: ``RetentionPruner.pause_after``, a pass within seconds while a backlog lasts,
busy at most ``DUETIME_RETENTION_DUTY`` of the time). Reported: the burn-down's
runs/s (median and spread) both ways and their ratio, and the history rows the retention
process retired during the burn-down. Exits non-zero with the reason when a step fails.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench._common import (
    BenchError,
    base_parser,
    exit_on_sigterm,
    guarded_main,
    measured_env,
    pg_base_url,
    report,
)
from bench.burndown import Database, _seed, duetime_burndown

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


class SeededHistory:
    """The database every burn-down starts from: the burn-down's job and template run plus
    the history, built once (the seeding of 10M rows takes minutes) and then a template
    (no connections allowed, so autovacuum leaves it alone); :meth:`copy` gives each
    burn-down its own file copy. :meth:`drop` removes the template (idempotent) unless
    ``keep``: then it stays, named after the history's size, and a later run with the same
    ``--history`` and ``--keep`` starts from it (its comment names the template run)."""

    def __init__(self, history: int, *, keep: bool = False) -> None:
        self.history = history
        self.keep = keep
        self.name = ""
        self.template_run = ""
        self.seeded_s = 0.0

    def copy(self) -> tuple[Database, str]:
        if not self.name and self.keep:
            self._reuse()
        if not self.name:
            self._build()
        name = f"bench_burn_{secrets.token_hex(3)}"
        with psycopg.connect(pg_base_url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                    sql.Identifier(name), sql.Identifier(self.name)
                )
            )
        url = urlunsplit(urlsplit(pg_base_url())._replace(path="/" + name))
        return Database("postgres", url=url), self.template_run

    def _kept_name(self) -> str:
        return f"bench_retire_history_{self.history}"

    def _reuse(self) -> None:
        with psycopg.connect(pg_base_url(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database "
                "WHERE datname = %s AND datistemplate",
                (self._kept_name(),),
            ).fetchone()
        if row is not None and row[0]:
            self.name, self.template_run = self._kept_name(), str(row[0])
            print(f"starting from the kept template {self.name}", flush=True)

    def _build(self) -> None:
        started = time.perf_counter()
        db = Database("postgres")
        try:
            self.template_run, _ = asyncio.run(_seed(db.url, "noop"))
            db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
            seed_history(self.history)(db)
        except BaseException:
            db.drop()
            raise
        self.name = urlsplit(db.url).path.lstrip("/")
        with psycopg.connect(pg_base_url(), autocommit=True) as conn:
            if self.keep:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(self._kept_name()))
                )
                conn.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(self.name), sql.Identifier(self._kept_name())
                    )
                )
                self.name = self._kept_name()
            conn.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                    sql.Identifier(self.name), sql.Literal(self.template_run)
                )
            )
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(
                    sql.Identifier(self.name)
                )
            )
        self.seeded_s = time.perf_counter() - started
        print(f"history seeded in {self.seeded_s:.0f} s", flush=True)

    def drop(self) -> None:
        if not self.name or self.keep:
            return
        with psycopg.connect(pg_base_url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE false").format(
                    sql.Identifier(self.name)
                )
            )
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(self.name)))
        self.name = ""


RETIRER = """
import asyncio, signal, sys, time
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
    pruner = RetentionPruner(store, Settings.from_env(database_url=sys.argv[1]))
    print("ready", flush=True)
    deleted = 0
    pause = float(sys.argv[2])
    while not stop.is_set():
        started = time.monotonic()
        count = await pruner.run_once(fence)
        deleted += count
        if count == 0:
            break
        wait = pause if pause >= 0 else pruner.pause_after(time.monotonic() - started)
        if wait > 0:
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except TimeoutError:
                pass
    await stop.wait()
    await store.close()

asyncio.run(main())
"""


PAUSES = {"flat": 0.0, "product": -1.0}
"""Seconds between two retention passes: none, or (-1) the leader's own pace."""


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
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            stopped["history_retired"] = float(before - _history(db))
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
        help="retention passes back to back (flat) or at the leader's own pace (product)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the seeded history (a template database named after --history) for a "
        "later run with --keep, which starts from it instead of seeding again",
    )
    args = parser.parse_args()
    exit_on_sigterm()
    rates: dict[str, list[float]] = {"quiet": [], "retiring": []}
    retired: list[float] = []
    started = time.perf_counter()
    seeded = SeededHistory(args.history, keep=args.keep)
    try:
        for _ in range(args.rounds):
            for mode in ("quiet", "retiring"):
                result = duetime_burndown(
                    "postgres",
                    args.runs,
                    2,
                    defaults=True,
                    database=seeded.copy,
                    alongside=retirer(args.pace) if mode == "retiring" else None,
                )
                print(f"{mode}: {result['runs_per_s']:,.0f} runs/s", flush=True)
                rates[mode].append(result["runs_per_s"])
                if mode == "retiring":
                    retired.append(result.get("history_retired", 0.0))
    finally:
        seeded.drop()
    quiet = statistics.median(rates["quiet"])
    retiring = statistics.median(rates["retiring"])
    lines = [
        f"history {args.history:,} finished runs with an attempt each, {NEWEST_DAYS}–"
        f"{OLDEST_DAYS} days old; burn-down of {args.runs:,} no-op runs, 2 workers, product "
        f"defaults; retention {args.pace}; {args.rounds} rounds, interleaved "
        f"({time.perf_counter() - started:.0f} s, of which {seeded.seeded_s:.0f} s seeding)",
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
