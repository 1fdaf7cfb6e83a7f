"""The hot statements' plans on PostgreSQL stay on their indexes.

With ~20,000 runs and fresh statistics (on a near-empty table a sequential scan is the right
plan), each statement of the claim → start → heartbeat → complete path and the scheduler's due
scan is run under ``EXPLAIN (ANALYZE, FORMAT JSON)`` in a transaction that is rolled back, and
its plan may not read ``runs``, ``jobs`` or ``attempts`` sequentially, nor join a batch against
itself row by row (a join filter that discards more rows than the batch holds: the completion
statement once did, 250,000 comparisons per batch of 500)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from tests.store.clonekit import clone_rows

from duetime import AsyncApp
from duetime._config import Settings
from duetime._outbox import OutboxMessage
from duetime._types import AttemptOutcome, RunState
from duetime.store.base import RunCompletion
from duetime.store.postgres.arrays import PgArray
from duetime.store.postgres.longruns import completion_columns, message_columns
from duetime.store.sqlfile import load_queries

pytestmark = pytest.mark.postgres

RUNS = 20_000
BATCH = 500
QUERIES = load_queries("postgres")
SCANNED = {"runs", "jobs", "attempts"}


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _explain(
    conn: psycopg.Connection[Any], name: str, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run statement ``name`` under EXPLAIN ANALYZE (it takes effect: the caller's transaction
    is rolled back at the end) and check its plan, subplans and CTEs included. It is checked
    first in its generic plan too (what a prepared statement runs from its sixth execution on:
    parameters unseen, an array parameter's ``unnest`` guessed at 10 rows), in a savepoint
    rolled back after."""
    conn.execute("SAVEPOINT generic")
    _check(f"{name} (generic plan)", _generic_plan(conn, name, params))
    conn.execute("ROLLBACK TO SAVEPOINT generic")
    text = QUERIES[name]
    row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text, params).fetchone()  # type: ignore[operator]
    assert row is not None
    return _check(name, row["QUERY PLAN"])


