"""SQLite: the store's share of firing one-shot jobs, without processes or timers.

    python -m bench.sqlite_firing --jobs 10000
    python -m bench.ab --old <checkout> sqlite_firing --jobs 10000

On a fresh SQLite file, N one-shot jobs (every setting the product's default, so overlap
``skip`` and an overlap key per job) due one minute ahead are registered; then, timed apart,
what `duetime up` does to them through its one connection: the scheduler's pass
(``Materializer.run_once``, unpaced), claims ahead of the instant (batches of 500), the starts
of the claimed runs (``runs_start``, as the worker's starter writes them), their completions.
Figure: runs/s through all four (each step's share is printed too), and the statements and
commits per run the connection ran (its trace callback: counts, not times, so the machine's
load leaves them alone). With ``--overlap`` the start of batch k+1 and the completion of batch k
are asked for at once, as a worker's starter and completer do (SQLite's group commit then
shares their commit: decision 0039); the two are timed as one step. The machine's load falls
on every step alike; compare builds with bench.ab (interleaved rounds). Exits non-zero with the
reason when a step handles fewer runs than it should.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._common import BenchError, Spread, base_parser, guarded_main, report
from duetime._config import Settings
from duetime._types import AttemptOutcome, RunState
from duetime.app import AsyncApp
from duetime.registration import JobSpec
from duetime.scheduler.materializer import Materializer
from duetime.store.base import RunCompletion, RunsClaimParams, RunsCompleteParams, RunsStartParams

BATCH = 500


async def _firing(path: str, jobs: int, overlap: bool = False) -> dict[str, float]:
    at = datetime.now(UTC) + timedelta(seconds=60)
    settings = Settings(database_url=path, scheduler_horizon=120.0)
    async with AsyncApp(settings=settings, migrate=True) as app:
        specs = (JobSpec(name=f"shot-{i}", task="duetime.noop", at=at) for i in range(jobs))
        if await app.schedule_many(specs) != jobs:
            raise BenchError("registration fell short")
        store = app.store
        steps: dict[str, float] = {}
        statements: list[str] = []
        conn = getattr(store, "conn", None)
        if conn is None:
            raise BenchError("the store is not SQLite")
        await conn.set_trace_callback(lambda sql: statements.append(sql.split(None, 1)[0]))
        began = time.perf_counter()
        made = await Materializer(store, settings).run_once()
        steps["materialize"] = time.perf_counter() - began
        if made.runs_created != jobs:
            raise BenchError(f"materialized {made.runs_created} of {jobs} runs")
        claimed: list[Any] = []
        began = time.perf_counter()
        while len(claimed) < jobs:
            batch = await store.runs_claim(
                RunsClaimParams(
                    worker_id="bench", tasks=("duetime.noop",), limit=BATCH, lease_ttl=300.0,
                    lookahead=120.0,
                )
            )  # fmt: skip
            if not batch:
                raise BenchError(f"claimed {len(claimed)} of {jobs} runs")
            claimed += batch
        steps["claim"] = time.perf_counter() - began

        async def start(k: int) -> int:
            runs = [(c.run.id, c.run.token) for c in claimed[k : k + BATCH]]
            return len(await store.runs_start(RunsStartParams(runs, now=at)))

        async def complete(k: int) -> int:
            completions = [
                RunCompletion(
                    run_id=c.run.id, token=c.run.token, worker_id="bench",
                    attempt=c.run.attempt, claimed_at=at, started_at=at,
                    outcome=AttemptOutcome.SUCCEEDED, next_state=RunState.SUCCEEDED,
                    completes_job=True,
                )
                for c in claimed[k : k + BATCH]
            ]  # fmt: skip
            return sum(await store.runs_complete(RunsCompleteParams(completions, now=at)))

        batches = range(0, jobs, BATCH)
        began = time.perf_counter()
        if overlap:  # batch k+1 starts while batch k completes
            started = done = 0
            for k in [*batches, jobs]:
                both = await asyncio.gather(
                    start(k) if k < jobs else asyncio.sleep(0, 0),
                    complete(k - BATCH) if k > 0 else asyncio.sleep(0, 0),
                )
                started, done = started + both[0], done + both[1]
            steps["start+complete"] = time.perf_counter() - began
        else:
            started = sum([await start(k) for k in batches])
            steps["start"] = time.perf_counter() - began
            began = time.perf_counter()
            done = sum([await complete(k) for k in batches])
            steps["complete"] = time.perf_counter() - began
        if started != jobs:
            raise BenchError(f"started {started} of {jobs} runs")
        if done != jobs:
            raise BenchError(f"completed {done} of {jobs} runs")
        await conn.set_trace_callback(None)
        steps["statements/run"] = sum(w not in ("BEGIN", "COMMIT") for w in statements) / jobs
        steps["commits/run"] = statements.count("COMMIT") / jobs
    return steps


def sqlite_firing(jobs: int, overlap: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
        return asyncio.run(_firing(str(Path(tmp) / "fire.db"), jobs, overlap))


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--overlap", action="store_true", help="start batch k+1 while batch k completes"
    )
    args = parser.parse_args()
    if args.jobs < 1 or args.repeat < 1:
        raise BenchError("--jobs and --repeat must be at least 1")
    rounds = [sqlite_firing(args.jobs, args.overlap) for _ in range(args.repeat)]
    lines = []
    for r in rounds:
        counts = {k: r.pop(k) for k in ("statements/run", "commits/run")}
        shares = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in r.items())
        per_s = args.jobs / sum(r.values())
        lines.append(
            f"  sqlite firing N={args.jobs}: {per_s:,.0f} runs/s ({shares}); "
            f"{counts['statements/run']:.4f} statements and {counts['commits/run']:.4f} "
            "commits per run"
        )
    if len(rounds) > 1:
        total = Spread.of([args.jobs / sum(r.values()) for r in rounds])
        lines.append(f"median {total.show()} runs/s over {len(rounds)} rounds")
    report(f"SQLite store firing {args.jobs:,} one-shots", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
