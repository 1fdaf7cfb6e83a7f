"""Noisy neighbour: tenant A floods, tenants B and C trickle — how late do B's and C's runs start?

    python -m bench.noisy                          # PostgreSQL, 2 workers: baseline, flood, quota
    python -m bench.noisy --scenarios flood --repeat 3
    python -m bench.noisy --flood 50000 --quota-in-flight 100 --quota-rate 2000 --record

B and C each have runs due at ``--trickle`` per second over a ``--window`` of seconds (inserted
up front, due in the future, as a scheduler would have materialized them). One second into the
window, A's ``--flood`` runs are inserted in one statement, all due at once (``clone`` of a run
made by ``app.trigger``). Real ``duetime worker`` processes (``--workers``, the burn-down's
settings) run everything with the no-op task. Fire lag = the run's ``started_at`` −
``scheduled_for``, from the database.

Scenarios: ``baseline`` (no A), ``flood`` (A as above), ``quota`` (the flood with A limited by
``duetime tenants set A --max-in-flight … --max-starts-per-second …``). The bounded version that
runs in the test suite is tests/store/test_store_fairness.py (ordering, not timing).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import psycopg

from bench._common import (
    Spread,
    base_parser,
    create_database,
    drop_database,
    duetime_env,
    exit_on_sigterm,
    guarded_main,
    lag_summary,
    migrate,
    report,
    run_cli,
    spawn,
    stop_all,
    wait_until,
)
from duetime.app import AsyncApp

FRESH = {
    "state": "'scheduled'",
    "token": "0",
    "attempt": "0",
    **dict.fromkeys(
        "lease_owner lease_expires_at claimed_at started_at finished_at reason "
        "last_error_class last_error_message".split(),
        "NULL",
    ),
}


async def _seed(url: str) -> dict[str, str]:
    """One job and one manual run (the template) per tenant; returns tenant → run id."""
    templates = {}
    for tenant in ("A", "B", "C"):
        async with AsyncApp(url, tenant=tenant, migrate=False) as app:
            # independent runs of one job: overlap "allow" (the default "skip" serializes them)
            job = await app.schedule(
                f"{tenant}.work", task="duetime.noop", cron="0 0 1 1 *", overlap="allow"
            )
            templates[tenant] = str((await app.trigger(job.id)).id)
    return templates


def _query(url: str, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(text, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _columns(url: str) -> list[str]:
    rows = _query(
        url,
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs' "
        "AND table_schema = current_schema() ORDER BY ordinal_position",
    )
    return [r[0] for r in rows]


def _clone(url: str, template: str, count: int, due: str) -> float:
    """``count`` copies of run ``template``, each due at the SQL expression ``due`` (of ``g``,
    1..count, and ``t0``, the statement's clock); returns the seconds it took."""
    cols = _columns(url)
    exprs = {
        **FRESH,
        "id": "gen_random_uuid()",
        "idempotency_key": "'bench:' || gen_random_uuid()",
        "scheduled_for": due,
        "available_at": due,
    }
    select = ", ".join(exprs.get(c, f"r.{c}") for c in cols)
    text = (
        f"INSERT INTO runs ({', '.join(cols)}) SELECT {select} FROM runs r "
        "CROSS JOIN generate_series(1, %s) g CROSS JOIN (SELECT clock_timestamp() AS t0) t "
        "WHERE r.id = %s"
    )
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(text, (count, template))  # type: ignore[arg-type]
        conn.execute("SELECT pg_notify('duetime_runs', '')")
    return time.perf_counter() - started


def _left(url: str) -> int:
    return int(
        _query(url, "SELECT count(*) FROM runs WHERE state IN ('scheduled', 'running')")[0][0]
    )


def noisy(
    scenario: str,
    *,
    flood: int,
    trickle: float,
    window: float,
    workers: int,
    concurrency: int,
    batch: int,
    quota_in_flight: int,
    quota_rate: float,
    timeout: float = 300.0,
) -> dict[str, Any]:
    url = create_database("noisy")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        migrate(url)
        templates = asyncio.run(_seed(url))  # run by the workers too; not measured
        env = duetime_env(
            database_url=url,
            worker_concurrency=concurrency,
            worker_batch=batch,
            worker_poll_interval=0.2,
        )
        procs = [
            spawn([sys.executable, "-m", "duetime", "worker", "--log-level", "warning"], env)
            for _ in range(workers)
        ]
        if not wait_until(lambda: _query(url, "SELECT count(*) FROM workers")[0][0] >= workers, 60):
            raise RuntimeError("workers did not register: " + "\n".join(stop_all(procs)))
        if scenario == "quota":
            run_cli(
                ["tenants", "set", "A", "--max-in-flight", str(quota_in_flight),
                 "--max-starts-per-second", str(quota_rate), "--db", url]
            )  # fmt: skip
        # B and C: one run every 1/trickle s from 2 s from now, for the window
        lead = 2.0
        count = round(trickle * window)
        step = 1.0 / trickle
        for tenant in ("B", "C"):
            due = f"t0 + make_interval(secs => {lead} + (g - 1) * {step})"
            _clone(url, templates[tenant], count, due)
        flood_s = 0.0
        if scenario != "baseline":
            time.sleep(lead + 1.0)  # one second into the window
            flood_s = _clone(url, templates["A"], flood, "clock_timestamp()")
        if not wait_until(lambda: _left(url) == 0, timeout, 0.5):
            raise RuntimeError(f"{scenario}: runs left after {timeout:.0f} s: {_left(url)}")
        lags: dict[str, list[float]] = {}
        for tenant, lag in _query(
            url,
            "SELECT tenant, extract(epoch FROM started_at - scheduled_for) * 1000 FROM runs "
            "WHERE state = 'succeeded' AND idempotency_key LIKE 'bench:%%'",
        ):
            lags.setdefault(tenant, []).append(float(lag))
        a_rate = float("nan")
        if scenario != "baseline":
            row = _query(
                url,
                "SELECT count(*), extract(epoch FROM max(finished_at) - min(claimed_at)) "
                "FROM runs WHERE tenant = 'A' AND state = 'succeeded' "
                "AND idempotency_key LIKE 'bench:%%'",
            )[0]
            a_rate = int(row[0]) / float(row[1])
        errors = stop_all(procs)
        procs = []
        if errors:
            print("worker errors:\n" + "\n".join(errors), file=sys.stderr)
        return {
            "scenario": scenario,
            "B": lag_summary(lags.get("B", [])),
            "C": lag_summary(lags.get("C", [])),
            "A_runs": len(lags.get("A", [])),
            "A_per_s": a_rate,
            "A_p99_ms": lag_summary(lags.get("A", []))["p99_ms"],
            "flood_insert_per_s": flood / flood_s if flood_s else float("nan"),
        }
    finally:
        stop_all(procs)
        drop_database(url)


def describe(r: dict[str, Any]) -> str:
    b, c = r["B"], r["C"]
    text = (
        f"{r['scenario']:>8}: B p50 {b['p50_ms']:.1f} ms p99 {b['p99_ms']:.1f} ms max "
        f"{b['max_ms']:.1f} ms (n={b['n']}); C p50 {c['p50_ms']:.1f} ms p99 {c['p99_ms']:.1f} ms "
        f"max {c['max_ms']:.1f} ms (n={c['n']})"
    )
    if r["scenario"] != "baseline":
        text += f"; A {r['A_runs']:,} runs at {r['A_per_s']:,.0f}/s, A p99 {r['A_p99_ms']:,.0f} ms"
    return text


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="baseline,flood,quota")
    parser.add_argument("--flood", type=int, default=50_000, help="A's runs, due at once")
    parser.add_argument("--trickle", type=float, default=20.0, help="B's and C's runs per second")
    parser.add_argument("--window", type=float, default=20.0, help="seconds B and C trickle")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--quota-in-flight", type=int, default=100)
    parser.add_argument("--quota-rate", type=float, default=2000.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    exit_on_sigterm()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in scenarios}
    for _ in range(args.repeat):
        for scenario in scenarios:  # interleaved
            r = noisy(
                scenario, flood=args.flood, trickle=args.trickle, window=args.window,
                workers=args.workers, concurrency=args.concurrency, batch=args.batch,
                quota_in_flight=args.quota_in_flight, quota_rate=args.quota_rate,
            )  # fmt: skip
            print("  " + describe(r), flush=True)
            results[scenario].append(r)
    lines = [
        f"{args.workers} worker processes (concurrency={args.concurrency}, batch={args.batch}); "
        f"B and C: {args.trickle:g} runs/s each for {args.window:g} s; A: {args.flood:,} runs due "
        f"at once, 1 s into the window; quota: A --max-in-flight {args.quota_in_flight} "
        f"--max-starts-per-second {args.quota_rate:g}"
    ]
    for scenario, runs in results.items():
        lines += [describe(r) for r in runs]
        if len(runs) > 1:
            for tenant in ("B", "C"):
                p99 = Spread.of([r[tenant]["p99_ms"] for r in runs]).show(".1f")
                lines.append(f"{scenario:>8}: median {tenant} p99 {p99} ms")
    report("noisy neighbour (postgres)", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
