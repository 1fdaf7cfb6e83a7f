"""The drop of an attempt week past retention reads ``runs`` through the partial indexes of
live and dead runs, never a scan of the whole history (issue 15: the read of the attempts that
outlive their week was a sequential scan of ``runs`` per week dropped, 12 of them over a
10M-run history in the first retention pass, each holding the xmin horizon meanwhile). A plan
property, asserted from ``EXPLAIN``: no duration."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from tests.store.clonekit import clone_rows
from tests.store.test_store_claim_horizon import _template
from tests.store.test_store_plans import _nodes

from duetime.store.postgres.partitions import kept_attempts_read

pytestmark = pytest.mark.postgres

HISTORY = 20_000
"""Finished runs with an attempt each: enough that a scan of ``runs`` costs more than the
live and dead runs' index pages."""
LIVE_INDEXES = {"runs_fair", "runs_running_tenant", "runs_dead"}


def _clone(conn: psycopg.Connection[Any], template: str, state: str, count: int) -> None:
    """``count`` copies of the template run in ``state``, each with an attempt."""
    fresh = {
        "id": "gen_random_uuid()",
        "idempotency_key": "gen_random_uuid()::text",
        "state": "%(state)s",
        "claimed_at": "now() - g * interval '1 second'",
        "finished_at": "CASE WHEN %(state)s IN ('scheduled', 'running') THEN NULL "
        "ELSE now() - g * interval '1 second' END",
    }
    values = {"state": state, "template": template}
    clone_rows(conn, "runs", fresh, count, where="WHERE runs.id = %(template)s", values=values)
    conn.execute(
        "INSERT INTO attempts (run_id, token, job_id, tenant, number, worker_id, claimed_at, "
        "started_at, finished_at, outcome) SELECT id, 1, job_id, tenant, 1, 'w', "
        "coalesce(claimed_at, now()), claimed_at, coalesce(finished_at, now()), 'succeeded' "
        "FROM runs WHERE state = %(state)s AND id <> %(template)s",
        values,
    )


@pytest.fixture
def history(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """HISTORY succeeded runs and a few scheduled, running and dead ones, each with an
    attempt (in the default partition), analyzed. Yields an autocommit connection."""
    template = _template(pg_url)
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        _clone(conn, template, "succeeded", HISTORY)
        for state in ("scheduled", "running", "dead"):
            _clone(conn, template, state, 5)
        conn.execute("ANALYZE")
        conn.execute("SET jit = off")
        yield conn


def test_the_attempts_kept_from_a_dropped_week_are_found_without_scanning_runs(
    history: psycopg.Connection[Any],
) -> None:
    query = sql.SQL("EXPLAIN (FORMAT JSON) {}").format(kept_attempts_read("attempts_default"))
    plan = history.execute(query).fetchone()
    assert plan is not None

    reads = [n for n in _nodes(plan["QUERY PLAN"][0]["Plan"]) if n.get("Relation Name") == "runs"]

    assert [n["Node Type"] for n in reads if "Index" not in n["Node Type"]] == []
    assert {n["Index Name"] for n in reads} == LIVE_INDEXES


def test_the_kept_attempts_are_those_of_live_and_dead_runs(
    history: psycopg.Connection[Any],
) -> None:
    rows = history.execute(
        sql.SQL("SELECT r.state, count(*) AS n FROM ({}) a JOIN runs r ON r.id = a.run_id "
                "GROUP BY r.state ORDER BY r.state").format(kept_attempts_read("attempts_default"))
    ).fetchall()  # fmt: skip

    assert [(r["state"], r["n"]) for r in rows] == [("dead", 5), ("running", 5), ("scheduled", 5)]
