"""Schema: migrating from zero, idempotence, concurrency, version checks, and the migrated
schema against the expected description in ``schema_<dialect>.json``.

To regenerate an expected file after adding a migration, run this module with
``DUETIME_UPDATE_SCHEMA_SNAPSHOT=1`` and review the diff.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import duetime.store._sql as sql_store
import duetime.store.base as store_base
from duetime.errors import SchemaError
from duetime.store import SCHEMA_VERSION, Store

pytestmark = pytest.mark.fresh_database

HERE = Path(__file__).parent
UPDATE_ENV = "DUETIME_UPDATE_SCHEMA_SNAPSHOT"


async def test_migrate_from_zero_is_idempotent(make_store) -> None:
    store = await make_store(migrate=False)
    assert await store.schema_version() is None
    with pytest.raises(SchemaError):
        await store.check_schema()

    assert await store.migrate() == SCHEMA_VERSION
    assert await store.schema_version() == SCHEMA_VERSION
    await store.check_schema()
    assert await store.migrate() == SCHEMA_VERSION  # twice: nothing to do
    assert await store.schema_version() == SCHEMA_VERSION
    await store.check_schema()


async def test_a_second_store_sees_the_migrated_schema(make_store) -> None:
    first = await make_store(migrate=False)
    second = await make_store(migrate=False)
    await first.migrate()
    assert await second.schema_version() == SCHEMA_VERSION
    await second.check_schema()
    assert await second.migrate() == SCHEMA_VERSION


async def test_concurrent_migrations_are_safe(make_store) -> None:
    stores = [await make_store(migrate=False) for _ in range(3)]
    versions = await asyncio.gather(*[st.migrate() for st in stores])
    assert versions == [SCHEMA_VERSION] * len(stores)
    for st in stores:
        await st.check_schema()


async def test_a_newer_schema_is_refused(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """This code "knows" one version less than the database holds."""
    older = SCHEMA_VERSION - 1
    monkeypatch.setattr(store_base, "SCHEMA_VERSION", older)
    for cls in type(store).__mro__:  # the dialect's module and the shared SQL store's
        module = sys.modules[cls.__module__]
        if hasattr(module, "SCHEMA_VERSION"):
            monkeypatch.setattr(module, "SCHEMA_VERSION", older)
    with pytest.raises(SchemaError):
        await store.check_schema()
    with pytest.raises(SchemaError):
        await store.migrate()
    assert await store.schema_version() == SCHEMA_VERSION


async def test_db_now_is_aware_utc_and_close_to_the_host_clock(store: Store) -> None:
    now = await store.db_now()
    assert now.utcoffset() == timedelta(0)
    assert abs(now - datetime.now(UTC)) < timedelta(minutes=5)


async def test_migration_6_keeps_the_installations_workers_and_task_names(
    make_store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers and known tasks gain a tenant (issue 13): rows written before are the
    installation's ('') — except remote workers' rows (host ``remote``), whose tenant cannot be
    told from their ``tenant/worker`` id: they are dropped (recorded again at the next claim)."""
    store = await make_store(migrate=False)
    every = sql_store.load_migrations  # both dialects list their migrations through it
    monkeypatch.setattr(sql_store, "load_migrations", lambda dialect: every(dialect)[:5])
    assert await store.migrate() == 5
    monkeypatch.setattr(sql_store, "load_migrations", every)
    workers = [("host:1:ab", "host-1", '["own.task"]'), ("a/x/y", "remote", '["remote.task"]')]
    tasks = ["own.task", "remote.task"]
    if store.dialect == "sqlite":
        at = int(t0.timestamp() * 1_000_000)
        with sqlite3.connect(store_url) as conn:
            conn.executemany(
                "INSERT INTO workers (id, host, pid, tasks, queues, started_at, heartbeat_at) "
                "VALUES (?, ?, 1, ?, '[\"default\"]', ?, ?)",
                [(*w, at, at) for w in workers],
            )
            conn.executemany(
                "INSERT INTO known_tasks (task, last_seen_at) VALUES (?, ?)",
                [(t, at) for t in tasks],
            )
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_url) as pg:
            for w in workers:
                pg.execute(
                    "INSERT INTO workers (id, host, pid, tasks, queues, started_at, heartbeat_at) "
                    "VALUES (%s, %s, 1, %s, '[\"default\"]', %s, %s)",
                    (*w, t0, t0),
                )
            for t in tasks:
                pg.execute("INSERT INTO known_tasks (task, last_seen_at) VALUES (%s, %s)", (t, t0))
    # these workers heartbeated a moment ago: counted as running, they would hold back the
    # later migration that needs the previous release stopped (012), which is not under test
    assert await store.migrate(alive_within=0) == SCHEMA_VERSION
    (kept,) = await store.workers_list()
    assert (kept.id, kept.tenant, kept.tasks) == ("host:1:ab", None, ("own.task",))
    assert await store.tasks_known(tasks) == set(tasks)  # installation-wide, as they were
    assert await store.tasks_known(tasks, tenant="acme") == set(tasks)


