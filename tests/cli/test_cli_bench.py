"""``duetime bench``: burn-down and fire against the given database, in a scratch schema or
file that is dropped afterwards. The tests check the output's shape and the failures, never
the figures."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from clikit import Invoke, assert_usage_error, ok
from psycopg import sql

SMALL = ("--runs", "50", "--rate", "50", "--seconds", "0.5")


def check_report(report: dict[str, object], store: str) -> None:
    assert report["store"] == store
    burndown = report["burndown"]
    assert isinstance(burndown, dict)
    assert burndown["runs"] == 50
    assert burndown["runs_per_second"] > 0
    fire = report["fire"]
    assert isinstance(fire, dict)
    assert fire["runs"] == 25
    assert fire["started"] + fire["missing"] == 25
    assert fire["p50_ms"] <= fire["p95_ms"] <= fire["p99_ms"] <= fire["max_ms"]


def test_sqlite_json_and_nothing_left_behind(invoke: Invoke, tmp_path: Path) -> None:
    target = tmp_path / "data" / "app.db"
    result = ok(invoke("bench", *SMALL, "--json", "--db", str(target), use_db=False))
    check_report(json.loads(result.stdout), "sqlite")
    assert list(target.parent.iterdir()) == []  # the scratch file went, the user's never came


def test_the_table_names_each_benchmark(invoke: Invoke) -> None:
    out = ok(invoke("bench", *SMALL)).stdout.splitlines()
    assert out[0] == "duetime bench (sqlite):"
    assert out[1].split() == ["benchmark", "workload", "result"]
    assert out[2].startswith("burn-down  50 runs in ")
    assert out[2].endswith(" runs/s")
    assert out[3].startswith("fire")
    assert "25 runs at 50/s" in out[3]
    assert "p99" in out[3]


def test_only_one_benchmark(invoke: Invoke) -> None:
    report = json.loads(ok(invoke("bench", "--only", "burndown", "--runs", "5", "--json")).stdout)
    assert report["fire"] is None
    assert report["burndown"]["runs"] == 5


def test_a_benchmark_that_cannot_finish_exits_1_with_the_reason(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a scheduler that looks 0.5 s ahead once an hour never materializes runs due in 2 s
    monkeypatch.setenv("DUETIME_SCHEDULER_TICK", "3600")
    monkeypatch.setenv("DUETIME_SCHEDULER_HORIZON", "0.5")
    result = invoke("bench", "--only", "fire", "--rate", "10", "--seconds", "1", "--timeout", "1")
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    # the error line (a log line of the scheduler's shutdown may come before it)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors, result.stderr
    assert errors[-1].startswith("error: fire: 0 of 10 runs ended within "), errors


def test_bad_options_and_an_unreachable_database(invoke: Invoke) -> None:
    assert_usage_error(invoke("bench", "--only", "everything"), "--only", "burndown")
    bad = "postgresql://postgres@127.0.0.1:1/none"
    assert_usage_error(invoke("bench", "--db", bad, use_db=False), "cannot connect to")


@pytest.mark.postgres
def test_postgres_in_a_scratch_schema_dropped_afterwards(invoke: Invoke, pg_url: str) -> None:
    def scratch_schemas() -> set[str]:
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'duetime_scratch_%'"
            ).fetchall()
        return {r[0] for r in rows}

    before = scratch_schemas()
    result = ok(invoke("bench", *SMALL, "--json", "--database", pg_url, use_db=False))
    check_report(json.loads(result.stdout), "postgres")
    assert scratch_schemas() <= before
    with psycopg.connect(pg_url) as conn:  # the user's schema (here: an empty one) untouched
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchone()
    assert tables == (0,)


@pytest.mark.postgres
def test_a_role_that_may_not_create_a_schema_is_told_so(invoke: Invoke, pg_url: str) -> None:
    role = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        parts = urlsplit(pg_url)
        url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
        assert_usage_error(
            invoke("bench", "--runs", "5", "--db", url, use_db=False),
            "cannot create a scratch schema",
            "the role needs CREATE on the database",
        )
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
