"""Helpers for the retention and delete tests: runs that ended (succeeded, dead) with their
attempts, the leadership the prune needs, and reads of the database that bypass the store."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import datetime
from typing import Any

from storekit import complete, completion, running_run, s

from duetime.store import Store
from duetime.store.base import ClaimedRun, LeaderElectParams, LeaderFence

ORPHANS = (
    "SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = a.run_id)"
)


def _query(store: Store, url: str, sql: str) -> list[tuple[Any, ...]]:
    """Read the database directly (not through the store under test)."""
    if store.dialect == "sqlite":
        conn = sqlite3.connect(url)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as pg:
        return pg.execute(sql).fetchall()


async def query(store: Store, url: str, sql: str) -> list[tuple[Any, ...]]:
    return await asyncio.to_thread(_query, store, url, sql)


async def attempt_count(store: Store, url: str, run_id: uuid.UUID) -> int:
    rows = await query(store, url, f"SELECT count(*) FROM attempts WHERE run_id = '{run_id}'")
    return int(rows[0][0])


async def lead(store: Store, now: datetime) -> LeaderFence:
    held = await store.leader_elect(LeaderElectParams(node_id="a", ttl=10.0, now=now))
    assert held is not None
    return LeaderFence("a", held.term)


async def succeeded_run(store: Store, at: datetime, name: str) -> ClaimedRun:
    claimed = await running_run(store, at, name)
    assert await complete(store, at + s(1), completion(claimed)) == [True]
    return claimed
