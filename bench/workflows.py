"""Workflows on PostgreSQL, run by real `duetime worker` processes: step hand-off latency of a
10-step chain, and a wide fan-out with its fan-in — beside a plain burn-down of as many runs in
the same sitting, rounds interleaved.

    python -m bench.workflows                      # 30 chains of 10, one at a time; fan-out 10,000
    python -m bench.workflows --items 2000 --chains 10 --rounds 1   # a smoke run

Hand-off = a step's run ``started_at`` − its parent's run ``finished_at`` (the child's run is
created in the transaction that records the parent's end, docs/decisions/0020); every pair of
a chain counts. The chains run one at a time (a chain's hand-offs, not a queue of them; the
benchmark asks every 0.1 s whether the current one is over). Fan-out: steps/s = items / (last
item ``finished_at`` − the source's ``finished_at``); the fan-in must start exactly once and
see every item's result. The plain burn-down (bench/burndown.py, the same number of no-op
runs, the same workers) gives runs/s for the ratio. All figures come from the database after
the fact.

Exits non-zero with the reason when a phase fails (an instance that does not succeed in
``--timeout`` s, a fan-in started twice or with missing results).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from bench._common import (
    BenchError,
    Spread,
    base_parser,
    check_alive,
    create_database,
    drop_database,
    guarded_main,
    measured_env,
    migrate,
    percentile,
    report,
    spawn,
    stop_all,
    wait_for,
)
from bench.burndown import duetime_burndown

TASKS = '''\
"""Tasks of bench/workflows.py (written by it into a temporary directory)."""

from duetime import App

app = App()


@app.task("wfb.noop")
def noop(ctx):
    return None


@app.task("wfb.fan")
def fan(ctx):
    return list(range(ctx.workflow.input["items"]))


@app.task("wfb.item")
def item(ctx, payload):
    return payload


@app.task("wfb.join")
def join(ctx):
    return len(ctx.parents["item"])
'''


def _chain() -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"name": "s0", "task": "wfb.noop"}]
    steps += [{"name": f"s{i}", "task": "wfb.noop", "after": [f"s{i - 1}"]} for i in range(1, 10)]
    return {"name": "chain", "steps": steps}


FAN = {
    "name": "fan",
    "steps": [
        {"name": "source", "task": "wfb.fan"},
        {"name": "item", "task": "wfb.item", "map_over": "source"},
        {"name": "join", "task": "wfb.join", "after": ["item"]},
    ],
}


async def _register(url: str) -> None:
    from duetime import AsyncApp
    from duetime._config import Settings

    settings = Settings(database_url=url, workflow_max_mapped=1_000_000)
    async with AsyncApp(url, settings=settings) as app:
        await app.workflows.register(_chain(), allow_unregistered=True)
        await app.workflows.register(FAN, allow_unregistered=True)


async def _start(url: str, workflow: str, count: int, payload: Any = None) -> None:
    """``count`` instances of ``workflow``: manual runs of one workflow job (no scheduler
    runs here; the job's own instant is a day away)."""
    from datetime import timedelta

    from duetime import AsyncApp

    async with AsyncApp(url) as app:
        job = await app.schedule(
            f"bench-{workflow}",
            target={"type": "workflow", "name": workflow},
            at=timedelta(days=1),
            overlap="allow",
        )
        for _ in range(count):
            await app.trigger(job.id, payload=payload)


def _open(conn: psycopg.Connection[Any], workflow: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM workflow_instances WHERE workflow = %s AND state = 'running'",
        (workflow,),
    ).fetchone()
    return int(row[0]) if row else 0


def _started(conn: psycopg.Connection[Any], workflow: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM workflow_instances WHERE workflow = %s", (workflow,)
    ).fetchone()
    return int(row[0]) if row else 0


def _handoffs_ms(conn: psycopg.Connection[Any]) -> list[float]:
    rows = conn.execute(
        """
        SELECT extract(epoch FROM c.started_at - p.finished_at) * 1000
        FROM workflow_instances i
        JOIN workflow_steps ps ON ps.instance_id = i.id
        JOIN workflow_steps cs ON cs.instance_id = i.id
             AND cs.step = 's' || (substr(ps.step, 2)::int + 1)
        JOIN runs p ON p.id = ps.run_id
        JOIN runs c ON c.id = cs.run_id
        WHERE i.workflow = 'chain' AND i.state = 'succeeded'
        """
    ).fetchall()
    return [float(r[0]) for r in rows]


def _fan_figures(conn: psycopg.Connection[Any], items: int) -> dict[str, float]:
    [instance] = conn.execute(
        "SELECT id, state, reason FROM workflow_instances WHERE workflow = 'fan'"
    ).fetchall()
    if instance[1] != "succeeded":
        raise BenchError(f"fan-out instance {instance[1]}: {instance[2]}")
    runs = conn.execute(
        """
        SELECT s.step, s.map_index, r.finished_at, r.started_at, r.result::text
        FROM workflow_steps s JOIN runs r ON r.id = s.run_id
        WHERE s.instance_id = %s
        """,
        (instance[0],),
    ).fetchall()
    joins = [r for r in runs if r[0] == "join"]
    if len(joins) != 1 or joins[0][4] != str(items):
        raise BenchError(f"the fan-in ran {len(joins)} times, result {[j[4] for j in joins]}")
    keyed = conn.execute(
        "SELECT count(*) FROM runs WHERE idempotency_key LIKE %s", (f"wf:{instance[0]}:join:%",)
    ).fetchone()
    if not keyed or keyed[0] != 1:
        raise BenchError(f"{keyed} fan-in runs in the database")
    source_done = next(r[2] for r in runs if r[0] == "source")
    item_rows = [r for r in runs if r[0] == "item"]
    if len(item_rows) != items:
        raise BenchError(f"{len(item_rows)} item runs, expected {items}")
    last_item = max(r[2] for r in item_rows)
    span = (last_item - source_done).total_seconds()
    total = (joins[0][2] - source_done).total_seconds()
    return {"steps_per_s": items / span, "fan_s": total}


def one_round(items: int, chains: int, workers: int, timeout: float) -> dict[str, float]:
    url = create_database("wf")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        migrate(url)
        asyncio.run(_register(url))
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "wfb_tasks.py").write_text(TASKS)
            env = measured_env(database_url=url)
            env["PYTHONPATH"] = tmp + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            args = [sys.executable, "-m", "duetime", "worker", "--app", "wfb_tasks:app"]
            procs = [spawn([*args, "--log-level", "warning"], env) for _ in range(workers)]
            with psycopg.connect(url, autocommit=True) as conn:

                def registered() -> bool:
                    check_alive(procs, "a worker")
                    row = conn.execute("SELECT count(*) FROM workers").fetchone()
                    return bool(row and row[0] >= workers)

                wait_for("the workers' registration", registered, 60, 0.25)
                for n in range(1, chains + 1):  # one chain at a time: its hand-offs, unqueued

                    def chain_done(n: int = n) -> bool:
                        check_alive(procs, "a worker")
                        return _started(conn, "chain") == n and _open(conn, "chain") == 0

                    asyncio.run(_start(url, "chain", 1))
                    wait_for(f"chain {n} of {chains}", chain_done, timeout, 0.1)
                handoffs = _handoffs_ms(conn)
                if len(handoffs) != chains * 9:
                    raise BenchError(f"{len(handoffs)} hand-offs, expected {chains * 9}")
                asyncio.run(_start(url, "fan", 1, {"items": items}))

                def fan_done() -> bool:
                    check_alive(procs, "a worker")
                    return _started(conn, "fan") == 1 and _open(conn, "fan") == 0

                wait_for(f"a fan-out of {items:,}", fan_done, timeout, 1.0)
                fan = _fan_figures(conn, items)
        errors = stop_all(procs)
        procs = []
        if errors:
            print("worker errors:\n" + "\n".join(errors), file=sys.stderr)
        return {
            "handoff_p50_ms": percentile(handoffs, 50),
            "handoff_p99_ms": percentile(handoffs, 99),
            **fan,
        }
    finally:
        stop_all(procs)
        drop_database(url)


