"""Smoke runs of every benchmark with tiny sizes: they still work and print their figures.

No timing thresholds, nothing written to docs/benchmarks.md. PostgreSQL parts are marked
``postgres`` (they use DUETIME_TEST_PG_URL, as the benchmarks' DUETIME_BENCH_PG_URL).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pg_base_url

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "benchmarks.md"
pytestmark = pytest.mark.slow


def bench(module: str, *args: str, pg: bool = False) -> str:
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
    assert done.returncode == 0, done.stdout + done.stderr
    after = DOCS.read_text().count(needle) if DOCS.exists() else 0
    assert before == after, "a benchmark without --record must not write docs/benchmarks.md"
    return done.stdout


@pytest.mark.postgres
def test_burndown_postgres(pg_database: str) -> None:
    out = bench("burndown", "--runs", "200", "--workers", "1", "--repeat", "1", pg=True)
    assert "runs/s" in out
    assert "enqueue on its own (postgres)" in out


def test_burndown_sqlite() -> None:
    out = bench("burndown", "--store", "sqlite", "--runs", "200", "--workers", "1", "--repeat", "1")
    assert "duetime sqlite noop" in out
    assert "runs/s" in out


@pytest.mark.postgres
def test_fire_postgres(pg_database: str) -> None:
    out = bench(
        "fire", "--rate", "20", "--seconds", "2", "--crons", "2", "--lead", "5",
        "--settle", "10", "--concurrency", "100", pg=True,
    )  # fmt: skip
    assert "lag p50" in out
    assert "p99" in out


def test_fire_sqlite() -> None:
    out = bench(
        "fire", "--store", "sqlite", "--rate", "20", "--seconds", "2", "--crons", "2",
        "--lead", "5", "--settle", "10", "--concurrency", "100",
    )  # fmt: skip
    assert "sqlite 20/s for 2 s" in out


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
