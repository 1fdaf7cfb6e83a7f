"""Procrastinate side of the peer benchmarks. Runs inside Procrastinate's own virtualenv
(bench/.peers/procrastinate-VERSION), driven by bench/peers.py; imports neither duetime nor
bench.

    python peer_procrastinate.py setup DSN
    python peer_procrastinate.py enqueue DSN N [START_EPOCH SECONDS]   # due now, or spread
    python peer_procrastinate.py work DSN OUT.json [--polling S] [--duration D]

``work`` drains the queue (or runs ``--duration`` seconds) with Procrastinate's default worker
settings (``--polling`` overrides ``fetch_job_polling_interval``) and writes its first start,
exit time and each job's lag (start − scheduled_at, or − defer time when due at once) in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from datetime import UTC, datetime
from typing import Any

import procrastinate

LAGS: list[float] = []
FIRST: list[float] = []
DONE: list[int] = []


def make_app(dsn: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop", pass_context=True)
    async def noop(context: Any) -> None:
        now = datetime.now(UTC)
        if not FIRST:
            FIRST.append(now.timestamp())
        scheduled = context.job.scheduled_at
        DONE.append(1)
        if scheduled is not None:
            LAGS.append((now - scheduled).total_seconds() * 1000)

    return app


async def setup(dsn: str) -> None:
    app = make_app(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def enqueue(dsn: str, n: int, start: float | None, seconds: float) -> None:
    app = make_app(dsn)
    task = app.tasks["noop"]
    began = time.time()
    async with app.open_async():
        if start is None:
            for first in range(0, n, 5000):
                await task.batch_defer_async(*([{}] * min(5000, n - first)))
        else:
            # one batch per 10 ms slot of the window (each job keeps its own exact instant
            # as scheduled_at is per batch: the slot's instant)
            slots: dict[int, int] = {}
            for i in range(n):
                slot = int((i * seconds / n) * 100)
                slots[slot] = slots.get(slot, 0) + 1
            for slot, count in sorted(slots.items()):
                at = datetime.fromtimestamp(start + slot / 100, UTC)
                await task.configure(schedule_at=at).batch_defer_async(*([{}] * count))
    print(json.dumps({"enqueue_s": time.time() - began}))


async def work(dsn: str, out: str, polling: float | None, duration: float | None) -> None:
    app = make_app(dsn)
    options: dict[str, Any] = {"wait": duration is not None}
    if polling is not None:
        options["fetch_job_polling_interval"] = polling
    async with app.open_async():
        if duration is None:
            await app.run_worker_async(**options)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(app.run_worker_async(**options), duration)
    with open(out, "w") as f:  # noqa: ASYNC230 - once, at exit
        json.dump(
            {"first": FIRST[0] if FIRST else None, "exit": time.time(), "lags": LAGS,
             "done": len(DONE)},
            f,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["setup", "enqueue", "work"])
    parser.add_argument("dsn")
    parser.add_argument("rest", nargs="*")
    parser.add_argument("--polling", type=float)
    parser.add_argument("--duration", type=float)
    args = parser.parse_args()
    if args.mode == "setup":
        asyncio.run(setup(args.dsn))
    elif args.mode == "enqueue":
        start = float(args.rest[1]) if len(args.rest) > 1 else None
        seconds = float(args.rest[2]) if len(args.rest) > 2 else 0.0
        asyncio.run(enqueue(args.dsn, int(args.rest[0]), start, seconds))
    else:
        asyncio.run(work(args.dsn, args.rest[0], args.polling, args.duration))


if __name__ == "__main__":
    main()
