"""Populating a database as an earlier release wrote it (raw SQL, not today's store), for the
upgrade tests. The rows use only columns every release since version 5 (3524c02) has."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import datetime
from typing import Any

import pytest
from historykit import query
from storekit import TENANT, s

import duetime.store._sql as sql_store
from duetime.store import Store

TABLES = ("jobs", "runs", "attempts")


def write(store: Store, url: str, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if store.dialect == "sqlite":
        conn = sqlite3.connect(url)
        try:
            with conn:
                conn.executemany(sql, rows)
        finally:
            conn.close()
        return
    import psycopg

    # no prepared statements: the URL may be PgBouncer's in transaction pooling mode
    with psycopg.connect(url, prepare_threshold=None) as pg, pg.cursor() as cur:
        cur.executemany(sql.replace("?", "%s"), rows)


def columns(store: Store, url: str, table: str) -> list[str]:
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


async def populate_release(store: Store, url: str, t0: datetime) -> dict[str, uuid.UUID]:
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
        write, store, url,
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
        write, store, url,
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
        write, store, url,
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


async def table_columns(store: Store, url: str) -> dict[str, list[str]]:
    """The columns of :data:`TABLES` as the database has them now."""
    return {t: await asyncio.to_thread(columns, store, url, t) for t in TABLES}


async def migrated_to(store: Store, monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """Bring an empty database to schema ``version`` only (as that release left it); the
    store's later ``migrate()`` then applies the rest."""
    every = sql_store.load_migrations
    monkeypatch.setattr(sql_store, "load_migrations", lambda dialect: every(dialect)[:version])
    assert await store.migrate() == version
    monkeypatch.setattr(sql_store, "load_migrations", every)
