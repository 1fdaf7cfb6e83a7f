"""Migration 10 (no attempts → runs foreign key, runs_finished keyed by state) on a database
populated at version 9 (rows written as that release wrote them: raw SQL, not today's store):
every job, run (in every state) and attempt is kept, and deletes after the upgrade leave no
attempt behind. Both stores."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import datetime
from typing import Any

import pytest
from historykit import ORPHANS, lead, query
from storekit import TENANT, s

import duetime.store._sql as sql_store
from duetime.store import SCHEMA_VERSION, Store
from duetime.store.base import HistoryPruneParams, JobRef

pytestmark = pytest.mark.fresh_database

TABLES = ("jobs", "runs", "attempts")


def _write(store: Store, url: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if store.dialect == "sqlite":
        conn = sqlite3.connect(url)
        try:
            with conn:
                conn.executemany(sql, rows)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(url) as pg, pg.cursor() as cur:
        cur.executemany(sql.replace("?", "%s"), rows)


def _columns(store: Store, url: str, table: str) -> list[str]:
    if store.dialect == "sqlite":
        conn = sqlite3.connect(url)
        try:
            return [r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as pg:
        cur = pg.execute(f"SELECT * FROM {table} LIMIT 0")
        return [d.name for d in cur.description or []]


async def populate_v9(store: Store, url: str, t0: datetime) -> dict[str, uuid.UUID]:
    """Two jobs; runs of the first in every state a run can be in, the second's succeeded
    recently; attempts for the runs that made some. Returns the ids by name."""
    at = (lambda d: int(d.timestamp() * 1_000_000)) if store.dialect == "sqlite" else (lambda d: d)
    ids = {name: uuid.uuid4() for name in ("j1", "j2")}
    jobs = [
        (str(ids[j]), TENANT, j, "t.task", "{}", "every", "active", 3, 1.0, 2.0, 60.0,
         "fire_once", 60.0, "allow", "at_least_once", 0, at(t0), at(t0))
        for j in ("j1", "j2")
    ]  # fmt: skip
    await asyncio.to_thread(
        _write, store, url,
        "INSERT INTO jobs (id, tenant, name, task, payload, schedule_kind, status, max_attempts, "
        "backoff_base, backoff_factor, backoff_cap, misfire_policy, misfire_grace_s, "
        "overlap_policy, delivery, partition_key, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        jobs,
    )  # fmt: skip
    # (name, job, state, scheduled offset, finished offset or None)
    plan = [
        ("scheduled", "j1", "scheduled", 10, None),
        ("running", "j1", "running", 11, None),
        ("succeeded", "j1", "succeeded", 1, 1),
        ("dead", "j1", "dead", 2, 2),
        ("cancelled", "j1", "cancelled", 3, 3),
        ("skipped", "j1", "skipped", 4, 4),
        ("recent", "j2", "succeeded", 100, 100),
    ]
    for name, *_ in plan:
        ids[name] = uuid.uuid4()
    runs = [
        (str(ids[name]), str(ids[job]), TENANT, job, "t.task", "default", "{}",
         at(t0 + s(sched)), at(t0 + s(sched)), state, 0, 1 if fin is not None else 0, 3,
         1.0, 2.0, 60.0, "at_least_once", "schedule",
         None if fin is None else at(t0 + s(fin)), at(t0))
        for name, job, state, sched, fin in plan
    ]  # fmt: skip
    await asyncio.to_thread(
        _write, store, url,
        "INSERT INTO runs (id, job_id, tenant, job_name, task, queue, payload, scheduled_for, "
        "available_at, state, priority, attempt, max_attempts, backoff_base, backoff_factor, "
        "backoff_cap, delivery, trigger, finished_at, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        runs,
    )  # fmt: skip
    attempts = [
        (str(ids[run]), token, str(ids[job]), TENANT, token, "w", at(t0 + s(fin)),
         at(t0 + s(fin)), outcome, "E" if outcome == "failed" else None)
        for run, job, token, fin, outcome in [
            ("succeeded", "j1", 1, 1, "succeeded"),
            ("dead", "j1", 1, 1, "failed"),
            ("dead", "j1", 2, 2, "failed"),
            ("cancelled", "j1", 1, 3, "cancelled"),
            ("recent", "j2", 1, 100, "succeeded"),
        ]
    ]  # fmt: skip
    await asyncio.to_thread(
        _write, store, url,
        "INSERT INTO attempts (run_id, token, job_id, tenant, number, worker_id, claimed_at, "
        "finished_at, outcome, error_class) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        attempts,
    )  # fmt: skip
    return ids


async def dump(store: Store, url: str, columns: dict[str, list[str]]) -> dict[str, Any]:
    return {
        t: await query(store, url, f"SELECT {', '.join(cols)} FROM {t} ORDER BY 1, 2")
        for t, cols in columns.items()
    }


async def test_the_upgrade_from_version_9_keeps_every_row(
    make_store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await make_store(migrate=False)
    every = sql_store.load_migrations
    monkeypatch.setattr(sql_store, "load_migrations", lambda dialect: every(dialect)[:9])
    assert await store.migrate() == 9
    monkeypatch.setattr(sql_store, "load_migrations", every)
    ids = await populate_v9(store, store_url, t0)
    columns = {t: await asyncio.to_thread(_columns, store, store_url, t) for t in TABLES}
    before = await dump(store, store_url, columns)
    assert [len(before[t]) for t in TABLES] == [2, 7, 5]

    assert await store.migrate() == SCHEMA_VERSION
    await store.check_schema()

    assert await dump(store, store_url, columns) == before
    # the upgraded store deletes attempts with their runs, and keeps the dead letter
    fence = await lead(store, t0 + s(200))
    assert await store.history_prune(HistoryPruneParams(before=t0 + s(50), leader=fence)) == 3
    left = await query(store, store_url, "SELECT state FROM runs ORDER BY state")
    assert [r[0] for r in left] == ["dead", "running", "scheduled", "succeeded"]
    assert await query(store, store_url, ORPHANS) == [(0,)]
    assert await query(store, store_url, "SELECT count(*) FROM attempts") == [(3,)]
    await store.job_delete(JobRef(tenant=TENANT, id=ids["j1"]))
    assert await query(store, store_url, ORPHANS) == [(0,)]
    kept = await query(store, store_url, "SELECT run_id FROM attempts")
    assert [str(r[0]) for r in kept] == [str(ids["recent"])]
