"""Leader and partition takeover after a SIGKILL, with the product's defaults.

    python -m bench.takeover --rounds 3
    python -m bench.takeover --lag-jobs 20000

Each round: a fresh PostgreSQL database, 64 jobs firing every second, two ``duetime
scheduler`` processes with the default settings. Once they split the 256 partitions (128
each) and one leads, the leader is killed with SIGKILL at a random point of its renewal
cycle. Measured from the database (its clock, polled every 20 ms):

- **leader**: the new leader's ``elected_at`` minus the instant of the kill;
- **partitions**: when the survivor first holds every lease of the victim's half;
- **first orphan run**: the first run of a job of the victim's half that the survivor created
  (runs created ahead by the victim, within its horizon, are not counted);
- **late**: the latest any orphan occurrence was materialized relative to its instant (the
  schedulers materialize ``scheduler_horizon`` ahead, so a negative figure means no occurrence
  was late), and whether each orphan job has every second exactly once.

``--lag-jobs N``: the event-loop lag effect instead. One in-process scheduler (partition
keeper and materializer on one event loop, as ``duetime scheduler`` runs them) materializes
a burst of N every-second jobs all due at once; reported: the longest time between two
lease renewals (renewals are due every ``ttl / 3``; a lease lapses only past ``ttl``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg

from bench._common import (
    BENCH_TAG,
    BenchError,
    base_parser,
    create_database,
    drop_database,
    duetime_env,
    guarded_main,
    migrate,
    report,
    spawn,
    stop_all,
)
from duetime import AsyncApp
from duetime._config import Settings

JOBS = 64
_T = TypeVar("_T")


def pid_of(node_id: str) -> int:
    return int(node_id.split(":")[1])


async def _jobs(app: AsyncApp, count: int) -> list[tuple[object, int]]:
    made = []
    for i in range(count):
        job = await app.schedule(
            f"tick-{i}", task="bench.noop", cron="* * * * * *", allow_unregistered=True
        )
        made.append((job.id, job.partition))
    return made


async def _poll(probe: object, timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await probe()  # type: ignore[operator]
        if value:
            return value
        await asyncio.sleep(0.02)
    raise BenchError(f"timed out waiting for {what}")


async def one_round(url: str) -> dict[str, float | bool]:
    async with AsyncApp(url) as app:
        store = app.store
        jobs = await _jobs(app, JOBS)
        procs = {p.pid: p for p in (spawn_scheduler(url), spawn_scheduler(url))}
        try:
            return await _measure(app, store, jobs, procs)
        finally:
            stop_all(procs.values())


def spawn_scheduler(url: str) -> subprocess.Popen[bytes]:
    return spawn(
        [sys.executable, "-m", "duetime", "scheduler", "--db", url, "--log-level", "warning"],
        env=duetime_env(),
    )


async def _measure(app, store, jobs, procs) -> dict[str, float | bool]:  # type: ignore[no-untyped-def]
    async def split() -> dict[int, set[int]] | None:
        now = await store.db_now()
        held: dict[int, set[int]] = {}
        for lease in await store.partition_leases_list():
            if lease.expires_at > now:
                held.setdefault(pid_of(lease.owner), set()).add(lease.partition)
        lead = await store.leader_get()
        if lead is None or lead.expires_at <= now:
            return None
        return held if sorted(map(len, held.values())) == [128, 128] else None

    halves = await _poll(split, 60, "two halves and a leader")
    await asyncio.sleep(random.uniform(0, 1.0))  # a random point of the renewal cycle
    lead = await store.leader_get()
    victim = pid_of(lead.node_id)
    survivor = next(pid for pid in procs if pid != victim)
    orphans = {job_id for job_id, part in jobs if part in halves[victim]}  # type: ignore[index]
    os.kill(victim, signal.SIGKILL)
    killed_at = await store.db_now()
    procs[victim].wait()

    async def new_leader() -> datetime | None:
        now = await store.db_now()
        lead = await store.leader_get()
        ok = lead and pid_of(lead.node_id) == survivor and lead.expires_at > now
        return lead.elected_at if ok else None

    async def taken() -> datetime | None:
        now = await store.db_now()
        mine = {
            lease.partition
            for lease in await store.partition_leases_list()
            if pid_of(lease.owner) == survivor and lease.expires_at > now
        }
        return now if mine >= halves[survivor] | halves[victim] else None  # type: ignore[index]

    elected_at, taken_at = await asyncio.gather(
        _poll(new_leader, 30, "a new leader"), _poll(taken, 30, "the takeover")
    )

    async def first_orphan_run() -> datetime | None:
        rows = await _orphan_runs(app, orphans, killed_at)
        return min((r.created_at for r in rows), default=None)

    first = await _poll(first_orphan_run, 30, "an orphan run")
    await asyncio.sleep(4)  # let the survivor materialize a few more seconds
    runs = await _orphan_runs(app, orphans, killed_at - timedelta(seconds=60))
    after = [r for r in runs if r.created_at > killed_at]
    late = max((r.created_at - r.scheduled_for).total_seconds() for r in after)
    exact = True
    for job_id in orphans:
        instants = sorted(r.scheduled_for for r in runs if r.job_id == job_id)
        span = int((instants[-1] - instants[0]).total_seconds()) + 1
        exact = exact and len(instants) == span == len(set(instants))
    return {
        "leader": (elected_at - killed_at).total_seconds(),  # type: ignore[operator]
        "partitions": (taken_at - killed_at).total_seconds(),  # type: ignore[operator]
        "first_run": (first - killed_at).total_seconds(),  # type: ignore[operator]
        "late": late,
        "exact": exact,
    }


async def _orphan_runs(app: AsyncApp, orphans: set[object], since: datetime) -> list:  # type: ignore[type-arg]
    rows = []
    for job_id in orphans:
        page = await app.runs(job_id, limit=1000)
        rows += [r for r in page.items if r.created_at > since]
    return rows


async def lag_effect(url: str, count: int) -> dict[str, float]:
    from duetime.leadership.partitions import PartitionKeeper
    from duetime.leadership.presence import new_node_id

    settings = Settings()
    async with AsyncApp(url) as app:
        spec = {"task": "bench.noop", "cron": "* * * * * *"}
        await app.bulk.schedule_many(
            ({**spec, "name": f"burst-{i}"} for i in range(count)), allow_unregistered=True
        )
        node = new_node_id()
        keeper = PartitionKeeper(app.store, node, ttl=settings.partition_lease_ttl)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        lags: list[float] = []

        async def probe() -> None:
            while not stop.is_set():
                t = loop.time()
                await asyncio.sleep(0.01)
                lags.append(loop.time() - t - 0.01)

        async def burst() -> None:
            await keeper.ready.wait()
            ticking = asyncio.ensure_future(app.materializer(owner=node).run(stop))
            await asyncio.sleep(20)
            stop.set()
            ticking.cancel()  # an overloaded tick goes on batch after batch
            await asyncio.gather(ticking, return_exceptions=True)

        await asyncio.gather(keeper.run(stop), probe(), burst())
    with psycopg.connect(url) as conn:
        row = conn.execute(f"{BENCH_TAG} SELECT count(*) FROM runs").fetchone()
    return {
        "max_gap": keeper.max_gap,
        "interval": keeper.interval,
        "max_lag": max(lags),
        "runs": float(row[0] if row else 0),
    }


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lag-jobs", type=int, default=0)
    args = parser.parse_args()
    if args.lag_jobs:
        lines = _lag_lines(_fresh(lambda url: lag_effect(url, args.lag_jobs)), args)
        title = "Partition lease renewals under load"
    else:
        lines = _takeover_lines([_fresh(one_round) for _ in range(args.rounds)])
        title = "Leader and partition takeover (SIGKILL)"
    report(title, lines, record=args.record)


def _fresh(measure: Callable[[str], Coroutine[Any, Any, _T]]) -> _T:
    """``measure`` on a fresh, migrated database, dropped afterwards."""
    url = create_database("takeover")
    try:
        migrate(url)
        return asyncio.run(measure(url))
    finally:
        drop_database(url)


def _takeover_lines(rounds: list[dict[str, float | bool]]) -> list[str]:
    lines = [
        f"round {i + 1}: leader {r['leader']:.2f} s, partitions {r['partitions']:.2f} s, "
        f"first orphan run {r['first_run']:.2f} s, latest materialization "
        f"{r['late']:+.2f} s vs its instant, every occurrence once: {r['exact']}"
        for i, r in enumerate(rounds)
    ]
    for key in ("leader", "partitions", "first_run"):
        values = [float(r[key]) for r in rounds]
        lines.append(f"{key}: median {statistics.median(values):.2f} s, max {max(values):.2f} s")
    return lines


def _lag_lines(figures: dict[str, float], args: argparse.Namespace) -> list[str]:
    return [
        f"{args.lag_jobs} every-second jobs, one scheduler for 20 s: "
        f"{figures['runs']:.0f} runs materialized",
        f"longest event-loop stall (10 ms probe): {figures['max_lag'] * 1000:.0f} ms",
        f"longest gap between lease renewals: {figures['max_gap']:.2f} s "
        f"(renewal every {figures['interval']:.2f} s, lease {3 * figures['interval']:.1f} s)",
    ]


if __name__ == "__main__":
    guarded_main(main)
