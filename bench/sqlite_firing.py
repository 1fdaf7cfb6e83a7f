"""SQLite: the store's share of firing one-shot jobs, without processes or timers.

    python -m bench.sqlite_firing --jobs 10000
    python -m bench.ab --old <checkout> sqlite_firing --jobs 10000

On a fresh SQLite file, N one-shot jobs (every setting the product's default, so overlap
``skip`` and an overlap key per job) due one minute ahead are registered; then, timed apart,
what `duetime up` does to them through its one connection: the scheduler's pass
(``Materializer.run_once``, unpaced), claims ahead of the instant (batches of 500), the starts
of the claimed runs (``runs_start``, as the worker's starter writes them), their completions.
Figure: runs/s through all four (each step's share is printed too). The machine's load falls
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


async def _firing(path: str, jobs: int) -> dict[str, float]:
    at = datetime.now(UTC) + timedelta(seconds=60)
    settings = Settings(database_url=path, scheduler_horizon=120.0)
    async with AsyncApp(settings=settings, migrate=True) as app:
        specs = (JobSpec(name=f"shot-{i}", task="duetime.noop", at=at) for i in range(jobs))
        if await app.schedule_many(specs) != jobs:
            raise BenchError("registration fell short")
        store = app.store
        steps: dict[str, float] = {}
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
        began = time.perf_counter()
        started = 0
        for k in range(0, jobs, BATCH):
            runs = [(c.run.id, c.run.token) for c in claimed[k : k + BATCH]]
            started += len(await store.runs_start(RunsStartParams(runs, now=at)))
        steps["start"] = time.perf_counter() - began
        if started != jobs:
            raise BenchError(f"started {started} of {jobs} runs")
        began = time.perf_counter()
        done = 0
        for k in range(0, jobs, BATCH):
            completions = [
                RunCompletion(
                    run_id=c.run.id, token=c.run.token, worker_id="bench",
                    attempt=c.run.attempt, claimed_at=at, started_at=at,
                    outcome=AttemptOutcome.SUCCEEDED, next_state=RunState.SUCCEEDED,
                    completes_job=True,
                )
                for c in claimed[k : k + BATCH]
            ]  # fmt: skip
            done += sum(await store.runs_complete(RunsCompleteParams(completions, now=at)))
        steps["complete"] = time.perf_counter() - began
        if done != jobs:
            raise BenchError(f"completed {done} of {jobs} runs")
    return steps


def sqlite_firing(jobs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
        return asyncio.run(_firing(str(Path(tmp) / "fire.db"), jobs))


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.jobs < 1 or args.repeat < 1:
        raise BenchError("--jobs and --repeat must be at least 1")
    rounds = [sqlite_firing(args.jobs) for _ in range(args.repeat)]
    lines = []
    for r in rounds:
        shares = ", ".join(f"{step} {seconds:.2f} s" for step, seconds in r.items())
        per_s = args.jobs / sum(r.values())
        lines.append(f"  sqlite firing N={args.jobs}: {per_s:,.0f} runs/s ({shares})")
    if len(rounds) > 1:
        total = Spread.of([args.jobs / sum(r.values()) for r in rounds])
        lines.append(f"median {total.show()} runs/s over {len(rounds)} rounds")
    report(f"SQLite store firing {args.jobs:,} one-shots", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
