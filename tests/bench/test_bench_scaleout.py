"""Smoke run of the scale-out benchmark (bench/scaleout.py) with tiny sizes, on the test
server: every cell still runs and prints its figures. No timing thresholds, nothing written to
docs/benchmarks.md (the helper checks)."""

from __future__ import annotations

import pytest

from tests.bench.test_bench_smoke import bench, run_bench

pytestmark = pytest.mark.slow


@pytest.mark.postgres
def test_scaleout_postgres(pg_database: str) -> None:
    out = bench(
        "scaleout", "--workers", "2", "--schedulers", "1", "--runs", "100", "--backlog", "100",
        "--jobs", "5", "--window", "2", "--rounds", "1",
        pg=True,
    )  # fmt: skip
    assert " 2 workers    runs/s" in out
    assert " 1 schedulers runs/s" in out
    assert "PostgreSQL CPU" in out
    assert "connections peak: workers" in out
    assert "every-second occurrences" in out
    assert "missed" in out


def test_scaleout_refuses_empty_sizes() -> None:
    done = run_bench("scaleout", "--runs", "0")
    assert done.returncode == 1
    assert "benchmark failed: --runs, --backlog, --jobs, --rounds must be at least 1" in (
        done.stderr
    )
