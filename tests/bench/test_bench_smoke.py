"""Smoke runs of every benchmark with tiny sizes: they still work and print their figures.

No timing thresholds, nothing written to docs/benchmarks.md. PostgreSQL parts are marked
``postgres`` (they use DUETIME_TEST_PG_URL, as the benchmarks' DUETIME_BENCH_PG_URL).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import pg_base_url

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "benchmarks.md"
pytestmark = pytest.mark.slow


def run_bench(module: str, *args: str, pg: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``python -m bench.MODULE ARGS``; it must not write docs/benchmarks.md."""
    env = dict(os.environ)
    if pg:
        env["DUETIME_BENCH_PG_URL"] = pg_base_url()
    # what a recording of this very command would add (other benchmarks may record meanwhile)
    needle = f"python -m bench.{module} {' '.join(args)}`"
    before = DOCS.read_text().count(needle) if DOCS.exists() else 0
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    after = DOCS.read_text().count(needle) if DOCS.exists() else 0
    assert before == after, "a benchmark without --record must not write docs/benchmarks.md"
    return done


def bench(module: str, *args: str, pg: bool = False) -> str:
    done = run_bench(module, *args, pg=pg)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextlib.contextmanager
def port_taken(port: int) -> Iterator[None]:
    """``port`` on 127.0.0.1 is in use while inside (held here, or already by someone else)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            pass  # taken already: the condition wanted
        yield


@dataclass(frozen=True)
class Smoke:
    """A benchmark's arguments (``python -m bench.<args>``) and texts its output must hold."""

    args: tuple[str, ...]
    prints: tuple[str, ...]
    pg: bool = False
    """On PostgreSQL (marked ``postgres``)."""


SMOKES = {
    "burndown_postgres": Smoke(
        ("burndown", "--runs", "200", "--workers", "1", "--repeat", "1"),
        ("uniform mix", "runs/s", "PostgreSQL backends CPU", "enqueue on its own (postgres)"),
        pg=True,
    ),
    "burndown_realistic_mix_postgres": Smoke(
        ("burndown", "--mix", "realistic", "--runs", "300", "--workers", "1", "--repeat", "1"),
        ("realistic mix", "runs/s"),
        pg=True,
    ),
    "burndown_sqlite": Smoke(
        ("burndown", "--store", "sqlite", "--runs", "200", "--workers", "1", "--repeat", "1"),
        ("duetime sqlite noop", "runs/s"),
    ),
    "worker_cost_drains_in_process_sqlite": Smoke(
        ("worker_cost", "--store", "sqlite", "--once", "100"), ("sqlite: 100 runs", "µs/run")
    ),
    "worker_cost_drains_in_process_postgres": Smoke(
        ("worker_cost", "--once", "100"), ("postgres: 100 runs",), pg=True
    ),
    "sqlite_firing_times_each_step": Smoke(
        ("sqlite_firing", "--jobs", "60", "--repeat", "1"),
        ("sqlite firing N=60:", "materialize", "complete"),
    ),
    "fire_postgres": Smoke(
        ("fire", "--rate", "20", "--seconds", "2", "--crons", "2", "--lead", "5",
         "--settle", "10", "--concurrency", "100"),
        ("lag p50", "p99"),
        pg=True,
    ),
    # "midnight" is bench.oneshots as "distinct" is, with another N: not run twice here
    "hotpath_suite_prints_ratios_to_the_minimal_scripts": Smoke(
        ("hotpath_suite", "--only", "minimal-uniform,burndown-defaults,minimal-distinct,distinct",
         "--runs", "300", "--distinct", "300", "--lead", "2", "--rounds", "1"),
        ("round 1: minimal-uniform:",
         "burn-down, product defaults (`duetime worker`, no settings), N=300",
         "ratio to minimal-uniform", "distinct one-shot jobs due at once",
         "ratio to minimal-distinct", "start lag p50", "fewer than 3, not figures to quote"),
        pg=True,
    ),
    "scale": Smoke(
        ("scale", "--jobs", "1000", "--scheduler-seconds", "0"),
        ("registration", "index range scan"),
        pg=True,
    ),
    "peers_harness_without_peers": Smoke(
        ("peers", "burndown", "--only", "duetime", "--runs", "200", "--repeat", "1"),
        ("duetime (concurrency",),
        pg=True,
    ),
    "hotpath": Smoke(
        ("hotpath", "--runs", "1000", "--batch", "100", "--materialize", "200", "--starts", "50"),
        ("claim", "completion plan", "run_start one at a time"),
        pg=True,
    ),
    "trigger_benchmark_compares_with_its_minimal_script": Smoke(
        ("trigger", "--count", "30", "--rounds", "1"),
        ("minimal script:", "of the minimal script", "POST …/trigger", "p99"),
        pg=True,
    ),
    "workflows_measure_hand_off_and_fan_out": Smoke(
        ("workflows", "--items", "200", "--chains", "2", "--rounds", "1"),
        ("step hand-off p99 ms:", "fan-out / plain burn-down:",
         "fan-in started exactly once with every item's result: yes"),
        pg=True,
    ),
    "outbox_publishes_to_every_broker": Smoke(
        ("outbox", "--messages", "200"), ("messages/s",), pg=True
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.postgres if m.pg else (), id=n) for n, m in SMOKES.items()],
)
def test_a_benchmark_prints_its_figures(name: str, request: pytest.FixtureRequest) -> None:
    smoke = SMOKES[name]
    if smoke.pg:
        request.getfixturevalue("pg_database")
    out = bench(*smoke.args, pg=smoke.pg)
    for text in smoke.prints:
        assert text in out


def test_fire_sqlite_runs_with_port_8000_taken() -> None:
    # `duetime up` serves its API on a free port, not on 8000 (taken here)
    with port_taken(8000):
        out = bench(
            "fire", "--store", "sqlite", "--rate", "20", "--seconds", "2", "--crons", "2",
            "--lead", "5", "--settle", "10", "--concurrency", "100",
        )  # fmt: skip
    assert "sqlite 20/s for 2 s: runs 40/40 started (missing 0)" in out


@pytest.mark.postgres
def test_a_failed_benchmark_exits_non_zero_with_the_reason(pg_database: str) -> None:
    # no worker: nothing in the window starts, which is a failure, not a figure of 0/N (a lead
    # that a loaded CI machine's registration and process starts fit in: not what is tested)
    done = run_bench(
        "fire", "--rate", "5", "--seconds", "1", "--crons", "0", "--lead", "8", "--settle", "1",
        "--workers", "0", pg=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "benchmark failed: fire (postgres): none of the 5 runs in the window started "
        "(5 jobs registered)"
    )
    assert "lag p50" not in done.stdout


def test_old_against_new_interleaves_three_rounds() -> None:
    out = bench(
        "ab", "--old", str(ROOT), "burndown", "--store", "sqlite", "--runs", "100",
        "--workers", "1",
    )  # fmt: skip
    assert out.count("  round ") == 3
    assert "new/old per pair: median" in out


@pytest.mark.postgres
def test_takeover_measures_leader_and_partitions(pg_database: str) -> None:
    out = bench("takeover", "--rounds", "1", pg=True)
    assert "round 1: leader" in out
    assert "every occurrence once: True" in out
    out = bench("takeover", "--lag-jobs", "200", pg=True)
    assert "longest gap between lease renewals" in out
