"""The worker's own cost per run, in instructions (callgrind): repeatable on a loaded machine.

    python -m bench.worker_cost                          # PostgreSQL, 2,000 and 6,000 runs
    python -m bench.worker_cost --store sqlite
    python -m bench.worker_cost --small 1000 --large 3000
    python -m bench.worker_cost --once 2000              # no valgrind: one burn-down, µs/run
    python -m bench.worker_cost --keep /tmp/cg           # keep the callgrind files (annotate)

One `Worker` with the product's defaults, in a process of its own with the garbage collector
tuned as `duetime worker` tunes it (``cli._lifecycle.tune_gc``; ``--gc-defaults``: left as
Python sets it, as before 2026-11-25's third pass), drains N cloned no-op runs
(bench.burndown's uniform mix) and stops once it has heard N + 1 completions (the template
run too). That process runs under ``valgrind --tool=callgrind`` for two sizes; the worker's
instructions per run are instr(large) − instr(small) over large − small runs, so what does
not grow with N (imports, start, shutdown) cancels out. The database server's work is not in
the figure (another process). Seeding and cloning happen in this process, outside valgrind.

Callgrind slows the worker ~50×, so loops paced by the clock (heartbeat, misfire judging,
polls) run a little more often than at full speed: expect ±1–2 %.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import guarded_main
from bench.burndown import Database
from duetime import AsyncApp
from duetime._config import Settings
from duetime._types import RunState
from duetime.cli._lifecycle import tune_gc
from duetime.store.base import RunCompletion
from duetime.worker import claim_ahead
from duetime.worker import worker as worker_module
from duetime.worker.worker import ClaimTaken, Worker

TASK = "duetime.noop"
VALGRIND_SLOWDOWN = 50.0
"""About how much slower the worker runs under callgrind (see :func:`_slowed`)."""


async def _seed(url: str) -> str:
    async with AsyncApp(url, migrate=False) as app:
        await app.schedule("bench.burn", task=TASK, cron="0 0 1 1 *", overlap="allow")
        run = await app.trigger("bench.burn")
    return str(run.id)


def _slowed(factor: float) -> None:
    """Stretch the worker's waits that are measured against its own speed by ``factor`` (the
    slowdown valgrind causes): a run held ahead of a free slot is handed back after
    ``HELD_WAIT_LIMIT`` (at full speed no run of a no-op burn-down waits that long), and the
    completer lingers ``COMPLETION_LINGER`` for company. Without this, a worker slowed down
    ~50× hands runs back and claims them again, and writes smaller completion batches: work
    a worker at full speed does not do."""
    claim_ahead.SOON *= factor
    worker_module.HELD_WAIT_LIMIT *= factor  # type: ignore[attr-defined]
    worker_module.COMPLETION_LINGER *= factor


async def _drain(url: str, expected: int) -> float:
    """Serve with one worker (product defaults) until ``expected`` runs succeeded; returns the
    seconds from the first claim's answer to the last completion heard. Raises if any
    attempt did not succeed (a run handed back, say)."""
    app = AsyncApp(settings=Settings(database_url=url), migrate=False)
    await app.open()
    try:
        stop = asyncio.Event()
        heard = 0
        first: list[float] = []
        others: list[RunCompletion] = []

        worker = Worker(app.store, app.registry, app.settings, tasks=[TASK])
        before = worker.completer.listener

        def heard_too(completion: RunCompletion, applied: bool) -> None:
            nonlocal heard
            if before is not None:
                before(completion, applied)
            if not applied or completion.next_state is not RunState.SUCCEEDED:
                others.append(completion)
                stop.set()
            heard += 1
            if heard >= expected:
                stop.set()

        def claimed(taken: ClaimTaken) -> None:
            if not first:
                first.append(time.perf_counter())

        worker.completer.listener = heard_too
        worker.signals.claimed.on(claimed)
        await worker.run(stop)
        if others:
            c = others[0]
            raise RuntimeError(
                f"{len(others)} attempts did not succeed, as run {c.run_id}'s "
                f"({c.next_state}, {c.reason}): the figure would count work a worker at full "
                "speed does not do"
            )
        if heard < expected:
            raise RuntimeError(f"worker stopped after {heard} of {expected} completions")
        return time.perf_counter() - first[0]
    finally:
        await app.close()


def _prepared(store: str, runs: int) -> Database:
    db = Database(store)
    template = asyncio.run(_seed(db.url))
    db.clone_runs(template, runs)
    return db


def _instructions(
    store: str, runs: int, keep: Path | None = None, gc_defaults: bool = False
) -> int:
    """The worker process's instructions (callgrind's total) draining ``runs`` runs; with
    ``keep``, its callgrind file is left there (for ``callgrind_annotate``)."""
    db = _prepared(store, runs)
    try:
        with tempfile.TemporaryDirectory(prefix="duetime-callgrind-") as tmp:
            out = (keep or Path(tmp)) / f"callgrind.{store}.{runs}.out"
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                 sys.executable, "-m", "bench.worker_cost", "--child", db.url, str(runs + 1),
                 "--slowdown", str(VALGRIND_SLOWDOWN), *(["--gc-defaults"] if gc_defaults else [])],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )  # fmt: skip
            for line in out.read_text().splitlines():
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
        raise RuntimeError("callgrind wrote no totals")
    finally:
        db.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=6000)
    parser.add_argument("--once", type=int, help="one burn-down of N runs without valgrind")
    parser.add_argument("--keep", type=Path, help="leave the callgrind files in this folder")
    parser.add_argument(
        "--gc-defaults",
        action="store_true",
        help="leave the garbage collector as Python sets it (`duetime worker` tunes it first)",
    )
    parser.add_argument("--slowdown", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=2, metavar=("URL", "COMPLETIONS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _slowed(args.slowdown)
        if not args.gc_defaults:
            tune_gc()
        asyncio.run(_drain(args.child[0], int(args.child[1])))
        return
    if args.once:
        db = _prepared(args.store, args.once)
        try:
            if not args.gc_defaults:
                tune_gc()
            cpu0 = time.process_time()
            span = asyncio.run(_drain(db.url, args.once + 1))
            cpu = time.process_time() - cpu0
        finally:
            db.drop()
        print(
            f"{args.store}: {args.once:,} runs, {args.once / span:,.0f} runs/s, "
            f"worker CPU {cpu / args.once * 1e6:.1f} µs/run (load {os.getloadavg()[0]:.1f})"
        )
        return
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    small = _instructions(args.store, args.small, args.keep, args.gc_defaults)
    large = _instructions(args.store, args.large, args.keep, args.gc_defaults)
    per_run = (large - small) / (args.large - args.small)
    print(
        f"{args.store}: instr({args.small:,}) = {small:,}, instr({args.large:,}) = {large:,}: "
        f"{per_run / 1000:,.1f} k instructions per run"
    )


if __name__ == "__main__":
    guarded_main(main)
