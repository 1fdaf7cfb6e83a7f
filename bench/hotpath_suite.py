"""The hot-path suite (issue 15): each figure beside its minimal script, same server and sitting.

    python -m bench.hotpath_suite                          # 3 interleaved rounds, full sizes
    python -m bench.hotpath_suite --only minimal-uniform,burndown-defaults
    python -m bench.hotpath_suite --runs 300 --distinct 300 --burst 300 --lead 2 --rounds 1

Each round runs the steps in this order (``--only`` picks some), each in a fresh database:

- ``minimal-uniform``: bench/minimal.py ``uniform``, N = ``--runs`` (plain psycopg, 2 workers).
- ``burndown``: bench.burndown, uniform mix, 2 `duetime worker` processes with the benchmark's
  settings (concurrency 1000, batch 500); ratio to ``minimal-uniform``.
- ``burndown-defaults``: the same with `duetime worker` given no settings at all; ratio to
  ``minimal-uniform``.
- ``burndown-realistic``: the benchmark's settings on the realistic mix (20 tenants, 5 queues,
  3 priorities, distinct instants); printed on its own (the minimal script has no such mix).
- ``minimal-distinct``: bench/minimal.py ``distinct-jobs``, N = ``--distinct``.
- ``distinct``: bench.oneshots with ``--distinct`` jobs, one `duetime scheduler` and 2 `duetime
  worker` with no settings; ratio to ``minimal-distinct``.
- ``midnight``: bench.oneshots with ``--burst`` jobs (100,000): start lag p50/p99/max.

Rounds are interleaved (every step once, then again) so that drift of the machine falls on all
alike; a ratio is taken within each round, then its median and range over the rounds are
printed. Quote figures from 3 rounds or more (the default). PostgreSQL is
``DUETIME_BENCH_PG_URL``, connected to directly (not through a pooler). The first failing step
ends the suite with exit status 1 and the reason (round and step named).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench._common import BenchError, Spread, base_parser, guarded_main, report
from bench.burndown import cpu_text, duetime_burndown
from bench.minimal import minimal
from bench.oneshots import duetime_oneshots

STEPS = (
    "minimal-uniform",
    "burndown",
    "burndown-defaults",
    "burndown-realistic",
    "minimal-distinct",
    "distinct",
    "midnight",
)
RATIO_TO = {
    "burndown": "minimal-uniform",
    "burndown-defaults": "minimal-uniform",
    "distinct": "minimal-distinct",
}
"""Which minimal script each step's runs/s is divided by, round by round."""
LABELS = {
    "minimal-uniform": "minimal script, uniform (bench/minimal.py uniform, 2 workers, batch 500)",
    "burndown": "burn-down, benchmark settings (concurrency 1000, batch 500), uniform mix",
    "burndown-defaults": "burn-down, product defaults (`duetime worker`, no settings)",
    "burndown-realistic": "burn-down, benchmark settings, realistic mix",
    "minimal-distinct": "minimal script, distinct jobs (bench/minimal.py distinct-jobs)",
    "distinct": "distinct one-shot jobs due at once (1 scheduler + 2 workers, no settings)",
    "midnight": "midnight burst (one-shots due at one instant, no settings)",
}


def _steps(args: Any) -> dict[str, Callable[[], dict[str, Any]]]:
    t = args.timeout
    return {
        "minimal-uniform": lambda: minimal("uniform", args.runs, timeout=t),
        "burndown": lambda: duetime_burndown("postgres", args.runs, 2, timeout=t),
        "burndown-defaults": lambda: duetime_burndown(
            "postgres", args.runs, 2, defaults=True, timeout=t
        ),
        "burndown-realistic": lambda: duetime_burndown(
            "postgres", args.runs, 2, mix="realistic", timeout=t
        ),
        "minimal-distinct": lambda: minimal("distinct-jobs", args.distinct, timeout=t),
        "distinct": lambda: duetime_oneshots(args.distinct, lead=args.lead, timeout=t),
        "midnight": lambda: duetime_oneshots(args.burst, lead=args.lead, timeout=t),
    }


def _show(step: str, r: dict[str, Any]) -> str:
    text = f"{r['runs_per_s']:,.0f} runs/s"
    if "p50_ms" in r:
        text += (
            f", start lag p50 {r['p50_ms'] / 1000:.2f} s, p99 {r['p99_ms'] / 1000:.2f} s, "
            f"max {r['max_ms'] / 1000:.2f} s"
        )
    return text


def summary(figures: dict[str, list[dict[str, Any]]], sizes: dict[str, int]) -> list[str]:
    """One line per step: median runs/s with its spread, the ratio to its minimal script
    (per round, then the median and range), lags and CPU where the step has them."""
    lines = []
    for step in STEPS:
        results = figures.get(step)
        if not results:
            continue
        line = (
            f"{LABELS[step]}, N={sizes[step]:,}: "
            f"{Spread.of([r['runs_per_s'] for r in results]).show()} runs/s"
        )
        base = figures.get(RATIO_TO.get(step, ""))
        if base and len(base) == len(results):
            ratios = [r["runs_per_s"] / b["runs_per_s"] for r, b in zip(results, base, strict=True)]
            line += f"; ratio to {RATIO_TO[step]} {Spread.of(ratios).show('.2f')}"
        if "p50_ms" in results[0]:
            for key in ("p50_ms", "p99_ms", "max_ms"):
                spread = Spread.of([r[key] / 1000 for r in results])
                line += f"; start lag {key[:-3]} {spread.show('.2f')} s"
        who = {"minimal-uniform": "process", "minimal-distinct": "process"}.get(step, "worker")
        if step in ("distinct", "midnight"):
            who = "scheduler + worker"
        lines.append(f"{line}; {cpu_text(results, who)}")
    return lines


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="burn-down N")
    parser.add_argument("--distinct", type=int, default=50_000, help="distinct one-shot jobs")
    parser.add_argument("--burst", type=int, default=100_000, help="midnight burst one-shots")
    parser.add_argument(
        "--lead", type=float, default=15.0, help="seconds to the one-shots' instant"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per step")
    parser.add_argument("--only", help="comma-separated steps: " + ", ".join(STEPS))
    args = parser.parse_args()
    if min(args.runs, args.distinct, args.burst, args.rounds) < 1 or args.lead <= 0:
        raise BenchError("sizes and --rounds must be at least 1, --lead above 0")
    chosen = list(STEPS)
    if args.only:
        chosen = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [s for s in chosen if s not in STEPS]
        if unknown:
            raise BenchError(f"--only: unknown step {unknown[0]!r}; steps: {', '.join(STEPS)}")
    steps = _steps(args)
    figures: dict[str, list[dict[str, Any]]] = {}
    for n in range(1, args.rounds + 1):
        for step in (s for s in STEPS if s in chosen):
            try:
                r = steps[step]()
            except (RuntimeError, OSError) as exc:
                raise BenchError(f"round {n}, step {step}: {exc}") from exc
            figures.setdefault(step, []).append(r)
            print(f"  round {n}: {step}: {_show(step, r)}", flush=True)
    sizes = {
        "minimal-uniform": args.runs, "burndown": args.runs, "burndown-defaults": args.runs,
        "burndown-realistic": args.runs, "minimal-distinct": args.distinct,
        "distinct": args.distinct, "midnight": args.burst,
    }  # fmt: skip
    lines = summary(figures, sizes)
    if args.rounds < 3:
        lines.append(f"({args.rounds} round(s): fewer than 3, not figures to quote)")
    report("hot-path suite (PostgreSQL, 2 worker processes)", lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
