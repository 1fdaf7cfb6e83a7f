"""``duetime migrate --hash-partitions N``: PostgreSQL's runs partitioned by job partition key
after the migrations (docs/howto/hash-partitioning.md); a count not offered, or SQLite, is a
one-line error."""

from __future__ import annotations

import psycopg
import pytest
from clikit import Invoke
from typer.testing import CliRunner

from duetime.cli import cli


def test_a_count_not_offered_is_refused_before_anything_runs(invoke: Invoke, db: str) -> None:
    refused = invoke("migrate", "--hash-partitions", "3")
    assert refused.exit_code == 2
    assert "--hash-partitions: must be one of 2, 4, 8, 16, 32, 64, not 3" in refused.output
    assert "Traceback" not in refused.output


def test_sqlite_says_it_has_no_partitioned_layout(invoke: Invoke) -> None:
    refused = invoke("migrate", "--hash-partitions", "4")
    assert refused.exit_code == 2
    assert "sqlite has no partitioned layout of runs" in refused.output


@pytest.mark.postgres
def test_postgres_runs_are_partitioned_once(pg_url: str) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["migrate", "--db", pg_url, "--hash-partitions", "2"])
    assert first.exit_code == 0, first.output
    assert "runs is now partitioned into 2 by job partition key" in first.output
    again = runner.invoke(cli, ["migrate", "--db", pg_url, "--hash-partitions", "2"])
    assert again.exit_code == 0, again.output
    assert "runs was already partitioned into 2" in again.output
    with psycopg.connect(pg_url) as conn:
        parts = conn.execute(
            "SELECT array_agg(inhrelid::regclass::text ORDER BY inhrelid::regclass::text) "
            "FROM pg_inherits "
            "WHERE inhparent = 'runs'::regclass"
        ).fetchone()
    assert parts == (["runs_p000_127", "runs_p128_255"],)
