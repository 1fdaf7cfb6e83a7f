"""``duetime bench``: the burn-down and fire benchmarks (SPEC §6), against a user's database.

Both run in a scratch database beside the user's (:mod:`duetime.store.scratch`: a fresh
PostgreSQL schema in the same database, or a SQLite file in the same directory), migrated by
the benchmark and dropped at the end, so the user's jobs and runs are never read or written.
The loops run in this process with the product's defaults (the repository's ``bench/``
drives separate ``duetime`` processes and records more; docs/benchmarks.md).

- **Burn-down**: ``runs`` runs already due (triggers of one job), drained by one worker.
  runs/s = runs / (last ``finished_at`` − first ``claimed_at``), both from the database.
- **Fire**: ``rate`` one-shot jobs a second for ``seconds``, materialized by a scheduler and
  fired by a worker. Fire lag = the first attempt's ``started_at`` − the run's
  ``scheduled_for``, from the database (as ``bench/fire.py``); a run that never started is
  counted missing.

A benchmark that cannot finish (a loop died, runs not done within ``timeout`` seconds, runs
that did not succeed) raises :class:`BenchFailed` saying which and why: figures are only
reported for complete measurements.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime._types import Run, RunState
from duetime.app.async_app import AsyncApp, supervise
from duetime.errors import DuetimeError
from duetime.store.base import RunCompletion
from duetime.store.scratch import scratch_database

BURN_TASK = "duetime.bench.burndown"
FIRE_TASK = "duetime.bench.fire"
FIRE_LEAD = 2.0
"""Seconds between registering the fire jobs and the first instant (plus 1 s per 10,000 jobs
registered), so the scheduler and worker are up before the window opens."""
PAGE = 1000
LAG_READS = 50
"""Attempt reads in flight at once when collecting fire lags."""


class BenchFailed(DuetimeError):
    """A benchmark could not produce a complete measurement; the message says why."""


@dataclass(frozen=True)
class BurndownResult:
    runs: int
    seconds: float
    runs_per_second: float


@dataclass(frozen=True)
class FireResult:
    runs: int
    rate: float
    started: int
    missing: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True)
class BenchReport:
    """What ``duetime bench`` prints: the store measured and each benchmark's figures."""

    store: str
    burndown: BurndownResult | None
    fire: FireResult | None

    def jsonable(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "burndown": None if self.burndown is None else asdict(self.burndown),
            "fire": None if self.fire is None else asdict(self.fire),
        }


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of ``values`` (NaN when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


async def _noop(ctx: Any, payload: Any) -> None:
    del ctx, payload


async def run_bench(
    url: str,
    *,
    runs: int = 5000,
    rate: float = 500.0,
    seconds: float = 5.0,
    timeout: float = 120.0,
    burndown: bool = True,
    fire: bool = True,
) -> BenchReport:
    """Measure in a scratch database beside ``url``'s (dropped afterwards, also on failure)."""
    with scratch_database(url) as scratch:
        app = AsyncApp(scratch, migrate=True)
        app.task(BURN_TASK)(_noop)
        app.task(FIRE_TASK)(_noop)
        async with app:
            return BenchReport(
                store=app.dialect,
                burndown=await measure_burndown(app, runs, timeout) if burndown else None,
                fire=await measure_fire(app, rate, seconds, timeout) if fire else None,
            )


async def measure_burndown(app: AsyncApp, runs: int, timeout: float) -> BurndownResult:
    """Trigger ``runs`` runs of one job, then drain them with one worker (its defaults)."""
    job = await app.schedule(
        "bench.burndown", task=BURN_TASK, cron="0 0 1 1 *", overlap="allow", priority=0
    )
    for _ in range(runs):
        await app.trigger(job.id)
    await _serve(app, ("worker",), [BURN_TASK], runs, timeout, "burn-down")
    finished = [run async for run in _runs(app, BURN_TASK)]
    failed = [run for run in finished if run.state != RunState.SUCCEEDED]
    if failed or len(finished) != runs:
        raise BenchFailed(
            f"burn-down: {len(failed) + runs - len(finished)} of {runs} runs did not succeed "
            f"({_states(failed)})"
        )
    first = min(_at(run.claimed_at) for run in finished)
    last = max(_at(run.finished_at) for run in finished)
    elapsed = max((last - first).total_seconds(), 1e-6)
    return BurndownResult(runs=runs, seconds=elapsed, runs_per_second=runs / elapsed)


async def measure_fire(app: AsyncApp, rate: float, seconds: float, timeout: float) -> FireResult:
    """``rate`` one-shots a second for ``seconds``, fired by a scheduler and a worker."""
    count = max(1, round(rate * seconds))
    start = app.clock.now() + timedelta(seconds=FIRE_LEAD + count / 10_000)
    step = timedelta(seconds=1 / rate)
    await app.schedule_many(
        {"name": f"bench.fire.{i:07d}", "task": FIRE_TASK, "at": start + i * step}
        for i in range(count)
    )
    window = (start - app.clock.now()).total_seconds() + seconds
    await _serve(app, ("scheduler", "worker"), [FIRE_TASK], count, window + timeout, "fire")
    lags = await _fire_lags(app, [run async for run in _runs(app, FIRE_TASK)])
    if not lags:
        raise BenchFailed(f"fire: none of the {count} runs started")
    return FireResult(
        runs=count,
        rate=rate,
        started=len(lags),
        missing=count - len(lags),
        p50_ms=percentile(lags, 50),
        p95_ms=percentile(lags, 95),
        p99_ms=percentile(lags, 99),
        max_ms=max(lags),
    )


async def _serve(
    app: AsyncApp,
    roles: tuple[str, ...],
    tasks: list[str],
    expected: int,
    timeout: float,
    name: str,
) -> None:
    """Run the loops of ``roles`` until ``expected`` runs ended (succeeded or dead)."""
    ended = 0
    all_ended = asyncio.Event()

    def heard(completion: RunCompletion, applied: bool) -> None:
        nonlocal ended
        if applied and completion.next_state in (RunState.SUCCEEDED, RunState.DEAD):
            ended += 1
            if ended >= expected:
                all_ended.set()

    stop = asyncio.Event()
    worker = app.worker(tasks=tasks, on_complete=heard)
    loops: list[Coroutine[Any, Any, None]] = [
        *app.node_loops(stop, roles=roles),
        worker.run(stop),
    ]
    serving = asyncio.ensure_future(supervise(stop, *loops))
    waiting = asyncio.ensure_future(all_ended.wait())
    try:
        done, _ = await asyncio.wait(
            [serving, waiting], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if serving in done:
            error = serving.exception()
            raise BenchFailed(f"{name}: the loops stopped early ({error or 'no error'})")
        if waiting not in done:
            raise BenchFailed(f"{name}: {ended} of {expected} runs ended within {timeout:.1f} s")
    finally:
        waiting.cancel()
        stop.set()
        await asyncio.gather(serving, return_exceptions=True)


async def _fire_lags(app: AsyncApp, runs: list[Run]) -> list[float]:
    """Milliseconds from each started run's instant to its first attempt's start. A start is
    written ahead of the instant and stamped with it (decision 0006), so the run's own
    ``started_at`` says nothing of lateness; the attempt's is the worker's reading when it
    called the task."""
    lags: list[float] = []
    started = [run for run in runs if run.started_at is not None]
    for offset in range(0, len(started), LAG_READS):
        chunk = started[offset : offset + LAG_READS]
        for run, attempts in zip(
            chunk, await asyncio.gather(*(app.runs.attempts(r.id) for r in chunk)), strict=True
        ):
            first = min((a.started_at for a in attempts if a.started_at), default=None)
            if first is not None:
                lags.append((first - run.scheduled_for).total_seconds() * 1000)
    return lags


async def _runs(app: AsyncApp, task: str) -> AsyncIterator[Run]:
    cursor = None
    while True:
        page = await app.runs.find(task=task, limit=PAGE, cursor=cursor)
        for run in page.items:
            yield run
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _at(value: datetime | None) -> datetime:
    if value is None:
        raise BenchFailed("a finished run has no claim or finish instant")
    return value


def _states(runs: Sequence[Run]) -> str:
    counts: dict[str, int] = {}
    for run in runs:
        counts[str(run.state)] = counts.get(str(run.state), 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "missing"
