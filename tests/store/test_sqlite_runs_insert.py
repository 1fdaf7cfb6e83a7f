"""SQLite's materializer insert (``runs_insert_values``, bound parameters) writes what the JSON
form (``runs_insert``, used for single runs and workflow steps) writes, column by column."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from storekit import make_job, s

from duetime._clock import FrozenClock
from duetime.store._values import planned_run_values
from duetime.store.base import PlannedRun
from duetime.store.sqlfile import load_queries
from duetime.store.sqlite import store as sqlite_store
from duetime.store.sqlite.store import RUN_COLUMNS, SQLiteStore


def test_the_bound_insert_names_the_columns_of_the_json_insert() -> None:
    text = load_queries("sqlite")["runs_insert"]
    listed = re.search(r"INSERT INTO runs \(([^)]*)\)", text)
    assert listed is not None
    columns = [c.strip() for c in listed.group(1).split(",")]
    assert sorted(RUN_COLUMNS) == sorted(set(columns) - {"state", "created_at"})


async def test_runs_inserted_through_bound_values_equal_those_through_json(
    tmp_path: Path, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_RUNS_PER_INSERT", 2)  # 5 runs: three statements
    store = SQLiteStore(str(tmp_path / "d.db"), clock=FrozenClock(t0))
    await store.open()
    try:
        await store.migrate()
        job = await make_job(store, "j", next_fire_at=t0, payload={"p": [1, "x"]}, priority=3)
        planned = [PlannedRun(scheduled_for=t0 + s(k), available_at=t0 + s(k)) for k in range(6)]
        rows = [planned_run_values(job, p) for p in planned]
        async with store._tx() as conn:
            bound = await store._runs_insert_rows(conn, rows[:5], t0)
            again = await store._runs_insert_rows(conn, rows[:5], t0)  # each occurrence once
            by_json = await store._all(conn, "runs_insert", batch=store._records(rows), now=t0)
            cursor = await conn.execute("SELECT * FROM runs ORDER BY scheduled_for")
            stored = list(await cursor.fetchall())
    finally:
        await store.close()
    assert len(bound) == 5
    assert again == []
    assert [r["id"] for r in by_json] == [str(rows[5]["id"])]  # the other five existed
    assert [r["id"] for r in stored] == [str(r["id"]) for r in rows]
    ignored = {"id", "scheduled_for", "available_at", "misfire_at"}
    first, last = dict(stored[0]), dict(stored[5])
    assert {k: v for k, v in first.items() if k not in ignored} == {
        k: v for k, v in last.items() if k not in ignored
    }
    assert (
        last["misfire_at"] - last["scheduled_for"] == first["misfire_at"] - first["scheduled_for"]
    )
