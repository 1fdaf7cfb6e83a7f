"""The hash-partitioned layout of ``runs`` on PostgreSQL (docs/decisions/0033): a run lands in
the partition of its job's key, the uniqueness of occurrences and idempotency keys holds
across it, a populated database is converted with every row kept, and the conversion waits
for the nodes like a migration that is not a rolling upgrade. The run-path conformance files
also run on this layout as a whole (the ``hashed`` store of tests/conftest.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from storekit import (
    claim,
    complete,
    completion,
    dead_run,
    fill_planner,
    make_job,
    materialize,
    ref,
    running_run,
    s,
    scheduled_run,
)

from duetime._clock import FrozenClock
from duetime._run_partitions import RUN_PARTITION_COUNTS, check_run_partitions
from duetime._types import AttemptOutcome
from duetime.errors import NodesStillRunning, SchemaError, ValidationError
from duetime.store import Store, create_store
from duetime.store.base import RunTriggerParams
from duetime.store.postgres.hash_layout import (
    child_index,
    on_table,
    partition_bounds,
    partition_name,
    with_key,
)

PARTITIONS = 4
KEYS = (0, 63, 64, 130, 200, 255)
"""Job partition keys at the edges and inside of the four partitions."""


def rows(url: str, query: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        return conn.execute(query, params).fetchall()  # type: ignore[arg-type]


async def arows(url: str, query: str, *params: Any) -> list[dict[str, Any]]:
    return await asyncio.to_thread(rows, url, query, *params)


@pytest.fixture
async def pg_store(pg_url: str, clock: FrozenClock) -> AsyncIterator[Store]:
    """A migrated store in the default layout on a fresh schema."""
    store = create_store(pg_url, clock=clock)
    await store.open()
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()


def owning_partition(key: int) -> str:
    (name,) = [partition_name(lo, hi) for lo, hi in partition_bounds(PARTITIONS) if lo <= key < hi]
    return name


# --- the definitions (pure) --------------------------------------------------------------------


def test_the_partitions_split_the_keys_into_equal_ranges() -> None:
    assert partition_bounds(4) == [(0, 64), (64, 128), (128, 192), (192, 256)]
    assert [partition_name(lo, hi) for lo, hi in partition_bounds(2)] == [
        "runs_p000_127",
        "runs_p128_255",
    ]
    assert all(len(partition_bounds(n)) == n for n in RUN_PARTITION_COUNTS)
    for wrong in (0, 1, 3, 6, 128, 256):
        with pytest.raises(ValidationError, match="must be one of 2, 4, 8, 16, 32, 64"):
            check_run_partitions(wrong)


def test_every_key_gains_the_partition_key_last() -> None:
    assert with_key("PRIMARY KEY (id)") == "PRIMARY KEY (id, partition_key)"
    occurrence = (
        "CREATE UNIQUE INDEX runs_job_occurrence ON public.runs USING btree "
        "(job_id, scheduled_for, idempotency_key) NULLS NOT DISTINCT"
    )
    assert with_key(occurrence) == occurrence.replace(
        "idempotency_key)", "idempotency_key, partition_key)"
    )
    keyed = (
        "CREATE UNIQUE INDEX runs_job_idempotency_key ON public.runs USING btree "
        "(job_id, idempotency_key) WHERE (idempotency_key IS NOT NULL)"
    )
    assert "(job_id, idempotency_key, partition_key) WHERE" in with_key(keyed)
    assert with_key("PRIMARY KEY (id, partition_key)") == "PRIMARY KEY (id, partition_key)"
    with pytest.raises(SchemaError, match="cannot find the key columns"):
        with_key("CHECK (state = 'dead')")
    assert on_table(
        keyed, child_index("runs_p000_063", "runs_job_idempotency_key"), "runs_p000_063"
    )
    assert on_table(keyed, "runs_p000_063_x", "runs_p000_063").startswith(
        'CREATE UNIQUE INDEX "runs_p000_063_x" ON "runs_p000_063" USING btree (job_id,'
    )


# --- the layout --------------------------------------------------------------------------------


@pytest.mark.postgres
async def test_each_run_lands_in_its_jobs_partition_and_stays_unique(
    pg_store: Store, pg_url: str, t0: datetime
) -> None:
    assert await pg_store.runs_partition_by_key(PARTITIONS)
    jobs = [await make_job(pg_store, f"job-{key}", next_fire_at=t0, partition=key) for key in KEYS]
    made = await materialize(pg_store, t0, planner=fill_planner(1.0), horizon=2.0)
    assert made.runs_created == 3 * len(KEYS)  # t0, t0 + 1 s, t0 + 2 s of each job
    for job in jobs:  # the one-statement manual run, and the same key again
        first, created = await pg_store.run_trigger(
            RunTriggerParams(ref(job), now=t0, idempotency_key="once")
        )
        again, created_again = await pg_store.run_trigger(
            RunTriggerParams(ref(job), now=t0 + s(1), idempotency_key="once")
        )
        assert created
        assert not created_again
        assert again.id == first.id
    # every occurrence again: none is new, whichever partition holds it
    await arows(pg_url, "UPDATE jobs SET next_fire_at = %s RETURNING 1", t0)
    again = await materialize(pg_store, t0, planner=fill_planner(1.0), horizon=2.0)
    assert again.runs_created == 0
    # the update paths move runs within their partitions
    claimed = await claim(pg_store, t0 + s(2), limit=100)
    assert len(claimed) == 4 * len(KEYS)
    done = [completion(c, outcome=AttemptOutcome.SUCCEEDED) for c in claimed[: len(KEYS)]]
    assert await complete(pg_store, t0 + s(3), *done) == [True] * len(KEYS)

    placed = await arows(
        pg_url,
        "SELECT r.tableoid::regclass::text AS part, r.partition_key AS key, "
        "j.partition_key AS job_key, r.state FROM runs r JOIN jobs j ON j.id = r.job_id",
    )
    assert len(placed) == 4 * len(KEYS)
    assert {p["state"] for p in placed} == {"running", "succeeded"}
    for p in placed:
        assert p["key"] == p["job_key"]
        assert p["part"] == owning_partition(p["key"])
    assert {p["part"] for p in placed} == {owning_partition(k) for k in KEYS}
    assert len({p["part"] for p in placed}) == PARTITIONS
    # a scan of a range of keys reads only the partitions that hold it
    plan = await arows(
        pg_url,
        "EXPLAIN (FORMAT JSON) SELECT count(*) FROM runs WHERE partition_key BETWEEN 64 AND 127",
    )
    assert set(_relations(plan[0]["QUERY PLAN"][0]["Plan"])) == {"runs_p064_127"}


def _relations(plan: dict[str, Any]) -> list[str]:
    found = [plan["Relation Name"]] if "Relation Name" in plan else []
    for child in plan.get("Plans", []):
        found += _relations(child)
    return found


@pytest.mark.postgres
async def test_a_populated_database_is_converted_with_every_row_kept(
    pg_store: Store, pg_url: str, t0: datetime
) -> None:
    running = await running_run(pg_store, t0, "running", partition=200)
    await dead_run(pg_store, t0 + s(10), "dead", attempts=2)
    finished = await running_run(pg_store, t0 + s(20), "finished", partition=70)
    assert await complete(pg_store, t0 + s(21), completion(finished)) == [True]
    for i, key in enumerate(KEYS):
        await scheduled_run(pg_store, t0 + s(30 + i), f"scheduled-{key}", partition=key)
    # runs of a release before v27 carry no key of their own
    await arows(
        pg_url,
        "UPDATE runs SET partition_key = NULL WHERE job_name LIKE 'scheduled-%%' RETURNING 1",
    )
    before_runs = await _runs(pg_url)
    before_attempts = await arows(pg_url, "SELECT * FROM attempts ORDER BY run_id, token")
    indexes = await arows(
        pg_url, "SELECT indexrelid::regclass::text AS name FROM pg_index "
        "WHERE indrelid = 'runs'::regclass ORDER BY 1"
    )  # fmt: skip
    assert any(r["partition_key"] is None for r in before_runs)

    assert await pg_store.runs_partition_by_key(PARTITIONS)

    after_runs = await _runs(pg_url)
    assert [_without_key(r) for r in after_runs] == [_without_key(r) for r in before_runs]
    jobs = {r["id"]: r["partition_key"] for r in await arows(pg_url, "SELECT * FROM jobs")}
    assert all(r["partition_key"] == jobs[r["job_id"]] for r in after_runs)
    assert await arows(pg_url, "SELECT * FROM attempts ORDER BY run_id, token") == before_attempts
    layout = await arows(
        pg_url,
        "SELECT c.relkind::text AS kind, array_agg(p.relname::text ORDER BY p.relname) AS parts "
        "FROM pg_class c JOIN pg_inherits i ON i.inhparent = c.oid "
        "JOIN pg_class p ON p.oid = i.inhrelid WHERE c.oid = 'runs'::regclass GROUP BY 1",
    )
    assert layout == [
        {"kind": "p", "parts": ["runs_p000_063", "runs_p064_127", "runs_p128_191", "runs_p192_255"]}
    ]
    again = await arows(
        pg_url, "SELECT indexrelid::regclass::text AS name FROM pg_index "
        "WHERE indrelid = 'runs'::regclass ORDER BY 1"
    )  # fmt: skip
    assert again == indexes  # the same indexes, by name
    per_partition = await arows(
        pg_url, "SELECT count(*) AS n FROM pg_index WHERE indrelid = 'runs_p128_191'::regclass"
    )
    assert per_partition[0]["n"] == len(indexes)
    # the store carries on: the running run completes, the scheduled ones are claimed
    assert await complete(pg_store, t0 + s(50), completion(running)) == [True]
    claimed = await claim(pg_store, t0 + s(50), limit=100)
    assert sorted(c.run.job_name for c in claimed) == sorted(f"scheduled-{k}" for k in KEYS)
    # the conversion is done once; another count is refused
    assert not await pg_store.runs_partition_by_key(PARTITIONS)
    with pytest.raises(SchemaError, match="already partitioned into 4"):
        await pg_store.runs_partition_by_key(8)
    with pytest.raises(ValidationError, match="must be one of"):
        await pg_store.runs_partition_by_key(3)


async def _runs(url: str) -> list[dict[str, Any]]:
    return await arows(url, "SELECT * FROM runs ORDER BY id")


def _without_key(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "partition_key"}


@pytest.mark.postgres
async def test_the_conversion_waits_for_the_nodes_to_stop(
    pg_store: Store, pg_url: str, t0: datetime
) -> None:
    await scheduled_run(pg_store, t0, "job", partition=9)
    await arows(
        pg_url,
        "INSERT INTO nodes (id, host, pid, roles, started_at, heartbeat_at) VALUES "
        "('n1', 'live-host', %s, '[\"worker\"]', clock_timestamp(), clock_timestamp()) "
        "RETURNING id",
        os.getpid(),
    )
    with pytest.raises(NodesStillRunning) as refused:
        await pg_store.runs_partition_by_key(PARTITIONS)
    assert refused.value.nodes == [f"live-host:{os.getpid()} (worker)"]
    kind = await arows(
        pg_url, "SELECT relkind::text AS kind FROM pg_class WHERE oid = 'runs'::regclass"
    )
    assert kind == [{"kind": "r"}]  # nothing changed
    await arows(pg_url, "DELETE FROM nodes RETURNING id")
    assert await pg_store.runs_partition_by_key(PARTITIONS)
    assert [r["key"] for r in await arows(pg_url, "SELECT partition_key AS key FROM runs")] == [9]


@pytest.mark.postgres
async def test_an_unmigrated_database_is_not_partitioned(pg_url: str) -> None:
    store = create_store(pg_url)
    await store.open()
    try:
        with pytest.raises(SchemaError, match="migrate the database first"):
            await store.runs_partition_by_key(PARTITIONS)
    finally:
        await store.close()


async def test_sqlite_has_no_partitioned_layout(tmp_path: Path) -> None:
    store = create_store(str(tmp_path / "duetime.db"))
    await store.open()
    try:
        await store.migrate()
        with pytest.raises(SchemaError, match="sqlite has no partitioned layout"):
            await store.runs_partition_by_key(PARTITIONS)
    finally:
        await store.close()


# a run's key comes from its job on both insert paths, in the default layout as well
@pytest.mark.postgres
async def test_new_runs_carry_their_jobs_key_in_the_default_layout(
    pg_store: Store, pg_url: str, t0: datetime
) -> None:
    job = await make_job(pg_store, "keyed", next_fire_at=t0, partition=77)
    await materialize(pg_store, t0)
    await pg_store.run_trigger(RunTriggerParams(ref(job), now=t0))
    keys = await arows(pg_url, "SELECT partition_key AS key, trigger FROM runs ORDER BY trigger")
    assert keys == [{"key": 77, "trigger": "manual"}, {"key": 77, "trigger": "schedule"}]
