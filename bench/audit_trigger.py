"""What the audit trail costs a trigger: ``store.run_trigger`` with and without the call's
audit entry pending, interleaved, on SQLite and PostgreSQL (docs/decisions/0021).

    python -m bench.audit_trigger --count 1000 --rounds 3

Each round measures, one after the other on the same store and job, ``count`` sequential
triggers without an entry (the path the scheduler's own writes take, and the whole trigger
before the trail existed) and ``count`` with one (what ``app.trigger`` does: on PostgreSQL the
record is a data-modifying CTE of the same one statement; on SQLite a second INSERT in the same
``BEGIN IMMEDIATE``). It reports the median µs per trigger of each and their difference, with
the spread over the rounds.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench._common import base_parser, create_database, drop_database, guarded_main, report
from duetime import AsyncApp
from duetime._audit import AuditEntry, recording
from duetime.store.base import JobRef, RunTriggerParams, Store


async def _triggers(store: Store, ref: JobRef, count: int, audited: bool) -> tuple[float, float]:
    """Wall and CPU (this process, threads included: SQLite's work) µs per trigger over
    ``count`` sequential triggers."""
    params = RunTriggerParams(job=ref, payload=None, priority=None, idempotency_key=None)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        if audited:
            entry = AuditEntry("default", "bench", "triggered", "job", subject_name=ref.name)
            with recording(entry):
                await store.run_trigger(params)
        else:
            await store.run_trigger(params)
    wall = (time.perf_counter() - start) / count * 1e6
    return wall, (time.process_time() - cpu) / count * 1e6


Figures = list[tuple[float, float]]


async def measure(url: str, count: int, rounds: int) -> tuple[Figures, Figures]:
    async with AsyncApp(url, migrate=True) as app:
        await app.schedule("bench.trigger", task="duetime.noop", cron="0 0 1 1 *", overlap="allow")
        store = app.store
        ref = JobRef(tenant="default", name="bench.trigger")
        await _triggers(store, ref, 50, audited=True)  # warm the pool and the statements
        plain: Figures = []
        audited: Figures = []
        for _ in range(rounds):
            plain.append(await _triggers(store, ref, count, audited=False))
            audited.append(await _triggers(store, ref, count, audited=True))
        return plain, audited


def _line(dialect: str, plain: Figures, audited: Figures) -> list[str]:
    out = []
    for i, what in ((0, "wall"), (1, "client CPU")):
        before = [p[i] for p in plain]
        after = [a[i] for a in audited]
        diffs = [a - p for p, a in zip(before, after, strict=True)]
        out.append(
            f"{dialect} {what}: without audit {statistics.median(before):.0f} µs/trigger "
            f"({min(before):.0f}-{max(before):.0f}), with {statistics.median(after):.0f} "
            f"({min(after):.0f}-{max(after):.0f}); cost {statistics.median(diffs):+.0f} µs "
            f"({min(diffs):+.0f} to {max(diffs):+.0f}, per round)"
        )
    return out


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="triggers per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_url = str(Path(tmp) / "bench.db")
        lines += _line("sqlite", *asyncio.run(measure(sqlite_url, args.count, args.rounds)))
    pg_url = create_database("audit_trigger")
    try:
        lines += _line("postgres", *asyncio.run(measure(pg_url, args.count, args.rounds)))
    finally:
        drop_database(pg_url)
    report("audit cost per trigger", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
