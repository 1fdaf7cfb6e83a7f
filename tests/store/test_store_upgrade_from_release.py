"""The upgrade from the previous release (3524c02, schema version 5) to this one (issue 15,
item 2), and from version 9 (before migration 10 dropped the attempts → runs foreign key): a
database populated as that release wrote it — jobs, runs in every state, a dead letter,
attempts — is migrated with nothing lost, and works afterwards: its attempts stay readable,
retention prunes what it should and keeps the dead letter, a job's delete leaves no attempt
behind, the weekly attempt partitions start beside the old rows. On PostgreSQL the upgrade is
not rolling (decision 0015): it refuses while a node of the previous release still
heartbeats. Both stores."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta

import pytest
from historykit import ORPHANS, lead, query
from storekit import TENANT, s
from upgradekit import TABLES, dump, migrated_to, populate_release, table_columns, write

from duetime._types import AttemptOutcome
from duetime.errors import NodesStillRunning
from duetime.store import SCHEMA_VERSION, Store
from duetime.store.base import AttemptPartitionsParams, HistoryPruneParams, JobRef

pytestmark = pytest.mark.fresh_database

RELEASE_SCHEMA = 5
"""The schema version of the previous release, 3524c02."""


@pytest.mark.parametrize("version", [RELEASE_SCHEMA, 9])
async def test_a_database_of_an_earlier_release_is_upgraded_with_nothing_lost(
    make_store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    store = await make_store(migrate=False)
    await migrated_to(store, monkeypatch, version)
    ids = await populate_release(store, store_url, t0)
    cols = await table_columns(store, store_url)
    before = await dump(store, store_url, cols)
    assert [len(before[t]) for t in TABLES] == [2, 7, 5]

    assert await store.migrate() == SCHEMA_VERSION
    await store.check_schema()

    assert await dump(store, store_url, cols) == before
    dead = await store.attempts_list(TENANT, ids["dead"])
    assert [(a.number, a.outcome) for a in dead] == [
        (1, AttemptOutcome.FAILED),
        (2, AttemptOutcome.FAILED),
    ]
    # the old rows sit in the default partition: retention prunes them row by row
    fence = await lead(store, t0 + s(200))
    assert await store.history_prune(HistoryPruneParams(before=t0 + s(50), leader=fence)) == 3
    left = await query(store, store_url, "SELECT state FROM runs ORDER BY state")
    assert [r[0] for r in left] == ["dead", "running", "scheduled", "succeeded"]
    assert await query(store, store_url, ORPHANS) == [(0,)]
    assert await query(store, store_url, "SELECT count(*) FROM attempts") == [(3,)]
    # then the weeks start: this week's takes its attempts, and once past retention it goes
    # whole but for the dead letter's
    weeks = AttemptPartitionsParams(before=t0 - timedelta(days=90), now=t0, leader=fence)
    created = (await store.attempts_partitions(weeks)).created
    assert len(created) == (3 if store.dialect == "postgres" else 0)
    later = AttemptPartitionsParams(before=t0 + timedelta(days=30), now=t0, leader=fence)
    assert (await store.attempts_partitions(later)).kept == (
        2 if store.dialect == "postgres" else 0
    )
    kept = await query(store, store_url, "SELECT run_id FROM attempts")
    expected = ["dead", "dead"] + ([] if store.dialect == "postgres" else ["recent"])
    assert sorted(str(r[0]) for r in kept) == sorted(str(ids[name]) for name in expected)
    # a job's delete takes its runs' attempts (no foreign key cascades to them)
    await store.job_delete(JobRef(tenant=TENANT, id=ids["j1"]))
    assert await query(store, store_url, ORPHANS) == [(0,)]


@pytest.mark.parametrize(
    "store_url",
    [pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.fresh_database])],
    indirect=True,
)
async def test_the_upgrade_waits_for_the_previous_release_to_stop(
    make_store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await make_store(migrate=False)
    await migrated_to(store, monkeypatch, RELEASE_SCHEMA)
    await _node_heartbeating(store, store_url, "old-host", os.getpid())

    with pytest.raises(NodesStillRunning) as refused:
        await store.migrate()

    assert refused.value.migration == "012_attempts_partitioned"
    assert refused.value.nodes == [f"old-host:{os.getpid()} (worker)"]
    assert "stop every duetime process of the previous release" in str(refused.value)
    assert await store.schema_version() == RELEASE_SCHEMA
    await query(store, store_url, "SELECT 1")  # the refusal left no transaction open
    await query(store, store_url, "DELETE FROM nodes RETURNING id")  # the nodes stopped
    # a worker embedded in an application counts too, within the settings' window
    await _worker_heartbeating(store, store_url, "app-host", 4242, seconds_ago=50)
    with pytest.raises(NodesStillRunning) as refused:
        await store.migrate(alive_within=60)
    assert refused.value.nodes == ["app-host:4242 (embedded worker)"]
    assert await store.schema_version() == RELEASE_SCHEMA
    assert await store.migrate(alive_within=45) == SCHEMA_VERSION  # older than the window


async def _worker_heartbeating(
    store: Store, url: str, host: str, pid: int, *, seconds_ago: float
) -> None:
    # the release's workers table (v5) has no tenant column yet: the check reads it anyway
    await asyncio.to_thread(
        write,
        store,
        url,
        "INSERT INTO workers (id, host, pid, tasks, queues, started_at, heartbeat_at) "
        "VALUES (?, ?, ?, '[]', '[]', clock_timestamp(), "
        "clock_timestamp() - make_interval(secs => ?))",
        [(f"{host}-w1", host, pid, seconds_ago)],
    )


async def _node_heartbeating(store: Store, url: str, host: str, pid: int) -> None:
    await asyncio.to_thread(
        write,
        store,
        url,
        "INSERT INTO nodes (id, host, pid, roles, started_at, heartbeat_at) "
        "VALUES (?, ?, ?, '[\"worker\"]', clock_timestamp(), clock_timestamp())",
        [(f"{host}-1", host, pid)],
    )
