"""PgQueuer side of the peer benchmarks. Runs inside PgQueuer's own virtualenv
(bench/.peers/pgqueuer-VERSION), driven by bench/peers.py; imports neither duetime nor bench.

    python peer_pgqueuer.py setup DSN
    python peer_pgqueuer.py enqueue DSN N [START_EPOCH SECONDS]   # due now, or spread
    python peer_pgqueuer.py work DSN OUT.json --batch B [--duration D]

``work`` drains the queue (or runs ``--duration`` seconds) and writes its first start, its exit
time, the job count and each job's lag (start − execute_after) in ms to OUT.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode


async def setup(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    await Queries(AsyncpgDriver(conn)).install()
    await conn.close()


async def enqueue(dsn: str, n: int, start: float | None, seconds: float) -> None:
    conn = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(conn))
    began = time.time()
    chunk = 10_000
    for first in range(0, n, chunk):
        count = min(chunk, n - first)
        after = None
        if start is not None:
            now = time.time()
            after = [
                timedelta(seconds=max(0.0, start + (first + i) * seconds / n - now))
                for i in range(count)
            ]
        await queries.enqueue(["noop"] * count, [None] * count, [0] * count, after)
    print(json.dumps({"enqueue_s": time.time() - began}))
    await conn.close()


async def work(dsn: str, out: str, batch: int | None, duration: float | None) -> None:
    conn = await asyncpg.connect(dsn)
    qm = QueueManager(Queries(AsyncpgDriver(conn)))
    lags: list[float] = []
    first: list[float] = []

    @qm.entrypoint("noop")
    async def noop(job: object) -> None:
        now = datetime.now(UTC)
        if not first:
            first.append(now.timestamp())
        lags.append((now - job.execute_after).total_seconds() * 1000)  # type: ignore[attr-defined]

    options = {} if batch is None else {"batch_size": batch}
    if duration is None:
        await qm.run(mode=QueueExecutionMode.drain, **options)
    else:

        async def stop() -> None:
            await asyncio.sleep(duration)
            qm.shutdown.set()

        stopper = asyncio.create_task(stop())
        await qm.run(**options)
        stopper.cancel()
    exit_time = time.time()
    with open(out, "w") as f:  # noqa: ASYNC230 - once, at exit
        json.dump(
            {"first": first[0] if first else None, "exit": exit_time, "lags": lags,
             "done": len(lags)},
            f,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["setup", "enqueue", "work"])
    parser.add_argument("dsn")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--duration", type=float)
    args = parser.parse_args()
    if args.mode == "setup":
        asyncio.run(setup(args.dsn))
    elif args.mode == "enqueue":
        start = float(args.rest[1]) if len(args.rest) > 1 else None
        seconds = float(args.rest[2]) if len(args.rest) > 2 else 0.0
        asyncio.run(enqueue(args.dsn, int(args.rest[0]), start, seconds))
    else:
        asyncio.run(work(args.dsn, args.rest[0], args.batch, args.duration))


if __name__ == "__main__":
    main()