def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--items", type=int, default=10_000, help="fan-out width")
    parser.add_argument("--chains", type=int, default=30, help="10-step chains per round")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    rounds: list[dict[str, float]] = []
    plain: list[float] = []
    for n in range(args.rounds):
        figures = one_round(args.items, args.chains, args.workers, args.timeout)
        burn = duetime_burndown("postgres", args.items, args.workers, defaults=True)
        rounds.append(figures)
        plain.append(float(burn["runs_per_s"]))
        print(
            f"  round {n + 1}: hand-off p50 {figures['handoff_p50_ms']:.1f} ms, "
            f"p99 {figures['handoff_p99_ms']:.1f} ms; fan-out {figures['steps_per_s']:,.0f} "
            f"steps/s ({figures['fan_s']:.2f} s to the fan-in's end); plain burn-down "
            f"{plain[-1]:,.0f} runs/s",
            flush=True,
        )
    ratio = [r["steps_per_s"] / p for r, p in zip(rounds, plain, strict=True)]
    lines = [
        f"workers: {args.workers} (`duetime worker`, the product's defaults); "
        f"{args.chains} 10-step chains, one at a time, and one fan-out of {args.items:,} per round",
        "step hand-off p50 ms: " + Spread.of([r["handoff_p50_ms"] for r in rounds]).show(".1f"),
        "step hand-off p99 ms: " + Spread.of([r["handoff_p99_ms"] for r in rounds]).show(".1f"),
        "fan-out steps/s: " + Spread.of([r["steps_per_s"] for r in rounds]).show(),
        "fan-out to fan-in end s: " + Spread.of([r["fan_s"] for r in rounds]).show(".2f"),
        f"plain burn-down of {args.items:,} runs/s: " + Spread.of(plain).show(),
        "fan-out / plain burn-down: " + Spread.of(ratio).show(".2f"),
        "fan-in started exactly once with every item's result: yes (checked each round)",
    ]
    report("Workflows: hand-off and fan-out (PostgreSQL)", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
