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


@pytest.mark.postgres
def test_burndown_postgres(pg_database: str) -> None:
    out = bench("burndown", "--runs", "200", "--workers", "1", "--repeat", "1", pg=True)
    assert "uniform mix" in out
    assert "runs/s" in out
    assert "PostgreSQL backends CPU" in out
    assert "enqueue on its own (postgres)" in out


@pytest.mark.postgres
def test_burndown_realistic_mix_postgres(pg_database: str) -> None:
    out = bench(
        "burndown", "--mix", "realistic", "--runs", "300", "--workers", "1", "--repeat", "1",
        pg=True,
    )  # fmt: skip
    assert "realistic mix" in out
    assert "runs/s" in out


def test_burndown_sqlite() -> None:
    out = bench("burndown", "--store", "sqlite", "--runs", "200", "--workers", "1", "--repeat", "1")
    assert "duetime sqlite noop" in out
    assert "runs/s" in out


def test_worker_cost_drains_in_process_sqlite() -> None:
    out = bench("worker_cost", "--store", "sqlite", "--once", "100")
    assert "sqlite: 100 runs" in out
    assert "µs/run" in out


@pytest.mark.postgres
def test_worker_cost_drains_in_process_postgres(pg_database: str) -> None:
    out = bench("worker_cost", "--once", "100", pg=True)
    assert "postgres: 100 runs" in out


def test_sqlite_firing_times_each_step() -> None:
    out = bench("sqlite_firing", "--jobs", "60", "--repeat", "1")
    assert "sqlite firing N=60:" in out
    assert "materialize" in out
    assert "complete" in out


@pytest.mark.postgres
def test_fire_postgres(pg_database: str) -> None:
    out = bench(
        "fire", "--rate", "20", "--seconds", "2", "--crons", "2", "--lead", "5",
        "--settle", "10", "--concurrency", "100", pg=True,
    )  # fmt: skip
    assert "lag p50" in out
    assert "p99" in out


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


@pytest.mark.postgres
def test_hotpath_suite_prints_ratios_to_the_minimal_scripts(pg_database: str) -> None:
    # "midnight" is bench.oneshots as "distinct" is, with another N: not run twice here
    out = bench(
        "hotpath_suite", "--only", "minimal-uniform,burndown-defaults,minimal-distinct,distinct",
        "--runs", "300", "--distinct", "300", "--lead", "2", "--rounds", "1", pg=True,
    )  # fmt: skip
    assert "round 1: minimal-uniform:" in out
    assert "burn-down, product defaults (`duetime worker`, no settings), N=300" in out
    assert "ratio to minimal-uniform" in out
    assert "distinct one-shot jobs due at once" in out
    assert "ratio to minimal-distinct" in out
    assert "start lag p50" in out
    assert "fewer than 3, not figures to quote" in out


@pytest.mark.postgres
def test_scale(pg_database: str) -> None:
    out = bench("scale", "--jobs", "1000", "--scheduler-seconds", "0", pg=True)
    assert "registration" in out
    assert "index range scan" in out


@pytest.mark.postgres
def test_peers_harness_without_peers(pg_database: str) -> None:
    out = bench("peers", "burndown", "--only", "duetime", "--runs", "200", "--repeat", "1", pg=True)
    assert "duetime (concurrency" in out


@pytest.mark.postgres
def test_hotpath(pg_database: str) -> None:
    out = bench(
        "hotpath", "--runs", "1000", "--batch", "100", "--materialize", "200", "--starts", "50",
        pg=True,
    )  # fmt: skip
    assert "claim" in out
    assert "completion plan" in out
    assert "run_start one at a time" in out


def test_old_against_new_interleaves_three_rounds() -> None:
    out = bench(
        "ab", "--old", str(ROOT), "burndown", "--store", "sqlite", "--runs", "100",
        "--workers", "1",
    )  # fmt: skip
    assert out.count("  round ") == 3
    assert "new/old per pair: median" in out


@pytest.mark.postgres
def test_trigger_benchmark_compares_with_its_minimal_script() -> None:
    out = bench("trigger", "--count", "30", "--rounds", "1", pg=True)
    assert "minimal script:" in out
    assert "of the minimal script" in out
    assert "POST …/trigger" in out
    assert "p99" in out


@pytest.mark.postgres
def test_takeover_measures_leader_and_partitions(pg_database: str) -> None:
    out = bench("takeover", "--rounds", "1", pg=True)
    assert "round 1: leader" in out
    assert "every occurrence once: True" in out
    out = bench("takeover", "--lag-jobs", "200", pg=True)
    assert "longest gap between lease renewals" in out


@pytest.mark.postgres
def test_workflows_measure_hand_off_and_fan_out(pg_database: str) -> None:
    out = bench("workflows", "--items", "200", "--chains", "2", "--rounds", "1", pg=True)
    assert "step hand-off p99 ms:" in out
    assert "fan-out / plain burn-down:" in out
    assert "fan-in started exactly once with every item's result: yes" in out


@pytest.mark.postgres
def test_outbox_publishes_to_every_broker(pg_database: str) -> None:
    out = bench("outbox", "--messages", "200", pg=True)
    assert "messages/s" in out