async def test_migration_11_gives_waiting_runs_their_misfire_deadline(
    make_store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs written before v11 and still waiting get ``misfire_at`` = instant + the job's grace
    (none for a backfill job, a manual run or a run already attempted), so the judge that now
    walks that deadline still skips them (issue 15)."""
    store = await make_store(migrate=False)
    every = sql_store.load_migrations
    monkeypatch.setattr(sql_store, "load_migrations", lambda dialect: every(dialect)[:10])
    assert await store.migrate() == 10
    monkeypatch.setattr(sql_store, "load_migrations", every)
    jobs = [("j-skip", "skip", 30.0), ("j-back", "backfill", 30.0)]
    runs = [  # (run id, job, trigger, attempt, seconds before t0)
        ("00000000-0000-4000-8000-000000000001", 0, "schedule", 0, 0),
        ("00000000-0000-4000-8000-000000000002", 0, "manual", 0, 0),
        ("00000000-0000-4000-8000-000000000003", 0, "schedule", 1, 1),
        ("00000000-0000-4000-8000-000000000004", 1, "schedule", 0, 0),
    ]
    job_ids = ["00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000a2"]
    job_sql = (
        "INSERT INTO jobs (id, tenant, name, task, payload, schedule_kind, at_instant, status, "
        "max_attempts, backoff_base, backoff_factor, backoff_cap, misfire_policy, "
        "misfire_grace_s, overlap_policy, delivery, partition_key, created_at, updated_at) "
        "VALUES (?, 'default', ?, 't', '{}', 'at', ?, 'active', 3, 1, 2, 600, ?, ?, 'allow', "
        "'at_least_once', 0, ?, ?)"
    )
    run_sql = (
        "INSERT INTO runs (id, job_id, tenant, job_name, task, queue, payload, scheduled_for, "
        "available_at, state, priority, attempt, max_attempts, backoff_base, backoff_factor, "
        "backoff_cap, delivery, trigger, idempotency_key, created_at) VALUES (?, ?, 'default', "
        "?, 't', 'default', '{}', ?, ?, 'scheduled', 0, ?, 3, 1, 2, 600, 'at_least_once', ?, ?, ?)"
    )
    if store.dialect == "sqlite":
        at = int(t0.timestamp() * 1_000_000)
        with sqlite3.connect(store_url) as conn:
            for job_id, (name, policy, grace) in zip(job_ids, jobs, strict=True):
                conn.execute(job_sql, (job_id, name, at, policy, grace, at, at))
            for run_id, job, trigger, attempt, before in runs:
                key = None if trigger == "schedule" else f"auto:{run_id}"
                due = at - before * 1_000_000
                conn.execute(
                    run_sql,
                    (run_id, job_ids[job], jobs[job][0], due, due, attempt, trigger, key, at),
                )
        conn.close()
    else:
        import psycopg

        with psycopg.connect(store_url) as pg:
            for job_id, (name, policy, grace) in zip(job_ids, jobs, strict=True):
                pg.execute(job_sql.replace("?", "%s"), (job_id, name, t0, policy, grace, t0, t0))
            for run_id, job, trigger, attempt, before in runs:
                key = None if trigger == "schedule" else f"auto:{run_id}"
                due = t0 - timedelta(seconds=before)
                pg.execute(
                    run_sql.replace("?", "%s"),
                    (run_id, job_ids[job], jobs[job][0], due, due, attempt, trigger, key, t0),
                )
    assert await store.migrate() == SCHEMA_VERSION
    from duetime.store.base import RunsMisfireParams

    skipped = await store.runs_misfire(RunsMisfireParams(now=t0 + timedelta(seconds=31)))
    assert skipped == ["j-skip"], "only the waiting scheduled run of the skip job misfires"


# --- the migrated schema ---------------------------------------------------------------------


def _squash(sql: str | None) -> str | None:
    return None if sql is None else re.sub(r"\s+", " ", sql).strip()


def sqlite_schema(path: str) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        schema: dict[str, Any] = {}
        for table in tables:
            columns = [
                f"{name} {decl}" + (" NOT NULL" if notnull else "") + (f" PK{pk}" if pk else "")
                for _, name, decl, notnull, _, pk in conn.execute(f"PRAGMA table_info('{table}')")
            ]
            indexes: dict[str, Any] = {}
            for _, name, unique, origin, partial in conn.execute(f"PRAGMA index_list('{table}')"):
                keys = [
                    (col if col is not None else "<expr>") + (" DESC" if desc else "")
                    for _, _, col, desc, _, key in conn.execute(f"PRAGMA index_xinfo('{name}')")
                    if key
                ]
                found = conn.execute(
                    "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)
                ).fetchone()
                sql = None if found is None else found[0]  # a WITHOUT ROWID table's key: none
                indexes[name] = {
                    "columns": ", ".join(keys),
                    "unique": bool(unique),
                    "origin": origin,
                    "partial": bool(partial),
                    "sql": _squash(sql),
                }
            foreign_keys = sorted(
                f"({src}) REFERENCES {target} ({dst}) ON DELETE {on_delete}"
                for _, _, target, src, dst, _, on_delete, _ in conn.execute(
                    f"PRAGMA foreign_key_list('{table}')"
                )
            )
            schema[table] = {
                "columns": columns,
                "foreign_keys": foreign_keys,
                "indexes": dict(sorted(indexes.items())),
            }
        return schema
    finally:
        conn.close()


def postgres_schema(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        (namespace,) = conn.execute("SELECT current_schema()").fetchone()  # type: ignore[misc]
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') "
                "AND NOT c.relispartition ORDER BY c.relname"
            )
        ]
        schema: dict[str, Any] = {}
        for table in tables:
            columns = [
                f"{name} {data_type}" + (" NOT NULL" if nullable == "NO" else "")
                for name, data_type, nullable in conn.execute(
                    "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = %s "
                    "ORDER BY ordinal_position",
                    (table,),
                )
            ]
            indexes = {
                name: _squash(definition.replace(f"{namespace}.", ""))
                for name, definition in conn.execute(
                    "SELECT indexname, indexdef FROM pg_indexes "
                    "WHERE schemaname = current_schema() AND tablename = %s ORDER BY indexname",
                    (table,),
                )
            }
            kind = conn.execute(
                "SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relname = %s",
                (table,),
            ).fetchone()
            constraints = {
                name: _squash(definition)
                for name, definition in conn.execute(
                    "SELECT con.conname, pg_get_constraintdef(con.oid) FROM pg_constraint con "
                    "JOIN pg_class c ON c.oid = con.conrelid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relname = %s ORDER BY con.conname",
                    (table,),
                )
            }
            schema[table] = {
                "partitioned": kind is not None and kind[0] == "p",
                "columns": columns,
                "constraints": constraints,
                "indexes": indexes,
            }
        return schema


async def test_migrated_schema_is_the_expected_one(store: Store, store_url: str) -> None:
    if store.dialect == "sqlite":
        actual = sqlite_schema(store_url)
    else:
        actual = await asyncio.to_thread(postgres_schema, store_url)
    expected_file = HERE / f"schema_{store.dialect}.json"
    if os.environ.get(UPDATE_ENV) == "1":
        expected_file.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n")
    if not expected_file.exists():
        pytest.fail(
            f"{expected_file.name} is missing: run with {UPDATE_ENV}=1 to write it from the "
            "migrated database, then review it"
        )
    expected = json.loads(expected_file.read_text())
    assert sorted(actual) == sorted(expected), "tables differ"
    for table in expected:
        assert actual[table] == expected[table], f"table {table} differs"
