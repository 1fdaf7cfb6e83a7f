"""The worker's hot path without the worker: where does a run's cost go?

    python -m bench.hotpath --runs 50000 --batch 500

Seeds N due runs (as bench.burndown does), then, in this one process and without workers,
repeats: ``store.runs_claim(batch)`` → a ``RunCompletion`` per run → ``store.runs_complete``.
For each phase it reports, per run: wall time, this process's CPU (Python and driver) and the
benchmark PostgreSQL server's CPU. It also prints ``EXPLAIN (ANALYZE, BUFFERS)`` of the claim
statement at that batch size, so a plan change (e.g. a sequential scan) shows.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench._common import base_parser, exit_on_sigterm, guarded_main, postgres_cpu_seconds, report
from bench.burndown import Database, _seed
from duetime._types import AttemptOutcome, RunState
from duetime.store import create_store
from duetime.store.base import (
    RunCompletion,
    RunsClaimParams,
    RunsCompleteParams,
    RunsStartParams,
    RunStartParams,
)
from duetime.store.postgres.longruns import completion_columns
from duetime.store.sqlfile import load_queries

PHASES = ("claim", "build", "complete")


async def _loop(url: str, batch: int) -> dict[str, dict[str, float]]:
    store = create_store(url)
    await store.open()
    totals = {p: {"wall": 0.0, "cpu": 0.0, "pg": 0.0} for p in PHASES}
    claim_walls: list[float] = []  # per batch, µs per run: does the claim slow down as it goes?
    runs = 0

    def mark() -> tuple[float, float, float]:
        return time.perf_counter(), time.process_time(), postgres_cpu_seconds()

    def add(phase: str, start: tuple[float, float, float]) -> None:
        end = mark()
        for key, a, b in zip(("wall", "cpu", "pg"), start, end, strict=True):
            totals[phase][key] += b - a

    try:
        while True:
            start = mark()
            claimed = await store.runs_claim(
                RunsClaimParams(
                    worker_id="hotpath",
                    tasks=["duetime.noop"],
                    limit=batch,
                    lease_ttl=30.0,
                    lookahead=1.0,
                )
            )
            add("claim", start)
            if not claimed:
                break
            claim_walls.append((time.perf_counter() - start[0]) / len(claimed) * 1e6)
            start = mark()
            now = datetime.now(UTC)
            completions = [
                RunCompletion(
                    run_id=c.run.id,
                    token=c.run.token,
                    worker_id="hotpath",
                    attempt=c.run.attempt,
                    claimed_at=c.run.claimed_at or now,
                    started_at=c.run.started_at,
                    outcome=AttemptOutcome.SUCCEEDED,
                    next_state=RunState.SUCCEEDED,
                )
                for c in claimed
            ]
            add("build", start)
            start = mark()
            await store.runs_complete(RunsCompleteParams(completions))
            add("complete", start)
            runs += len(claimed)
    finally:
        await store.close()
    per_run = {p: {k: v / max(runs, 1) * 1e6 for k, v in t.items()} for p, t in totals.items()}
    tenth = max(1, len(claim_walls) // 10)
    per_run["claim_trend"] = {
        "first": sum(claim_walls[:tenth]) / tenth,
        "last": sum(claim_walls[-tenth:]) / tenth,
    }
    return per_run


async def _materialize(url: str, jobs: int) -> dict[str, float]:
    """Register ``jobs`` one-shots due in 5 s, then time one scheduler pass over them."""
    from duetime.app import AsyncApp
    from duetime.registration import JobSpec

    async with AsyncApp(url, migrate=False) as app:
        at = app.clock.now() + timedelta(seconds=5)
        await app.schedule_many(
            JobSpec(name=f"m-{i}", task="duetime.noop", at=at) for i in range(jobs)
        )
        start = time.perf_counter(), time.process_time(), postgres_cpu_seconds()
        result = await app.materializer().run_once()
        wall = time.perf_counter() - start[0]
        cpu = time.process_time() - start[1]
        pg = postgres_cpu_seconds() - start[2]
    return {
        "runs": result.runs_created,
        "per_s": result.runs_created / wall,
        "wall": wall / jobs * 1e6,
        "cpu": cpu / jobs * 1e6,
        "pg": pg / jobs * 1e6,
    }


async def _run_start(url: str, count: int, batch: int) -> dict[str, dict[str, float]]:
    """Claim ``count`` runs ahead (due in 60 s) and start them as a worker would: the first
    half one at a time (``run_start``), the second half in batches (``runs_start``, what the
    worker's starter sends at 1,600 fires/s)."""
    store = create_store(url)
    await store.open()
    try:
        claimed = await store.runs_claim(
            RunsClaimParams(
                worker_id="hotpath",
                tasks=["duetime.noop"],
                limit=count,
                lease_ttl=30.0,
                lookahead=120.0,
            )
        )
        half = len(claimed) // 2
        single, batched = claimed[:half], claimed[half:]

        async def one_at_a_time() -> None:
            for c in single:
                await store.run_start(RunStartParams(run_id=c.run.id, token=c.run.token))

        async def in_batches() -> None:
            for i in range(0, len(batched), batch):
                chunk = batched[i : i + batch]
                await store.runs_start(RunsStartParams([(c.run.id, c.run.token) for c in chunk]))

        out = {}
        for name, how, n in (("single", one_at_a_time, half), ("batch", in_batches, len(batched))):
            start = time.perf_counter(), time.process_time(), postgres_cpu_seconds()
            await how()
            n = max(n, 1)
            out[name] = {
                "n": n,
                "wall": (time.perf_counter() - start[0]) / n * 1e6,
                "cpu": (time.process_time() - start[1]) / n * 1e6,
                "pg": (postgres_cpu_seconds() - start[2]) / n * 1e6,
            }
        return out
    finally:
        await store.close()


def _claim_statement(batch: int) -> tuple[str, dict[str, Any]]:
    """The store's main claim statement and its parameters for one batch: ``runs_claim``, or
    the fair claim (``runs_claim_fair``, fast path only) where that replaced it. Extra
    parameters are ignored by the statement that does not use them."""
    queries = load_queries("postgres")
    name = "runs_claim" if "runs_claim" in queries else "runs_claim_fair"
    params: dict[str, Any] = {
        "worker_id": "explain", "lease_ttl": 30.0, "lookahead": 1.0,
        "tasks": ["duetime.noop"], "limit": batch, "now": None, "tenant": None,
        "queues": None, "aging_us": 0, "aging_cap": 0, "only_fast": True, "share": True,
    }  # fmt: skip
    return queries[name], params


def claim_plan(url: str, batch: int) -> str:
    query, params = _claim_statement(batch)
    with psycopg.connect(url) as conn:
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, params).fetchall()  # type: ignore[operator]
        conn.rollback()
    return "\n".join(r[0] for r in rows)