def _generic_plan(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> Any:
    """EXPLAIN ANALYZE of ``name`` under its generic plan, with the parameter types psycopg
    gives it when the store's connections prepare it."""
    conn.execute("SAVEPOINT prepare")  # preparing runs it once: undone
    conn.execute(QUERIES[name], params, prepare=True)  # type: ignore[arg-type]
    row = conn.execute(
        "SELECT statement, parameter_types::text[] AS types FROM pg_prepared_statements "
        "ORDER BY prepare_time DESC LIMIT 1"
    ).fetchone()
    conn.execute("ROLLBACK TO SAVEPOINT prepare")
    assert row is not None
    order: list[str] = []
    for match in re.finditer(r"%\((\w+)\)s", QUERIES[name]):
        if match[1] not in order:
            order.append(match[1])
    assert len(order) == len(row["types"]), (order, row["types"])
    conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    conn.execute(
        sql.SQL("PREPARE generic_plan ({}) AS {}").format(
            sql.SQL(", ").join(sql.SQL(t) for t in row["types"]),  # type: ignore[arg-type]
            sql.SQL(row["statement"]),  # type: ignore[arg-type]
        )
    )
    values = {n: _literal(conn, params[n]) for n in order}
    args = sql.SQL(", ").join(
        sql.SQL("{}::{}").format(sql.Literal(values[n]), sql.SQL(t))  # type: ignore[arg-type]
        for n, t in zip(order, row["types"], strict=True)
    )
    try:
        plan = conn.execute(
            sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE generic_plan ({})").format(args)
        ).fetchone()
    finally:
        conn.execute("DEALLOCATE generic_plan")
    assert plan is not None
    return plan["QUERY PLAN"]


def _literal(conn: psycopg.Connection[Any], value: Any) -> Any:
    """``value`` as a literal can hold it: an array built in binary (store/postgres/arrays.py)
    as the text PostgreSQL reads it from."""
    if not isinstance(value, PgArray):
        return value
    row = conn.execute("SELECT %s::text AS text", (value,)).fetchone()
    assert row is not None
    return row["text"]


def _check(name: str, document: Any) -> list[dict[str, Any]]:
    """The plan's nodes, checked: no sequential scan of the big tables, no join that compares
    more row pairs than a batch holds."""
    document = json.loads(document) if isinstance(document, str) else document
    nodes = list(_nodes(document[0]["Plan"]))
    seq = [n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"]
    outline = "; ".join(
        f"{n['Node Type']} {n.get('Relation Name', '')} {n.get('Index Name', '')}".strip()
        for n in nodes
    )
    assert not SCANNED & set(seq), f"{name}: sequential scan of {seq} in: {outline}"
    for node in nodes:
        removed = node.get("Rows Removed by Join Filter", 0)
        assert removed <= BATCH, f"{name}: a join filter discarded {removed} rows ({node})"
    return nodes


def _reads_runs_by_primary_key(nodes: list[dict[str, Any]]) -> bool:
    """``runs`` is read only through its primary key (never through a partial index of running
    runs, whose statistics rarely know how many runs are in flight; never sequentially). In the
    hash-partitioned layout, through each partition's (``runs_p000_063_pkey``)."""
    used = {n["Index Name"] for n in nodes if n.get("Index Name", "").startswith("runs_")}
    assert used, "runs not read through an index"
    assert all(re.fullmatch(r"runs_(p\d{3}_\d{3}_)?pkey", u) for u in used), (
        f"runs read through {sorted(used)}"
    )
    return True


@pytest.fixture(params=[1, 4], ids=["one-table", "hash-partitioned"])
def seeded(
    pg_url: str, request: pytest.FixtureRequest
) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """A migrated schema with RUNS runs of one job (a quarter finished, with attempts), a
    quarter as many other jobs, and fresh statistics; in the default layout, and with runs in 4
    partitions by job partition key (docs/decisions/0033), the runs then spread over the other
    jobs so that every partition holds some."""
    import asyncio

    async def make() -> str:
        async with AsyncApp(
            settings=Settings(database_url=pg_url), tenant="plans", migrate=True
        ) as app:
            await app.schedule(
                "plans", task="duetime.noop", every=3600, overlap="allow", allow_unregistered=True
            )
            run = await app.trigger("plans")
            return str(run.id)

    template = asyncio.run(make())
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        fresh = {"id": "gen_random_uuid()", "idempotency_key": "'plan:' || g"}
        where = "WHERE runs.id = %(template)s"
        clone_rows(conn, "runs", fresh, RUNS, where=where, values={"template": template})
        clone_rows(conn, "jobs", {"id": "gen_random_uuid()", "name": "'plan-' || g"}, RUNS // 4)
        # half of the due runs carry an overlap key: they are claimed by the locked step
        conn.execute(
            "UPDATE runs SET concurrency_key = 'key:plans-' || (abs(hashtext(id::text)) %% 50) "
            "WHERE id IN (SELECT id FROM runs ORDER BY id DESC LIMIT %s)",
            (RUNS // 2,),
        )
        # a history: a quarter of them finished, with their attempts
        conn.execute(
            "UPDATE runs SET state = 'succeeded', finished_at = now(), attempt = 1 "
            "WHERE id IN (SELECT id FROM runs ORDER BY id LIMIT %s)",
            (RUNS // 4,),
        )
        conn.execute(
            "INSERT INTO attempts (run_id, token, job_id, tenant, number, worker_id, "
            "claimed_at, started_at, finished_at, outcome) "
            "SELECT id, 1, job_id, tenant, 1, 'w', now(), now(), now(), 'succeeded' "
            "FROM runs WHERE state = 'succeeded'"
        )
        if request.param > 1:
            _spread_and_partition(conn, pg_url, request.param)
        conn.execute("ANALYZE")
        conn.autocommit = False
        conn.execute("SET jit = off")
        yield conn, template
        conn.rollback()


def _spread_and_partition(conn: psycopg.Connection[Any], url: str, count: int) -> None:
    """Give the cloned jobs partition keys of their own (the hash of their ids, as
    ``registration.partition_of`` does), move every run but the template's to one of them, and
    partition runs into ``count`` through the store."""
    import asyncio

    from duetime.store import create_store

    conn.execute("UPDATE jobs SET partition_key = get_byte(sha256(uuid_send(id)), 0)")
    conn.execute(
        "WITH j AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM jobs "
        "WHERE name LIKE 'plan-%') "
        "UPDATE runs r SET job_id = j.id, partition_key = NULL FROM j "
        "WHERE r.idempotency_key LIKE 'plan:%' "
        "AND j.n = abs(hashtext(r.id::text)) % (SELECT count(*) FROM j)"
    )

    async def partition() -> None:
        store = create_store(url)
        await store.open()
        try:
            assert await store.runs_partition_by_key(count)
        finally:
            await store.close()

    asyncio.run(partition())
    spread = conn.execute("SELECT count(DISTINCT tableoid) AS parts FROM runs").fetchone()
    assert spread is not None
    assert spread["parts"] == count


def _claim_params(**overrides: Any) -> dict[str, Any]:
    return {
        "worker_id": "plans",
        "lease_ttl": 30.0,
        "lookahead": 1.0,
        "tasks": ["duetime.noop"],
        "limit": BATCH,
        "now": None,
        "tenant": None,
        "queues": None,
        "aging_us": 60_000_000,
        "aging_cap": 1000,
        "only_fast": False,
        "share": True,
        **overrides,
    }


def test_the_hot_statements_stay_on_their_indexes(
    seeded: tuple[psycopg.Connection[Any], str],
) -> None:
    conn, _ = seeded
    _explain(conn, "runs_claim_fair", _claim_params())
    _explain(conn, "runs_claim_fair", _claim_params(share=False))
    _explain(conn, "runs_claim_fair_wide", _claim_params())
    _explain(conn, "runs_claim_fair", _claim_params(only_fast=True, queues=["default"]))
    # the runs without an overlap key (the keyed ones are the locked step's): a batch of them
    claimed = conn.execute(QUERIES["runs_claim_fair"], _claim_params(only_fast=True)).fetchall()  # type: ignore[arg-type]
    assert len(claimed) == BATCH
    ids = [r["id"] for r in claimed]
    tokens = [r["token"] for r in claimed]
    _explain(
        conn,
        "runs_heartbeat",
        {"worker_id": "plans", "lease_ttl": 30.0, "ids": ids, "tokens": tokens, "now": None}
        | {"tenant": None},
    )
    _explain(  # a remote worker's: filtered by its tenant too
        conn,
        "runs_heartbeat",
        {"worker_id": "plans", "lease_ttl": 30.0, "ids": ids, "tokens": tokens, "now": None}
        | {"tenant": "plans"},
    )
    completions = [
        RunCompletion(
            run_id=r["id"],
            token=r["token"],
            worker_id="plans",
            attempt=r["attempt"],
            claimed_at=r["claimed_at"],
            started_at=r["started_at"],
            outcome=AttemptOutcome.SUCCEEDED,
            next_state=RunState.SUCCEEDED,
        )
        for r in claimed
    ]
    # half of the batch stale (a wrong token): both branches of the completion are exercised
    stale = [
        RunCompletion(**{**_fields(c), "token": c.token + 1}) for c in completions[: BATCH // 2]
    ]
    _explain(
        conn,
        "runs_complete",
        {"now": None, "tenant": None, **completion_columns(stale + completions[BATCH // 2 :])},
    )
    now = claimed[0]["claimed_at"]
    locked = {"now": now, "lookahead": 1.0, "tasks": ["duetime.noop"], "tenant": None}
    _explain(conn, "runs_claim_locked_candidates", {**locked, "queues": None, "limit": BATCH})
    keys = [f"key:plans-{i}" for i in range(50)]
    _explain(conn, "runs_running_by_key", {"keys": keys})
    keyed = conn.execute(
        "SELECT id FROM runs WHERE state = 'scheduled' AND concurrency_key IS NOT NULL LIMIT 50"
    ).fetchall()
    _explain(
        conn,
        "runs_claim_ids",
        {
            "ids": [r["id"] for r in keyed],
            "worker_id": "plans",
            "lease_ttl": 30.0,
            "now": claimed[0]["claimed_at"],
        },
    )
    # starts of runs claimed ahead: the batch statement, and the keyed runs' locked path
    conn.execute("UPDATE runs SET started_at = NULL WHERE id = ANY(%s)", (ids,))
    start = {"ids": ids, "tokens": tokens, "now": None, "lease_ttl": 30.0}
    _explain(conn, "runs_start", start)
    # one run (the common batch at a steady trickle of fires): statistics taken before any run
    # was in flight make the partial indexes of running runs look free; the plan must not care
    one = conn.execute(
        "SELECT id, token FROM runs WHERE state = 'scheduled' AND concurrency_key IS NULL LIMIT 1"
    ).fetchone()
    assert one is not None
    conn.execute(
        "UPDATE runs SET state = 'running', lease_expires_at = now() + interval '1 minute' "
        "WHERE id = %s",
        (one["id"],),
    )
    single = {"ids": [one["id"]], "tokens": [one["token"]], "now": None, "lease_ttl": 30.0}
    assert _reads_runs_by_primary_key(_explain(conn, "runs_start", single))
    # the same for a small completion batch, the common one at a steady trickle of runs (a
    # bitmap scan of every running run's index entries, dead ones included, cost milliseconds)
    few = {"now": None, "tenant": None, **completion_columns(completions[:30])}
    assert _reads_runs_by_primary_key(_explain(conn, "runs_complete", few))
    assert _reads_runs_by_primary_key(_explain(conn, "runs_complete", {**few, "tenant": "plans"}))
    # a broker runs' batch: the same, with their messages inserted by the statement
    messages = message_columns(
        [RunCompletion(**{**_fields(c), "outbox": _message(c)}) for c in completions[:30]]
    )
    outboxed = {**few, **messages}
    assert _reads_runs_by_primary_key(_explain(conn, "runs_complete_outbox", outboxed))
    keyed_ids = [r["id"] for r in keyed]
    conn.execute("UPDATE runs SET started_at = NULL WHERE id = ANY(%s)", (keyed_ids,))
    keyed_tokens = [
        r["token"]
        for r in conn.execute("SELECT token FROM runs WHERE id = ANY(%s) ORDER BY id", (keyed_ids,))
    ]
    keyed_start = {"ids": sorted(keyed_ids), "tokens": keyed_tokens, "now": None}
    _explain(conn, "runs_start_keyed_info", keyed_start)
    _explain(conn, "runs_started_by_key", {"keys": keys})
    judged = {"ids": keyed_start["ids"], "now": now}
    _explain(conn, "runs_start_judged", {**judged, "lease_ttl": 30.0})
    _explain(conn, "runs_start_skip", judged)
    _explain(conn, "runs_start_defer", judged)
    _explain(
        conn,
        "jobs_due",
        {
            "until": claimed[0]["claimed_at"],
            "limit": 1000,
            "partition_low": 0,
            "partition_high": 255,
        },
    )
    # the scheduler's advance of a materialized batch (500 of the 5,000 jobs)
    advanced = [r["id"] for r in conn.execute("SELECT id FROM jobs LIMIT %s", (BATCH,))]
    _explain(
        conn,
        "jobs_advance",
        {"ids": advanced, "next_fire_ats": [now] * len(advanced), "tzdata_version": "2026a"},
    )
    assert all(isinstance(i, uuid.UUID) for i in ids)


def _message(c: RunCompletion) -> OutboxMessage:
    target = {"type": "redis", "connection": "plans", "stream": "plans"}
    return OutboxMessage("plans", c.run_id, c.attempt, "plans", target, "{}", {})


def _fields(completion: RunCompletion) -> dict[str, Any]:
    return {name: getattr(completion, name) for name in completion.__slots__}  # type: ignore[attr-defined]


def test_a_page_of_jobs_seeks_to_its_cursor(pg_url: str) -> None:
    """A page of jobs after a cursor starts at the cursor in (tenant, name) in its generic
    plan (the one a prepared statement keeps): it once walked every earlier name and filtered
    it out (5,000 rows for the last page of 5,000 jobs, a million for a million)."""
    import asyncio

    async def make() -> None:
        async with AsyncApp(
            settings=Settings(database_url=pg_url), tenant="pages", migrate=True
        ) as app:
            await app.schedule("page", task="duetime.noop", every=3600, allow_unregistered=True)

    asyncio.run(make())
    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        clone_rows(conn, "jobs", {"id": "gen_random_uuid()", "name": "'page-' || g"}, 5000)
        conn.execute("ANALYZE jobs")
        params = {
            "tenant": "pages",
            "status": None,
            "name_prefix": None,
            "tag": None,
            "after_name": "page-4",
            "limit": 51,
        }
        nodes = _check("job_list", _generic_plan(conn, "job_list", params))
        conn.rollback()
    removed = sum(n.get("Rows Removed by Filter", 0) for n in nodes)
    assert removed < 51, f"job_list walked {removed} names before its cursor"
