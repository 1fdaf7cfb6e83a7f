"""The fair claim while the xmin horizon is held (issue 15's collapse, docs/decisions/0036).

While some snapshot holds the horizon back (autovacuum's ANALYZE of ``runs``, a long report, a
standby's feedback), no entry of a run claimed or finished since can be skipped without a heap
visit: runs_fair keeps one for each run claimed, runs_running_tenant one for each run finished.
The claim may read each of them a bounded number of times — not once per (tenant, queue,
priority) group: the in-flight count per group read a tenant's finished runs once for each of its
groups (15 per tenant in the realistic benchmark mix), and a second per-group probe read the
claimed runs' entries again. The test holds a snapshot, claims and finishes a few batches in
many groups per tenant, and counts the buffers the claim reads through those two indexes
(EXPLAIN (ANALYZE, BUFFERS)): a count of pages read, not a duration."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from tests.store.clonekit import clone_rows
from tests.store.test_store_plans import _claim_params, _generic_plan, _nodes

from duetime import AsyncApp
from duetime._config import Settings
from duetime.store.sqlfile import load_queries

pytestmark = pytest.mark.postgres

QUERIES = load_queries("postgres")
TENANTS, QUEUES, PRIORITIES = 4, 3, 2
"""24 groups, 6 per tenant."""
RUNS = 4_800
BATCH = 200
BATCHES = 8
"""Runs claimed and finished while the horizon is held: BATCH × BATCHES."""


def _params() -> dict[str, Any]:
    """The plan test's claim parameters, in batches of BATCH."""
    return _claim_params(worker_id="horizon", limit=BATCH)


def _template(pg_url: str) -> str:
    """A migrated schema with one job; the id of one run of it (the clones' template)."""

    async def make() -> str:
        async with AsyncApp(
            settings=Settings(database_url=pg_url), tenant="h0", migrate=True
        ) as app:
            await app.schedule(
                "horizon", task="duetime.noop", every=3600, overlap="allow",
                allow_unregistered=True,
            )  # fmt: skip
            return str((await app.trigger("horizon")).id)

    return asyncio.run(make())


def _spread(conn: psycopg.Connection[Any], template: str, state: str) -> None:
    """RUNS clones of the template in ``state``, spread over TENANTS × QUEUES × PRIORITIES
    groups with distinct instants."""
    fresh = {
        "id": "gen_random_uuid()",
        "idempotency_key": "gen_random_uuid()::text",
        "tenant": f"'h' || (g %% {TENANTS})",
        "queue": f"'q' || (g / {TENANTS} %% {QUEUES})",
        "priority": f"g / {TENANTS * QUEUES} %% {PRIORITIES}",
        "available_at": "now() - g * interval '1 ms'",
        "state": "%(state)s",
    }
    clone_rows(
        conn,
        "runs",
        fresh,
        RUNS,
        where="WHERE runs.id = %(template)s",
        values={"state": state, "template": template},
    )