async def _seed_again(db: Database) -> tuple[str, float]:
    """A fresh manual run of the burn-down job (its template was consumed)."""
    from duetime.app import AsyncApp

    async with AsyncApp(db.url, migrate=False) as app:
        run = await app.trigger("bench.burn")
    return str(run.id), 0.0


def complete_plan(url: str, batch: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the completion statement for one claimed batch
    (claimed and completed inside one transaction that is rolled back)."""
    queries = load_queries("postgres")
    claim_query, claim = _claim_statement(batch)
    with psycopg.connect(url) as conn:
        cur = conn.execute(claim_query, claim)  # type: ignore[arg-type]
        names = [d.name for d in cur.description or []]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        completions = [
            RunCompletion(
                run_id=r["id"],
                token=r["token"],
                worker_id="explain",
                attempt=r["attempt"],
                claimed_at=r["claimed_at"],
                started_at=r["started_at"],
                outcome=AttemptOutcome.SUCCEEDED,
                next_state=RunState.SUCCEEDED,
            )
            for r in rows
        ]
        params: dict[str, Any] = {"now": None, "tenant": None, **completion_columns(completions)}
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + queries["runs_complete"],  # type: ignore[operator]
            params,
        ).fetchall()
        conn.rollback()
    return "\n".join(r[0] for r in plan)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--materialize", type=int, default=20_000, help="one-shot jobs")
    parser.add_argument("--starts", type=int, default=2_000, help="run_start calls")
    args = parser.parse_args()
    exit_on_sigterm()
    db = Database("postgres")
    try:
        template, _ = asyncio.run(_seed(db.url, "noop"))
        db.query("DELETE FROM runs WHERE job_name = 'bench.trigger'")
        db.clone_runs(template, args.runs - 1)
        db.query("ANALYZE")
        plan = claim_plan(db.url, args.batch)
        plan_complete = complete_plan(db.url, args.batch)
        per_run = asyncio.run(_loop(db.url, args.batch))
        materialize = asyncio.run(_materialize(db.url, args.materialize))
        db.query("DELETE FROM attempts")
        db.query("DELETE FROM runs")
        db.query("UPDATE jobs SET next_fire_at = NULL WHERE name LIKE 'm-%'")
        template, _ = asyncio.run(_seed_again(db))
        db.query("UPDATE runs SET available_at = clock_timestamp() + interval '60 seconds'")
        db.clone_runs(template, args.starts - 1)
        db.query(
            "UPDATE runs SET available_at = clock_timestamp() + interval '60 seconds' "
            "WHERE state = 'scheduled'"
        )
        starts = asyncio.run(_run_start(db.url, args.starts, args.batch))
    finally:
        db.drop()
    lines = [f"N={args.runs:,}, batch {args.batch}, one process, no workers; µs per run:"]
    for phase in PHASES:
        t = per_run[phase]
        lines.append(
            f"  {phase:<8} wall {t['wall']:7.1f}   this process CPU {t['cpu']:7.1f}   "
            f"PostgreSQL CPU {t['pg']:7.1f}"
        )
    total = {k: sum(per_run[p][k] for p in PHASES) for k in ("wall", "cpu", "pg")}
    lines.append(
        f"  {'total':<8} wall {total['wall']:7.1f}   this process CPU {total['cpu']:7.1f}   "
        f"PostgreSQL CPU {total['pg']:7.1f}  → one process pair bound: "
        f"{1e6 / total['wall']:,.0f} runs/s"
    )
    lines.append(
        f"  materialize {args.materialize:,} due one-shot jobs (one scheduler pass): "
        f"{materialize['per_s']:,.0f} runs/s; per job wall {materialize['wall']:.1f} µs, "
        f"scheduler CPU {materialize['cpu']:.1f} µs, PostgreSQL CPU {materialize['pg']:.1f} µs"
    )
    for name, label in (("single", "run_start one at a time"), ("batch", "runs_start batched")):
        t = starts[name]
        lines.append(
            f"  {label} ({t['n']:,} runs claimed ahead): per run wall {t['wall']:.1f} µs, "
            f"this process CPU {t['cpu']:.1f} µs, PostgreSQL CPU {t['pg']:.1f} µs → "
            f"{1e6 / t['wall']:,.0f} starts/s on one connection"
        )
    trend = per_run["claim_trend"]
    lines.append(
        f"  claim wall per run, first tenth of the batches {trend['first']:.1f} µs, last tenth "
        f"{trend['last']:.1f} µs"
    )
    lines.append("\nclaim plan (first batch):\n" + plan)
    lines.append("\ncompletion plan (one batch):\n" + plan_complete)
    report("hot path (claim → complete, no worker)", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
