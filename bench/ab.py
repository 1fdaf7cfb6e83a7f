"""Old commit against new: one benchmark, the two checkouts taking turns, ≥ 3 rounds.

Each checkout runs its own copy of the benchmark with its own virtualenv (``DIR/.venv``), so
the benchmark code, the product and its dependencies are those of that commit. Rounds are
interleaved (old, new, old, new, …) so that drift of the machine falls on both alike; the
figure of each round is read from the benchmark's own per-round line, and the medians with
their range and the new/old ratio per pair are printed (with ``--record``, appended to
docs/benchmarks.md with the date, machine and command).

    git worktree add /tmp/dt-old <old-commit>
    python3 -m venv /tmp/dt-old/.venv && /tmp/dt-old/.venv/bin/pip install -e /tmp/dt-old
    python -m bench.ab --old /tmp/dt-old burndown --runs 50000 --workers 2
    python -m bench.ab --old /tmp/dt-old fire --seconds 20
    python -m bench.ab --old /tmp/dt-old workflows --items 10000 --chains 30
    python -m bench.ab --old /tmp/dt-old outbox_lag --broker nats --seconds 10
    python -m bench.ab --old /tmp/dt-old retire --history 1000000 --keep

Exits non-zero, with the reason, when a round fails or prints no figure.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench._common import ROOT, Spread, report

FIGURES = {
    # benchmark → (label, pattern of its per-round line, higher is better)
    "burndown": ("runs/s", re.compile(r"N=\d+: ([\d,]+) runs/s"), True),
    "fire": ("p99 lag ms", re.compile(r"p99 ([\d.]+) ms"), False),
    "sqlite_firing": ("runs/s", re.compile(r"sqlite firing N=\d+: ([\d,]+) runs/s"), True),
    "oneshots": ("p99 start lag s", re.compile(r"start lag p50 [\d.]+ s, p99 ([\d.]+) s"), False),
    "workflows": ("fan-out steps/s", re.compile(r"fan-out ([\d,]+) steps/s"), True),
    "outbox_lag": ("p99 lag ms", re.compile(r"lag p50 [\d.]+ ms, p99 ([\d.]+) ms"), False),
    "materialize_burst": ("runs made/s", re.compile(r"horizon: ([\d,]+) runs made/s"), True),
    "retire": ("retiring/quiet", re.compile(r"ratio retiring/quiet: ([\d.]+)"), True),
}
ONE_ROUND = {"workflows": ["--rounds", "1"], "retire": ["--rounds", "1"]}
"""How a benchmark is told to run one round (the default: ``--repeat 1``)."""


def one_round(checkout: Path, bench: str, args: list[str]) -> float:
    """The round's figure; its per-round line (CPU per run and the rest) is printed too."""
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        if checkout.resolve() != ROOT:
            sys.exit(f"{checkout} has no .venv/bin/python: make its virtualenv first")
        python = Path(sys.executable)
    command = [str(python), "-m", f"bench.{bench}", *args, *ONE_ROUND.get(bench, ["--repeat", "1"])]
    if bench == "burndown":
        command += ["--workers", "2"] if "--workers" not in args else []
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"round in {checkout} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    _, pattern, _ = FIGURES[bench]
    for line in done.stdout.splitlines():
        match = pattern.search(line)
        if match and line.startswith("  "):
            print(f"    {checkout.name}:{line}", flush=True)
            return float(match.group(1).replace(",", ""))
    sys.exit(f"round in {checkout} printed no figure:\n{done.stdout[-2000:]}")


def commit_of(checkout: Path) -> str:
    """The checkout's commit (short), for the record; the path where git cannot say."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or str(checkout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout of the old commit")
    parser.add_argument("--new", type=Path, default=ROOT, help="checkout of the new commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", action="store_true", help="append to docs/benchmarks.md")
    parser.add_argument("bench", choices=sorted(FIGURES))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="passed to the benchmark")
    options = parser.parse_args()
    if options.rounds < 3:
        sys.exit("--rounds must be at least 3")
    label, _, higher_is_better = FIGURES[options.bench]
    old: list[float] = []
    new: list[float] = []
    for n in range(options.rounds):
        old.append(one_round(options.old, options.bench, options.args))
        new.append(one_round(options.new, options.bench, options.args))
        print(f"  round {n + 1}: old {old[-1]:,.1f}, new {new[-1]:,.1f} {label}", flush=True)
    ratios = [b / a for a, b in zip(old, new, strict=True) if a > 0]
    better = "higher" if higher_is_better else "lower"
    lines = [
        f"old (commit {commit_of(options.old)}): {Spread.of(old).show('.1f')} {label}",
        f"new (commit {commit_of(options.new)} + working tree): {Spread.of(new).show('.1f')} "
        f"{label}",
        f"new/old per pair: median {statistics.median(ratios):.3f} "
        f"({min(ratios):.3f}–{max(ratios):.3f}); {better} is better",
    ]
    report(
        f"old against new: {options.bench} {' '.join(options.args)}", lines, record=options.record
    )


if __name__ == "__main__":
    main()