@contextlib.contextmanager
def _scheduled(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """RUNS scheduled runs in many groups (the template's own run finished), statistics
    fresh: an autocommit connection."""
    template = _template(pg_url)
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        _spread(conn, template, "scheduled")
        conn.execute("UPDATE runs SET state = 'succeeded', finished_at = now() WHERE id = %s",
                     (template,))  # fmt: skip
        conn.execute("ANALYZE")
        yield conn


@pytest.fixture
def held(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """RUNS scheduled runs in many groups with fresh statistics; then a snapshot held in
    another connection while BATCHES batches are claimed and finished. Yields an autocommit
    connection."""
    with _scheduled(pg_url) as conn, psycopg.connect(pg_url) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT 1")  # the snapshot: held until the end of the test
        for _ in range(BATCHES):
            claimed = conn.execute(QUERIES["runs_claim_fair"], _params()).fetchall()  # type: ignore[arg-type]
            assert len(claimed) == BATCH
            conn.execute(
                "UPDATE runs SET state = 'succeeded', finished_at = now() WHERE state = 'running'"
            )
        conn.execute("SET jit = off")
        yield conn
        holder.rollback()


@pytest.fixture
def stale(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """Statistics taken while every run was finished (after a burn-down, or before the first
    runs came), then RUNS scheduled runs in many groups that no ANALYZE has seen yet
    (autovacuum kept off ``runs``): the planner believes runs_fair holds a row or two. Yields
    an autocommit connection."""
    template = _template(pg_url)
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("ALTER TABLE runs SET (autovacuum_enabled = off)")
        _spread(conn, template, "succeeded")
        conn.execute("UPDATE runs SET state = 'succeeded', finished_at = now() WHERE id = %s",
                     (template,))  # fmt: skip
        conn.execute("ANALYZE runs")
        _spread(conn, template, "scheduled")
        conn.execute("SET jit = off")
        yield conn


def _heap_fetches(conn: psycopg.Connection[Any], name: str) -> dict[str, int]:
    """The heap visits statement ``name`` makes from index-only scans of runs_fair and
    runs_running_tenant (each left entry costs one: the entries of live runs are not all
    visible either), run in a transaction rolled back."""
    conn.execute("BEGIN")
    try:
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + QUERIES[name],  # type: ignore[operator]
            _params(),
        ).fetchone()
    finally:
        conn.execute("ROLLBACK")
    assert row is not None
    fetches = {"runs_fair": 0, "runs_running_tenant": 0}
    for node in _nodes(row["QUERY PLAN"][0]["Plan"]):
        if node["Node Type"] == "Index Only Scan" and node["Index Name"] in fetches:
            fetches[node["Index Name"]] += node["Heap Fetches"]
    return fetches


def test_the_claim_visits_each_entry_left_behind_once(held: psycopg.Connection[Any]) -> None:
    groups = TENANTS * QUEUES * PRIORITIES
    for done, name in enumerate(("runs_claim_fair", "runs_claim_fair_wide")):
        # entries left in each index since the horizon: by the batches, and by the batch of
        # each statement explained (and rolled back) before
        left = BATCH * (BATCHES + done)
        fetches = _heap_fetches(held, name)
        # the in-flight count reads a tenant's finished runs once (6 times before: once per
        # group); the groups' probe walks the claimed runs' entries once (twice before: the
        # due probe walked them again). The candidates' scan (an index scan) reads them once
        assert fetches["runs_running_tenant"] <= left, (name, fetches)
        assert fetches["runs_fair"] <= left + 2 * groups, (name, fetches)


def test_the_claim_probes_each_group_on_stale_statistics(stale: psycopg.Connection[Any]) -> None:
    # the collapse itself: the due groups' EXISTS was planned as a semi join reading all of
    # runs_fair once per group (300 × 19,000 entries, 5.7M heap visits, 12 s a claim)
    groups = TENANTS * QUEUES * PRIORITIES
    for name in ("runs_claim_fair", "runs_claim_fair_wide"):
        fetches = _heap_fetches(stale, name)
        # one probe per group, and (the statement runs in a rolled-back transaction) no more
        assert fetches["runs_fair"] <= 2 * groups, (name, fetches)
        # and in the generic plan, which a store connection keeps from the statement's sixth
        # run until the next ANALYZE (the collapsed calls ran one)
        stale.execute("BEGIN")
        try:
            generic = _generic_plan(stale, name, _params())
        finally:
            stale.execute("ROLLBACK")
        document = json.loads(generic) if isinstance(generic, str) else generic
        fetched = sum(
            node["Heap Fetches"]
            for node in _nodes(document[0]["Plan"])
            if node["Node Type"] == "Index Only Scan" and node["Index Name"] == "runs_fair"
        )
        assert fetched <= 2 * groups, (f"{name} (generic plan)", fetched)


@pytest.fixture
def spread(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """RUNS scheduled runs in many groups, statistics fresh. Yields an autocommit connection."""
    with _scheduled(pg_url) as conn:
        conn.execute("SET jit = off")
        yield conn


def _inflight_rows_read(document: Any) -> float:
    """Rows read from the materialised ``inflight`` CTE (one per tenant), over every scan and
    loop of it: EXPLAIN gives rows and rows filtered out per loop."""
    return sum(
        float((node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"])
        for node in _nodes(document[0]["Plan"])
        if node["Node Type"] == "CTE Scan" and node.get("CTE Name") == "inflight"
    )


def test_the_claim_reads_each_tenants_in_flight_count_once(
    spread: psycopg.Connection[Any],
) -> None:
    # a lookup of its tenant's count per group scanned the whole CTE each time: groups ×
    # tenants rows (4,000 tenants of one group each: 16 million, 0.7 s of a claim's 0.77 s)
    for name in ("runs_claim_fair", "runs_claim_fair_wide", "runs_claim_locked_candidates"):
        params = {**_params(), "now": datetime.now(UTC)}  # the locked step's is always given
        spread.execute("BEGIN")
        try:
            row = spread.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + QUERIES[name],  # type: ignore[operator]
                params,
            ).fetchone()
            assert row is not None
            generic = _generic_plan(spread, name, params)
        finally:
            spread.execute("ROLLBACK")
        custom_read = _inflight_rows_read(row["QUERY PLAN"])
        assert custom_read <= TENANTS, (name, custom_read)
        document = json.loads(generic) if isinstance(generic, str) else generic
        generic_read = _inflight_rows_read(document)
        assert generic_read <= TENANTS, (f"{name} (generic plan)", generic_read)
