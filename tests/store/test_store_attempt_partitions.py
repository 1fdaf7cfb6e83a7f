"""Weekly attempt partitions on PostgreSQL (decision 0015): created ahead by the leader, a
week's attempts already in the default partition moved into it, a week past retention dropped
whole while the attempts of live runs, dead letters and attempts that ended after the cut stay
(in the default partition). SQLite has no partitions: the call changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from historykit import lead, query, succeeded_run
from storekit import TENANT, complete, completion, dead_run, get_run, running_run, s

from duetime._types import AttemptOutcome, RunState
from duetime.store import Store
from duetime.store.base import (
    AttemptPartitionsChange,
    AttemptPartitionsParams,
    HistoryPruneParams,
    LeaderFence,
)
from duetime.store.postgres.partitions import partition_name, week_start

POSTGRES_ONLY = pytest.mark.parametrize(
    "store_url",
    [pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.fresh_database])],
    indirect=True,
)
DAY = timedelta(days=1)
RETENTION = timedelta(days=90)

WHERE = "SELECT a.run_id::text, a.tableoid::regclass::text FROM attempts a ORDER BY a.finished_at"


def _weeks(after: datetime, count: int) -> list[str]:
    first = week_start(after)
    return [partition_name(first + timedelta(days=7 * k)) for k in range(count)]


async def _partitions(store: Store, url: str) -> list[str]:
    rows = await query(
        store,
        url,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'attempts'::regclass ORDER BY 1",
    )
    return [r[0] for r in rows]


@pytest.mark.fresh_database
async def test_weeks_are_created_ahead_once(store: Store, store_url: str, t0: datetime) -> None:
    if store.dialect == "sqlite":
        fence = await lead(store, t0)
        params = AttemptPartitionsParams(before=t0 - RETENTION, now=t0, leader=fence)
        assert await store.attempts_partitions(params) == AttemptPartitionsChange()
        return
    fence = await lead(store, t0)
    params = AttemptPartitionsParams(before=t0 - RETENTION, now=t0, leader=fence)

    change = await store.attempts_partitions(params)

    assert change.created == tuple(_weeks(t0, 3))
    assert await _partitions(store, store_url) == sorted(["attempts_default", *_weeks(t0, 3)])
    assert await store.attempts_partitions(params) == AttemptPartitionsChange()
    # an attempt lands in its week's partition
    done = await succeeded_run(store, t0, "now")
    assert await query(store, store_url, WHERE) == [(str(done.run.id), _weeks(t0, 1)[0])]


@POSTGRES_ONLY
async def test_a_new_week_takes_its_attempts_from_the_default_partition(
    store: Store, store_url: str, t0: datetime
) -> None:
    later = t0 + 30 * DAY
    done = await succeeded_run(store, later, "later")
    assert await query(store, store_url, WHERE) == [(str(done.run.id), "attempts_default")]
    fence = await lead(store, t0)

    change = await store.attempts_partitions(
        AttemptPartitionsParams(before=t0 - RETENTION, now=later, ahead=0, leader=fence)
    )

    assert change.created == tuple(_weeks(later, 1))
    assert await query(store, store_url, WHERE) == [(str(done.run.id), _weeks(later, 1)[0])]


@POSTGRES_ONLY
async def test_a_week_past_retention_is_dropped_keeping_what_must_stay(
    store: Store, store_url: str, t0: datetime
) -> None:
    old = t0 - 100 * DAY
    fence = await lead(store, t0)
    setup = AttemptPartitionsParams(before=old - RETENTION, now=old, ahead=0, leader=fence)
    assert (await store.attempts_partitions(setup)).created == tuple(_weeks(old, 1))
    gone = await succeeded_run(store, old, "gone")
    dead = await dead_run(store, old + s(10), "dead")
    retrying = await running_run(store, old + s(20), "retrying")
    retry = completion(
        retrying,
        outcome=AttemptOutcome.FAILED,
        next_state=RunState.SCHEDULED,
        available_at=t0 + DAY,
    )
    assert await complete(store, old + s(21), retry) == [True]
    late = await running_run(store, old + s(30), "late")
    assert await complete(store, t0 - DAY, completion(late)) == [True]
    # a late attempt whose run is gone already (retention pruned it): not kept, else nothing
    # would ever prune it from the default partition (pruned there through its run)
    await query(
        store,
        store_url,
        "INSERT INTO attempts SELECT (jsonb_populate_record(NULL::attempts, to_jsonb(a) "
        "|| jsonb_build_object('run_id', gen_random_uuid()))).* FROM attempts a "
        f"WHERE a.run_id = '{late.run.id}' RETURNING run_id",
    )
    week = _weeks(old, 1)[0]
    assert {r[1] for r in await query(store, store_url, WHERE)} == {week}

    change = await store.attempts_partitions(
        AttemptPartitionsParams(before=t0 - RETENTION, now=t0, ahead=0, leader=fence)
    )

    assert change.dropped == (week,)
    assert change.kept == 3
    assert week not in await _partitions(store, store_url)
    assert await query(store, store_url, WHERE) == [
        (str(dead.run.id), "attempts_default"),
        (str(retrying.run.id), "attempts_default"),
        (str(late.run.id), "attempts_default"),
    ]
    assert (await get_run(store, gone.run.id)).state is RunState.SUCCEEDED
    assert [a.outcome for a in await store.attempts_list(TENANT, dead.run.id)] == [
        AttemptOutcome.FAILED
    ]
    # the kept attempts go with their runs: the late run's once retention prunes it
    pruned = await store.history_prune(HistoryPruneParams(before=t0, leader=fence))
    assert pruned == 2  # "gone" and "late"
    assert await query(store, store_url, WHERE) == [
        (str(dead.run.id), "attempts_default"),
        (str(retrying.run.id), "attempts_default"),
    ]


@POSTGRES_ONLY
async def test_only_the_leader_changes_partitions(
    store: Store, store_url: str, t0: datetime
) -> None:
    fence = await lead(store, t0)
    stale = LeaderFence(fence.node_id, fence.term + 1)
    params = AttemptPartitionsParams(before=t0 - RETENTION, now=t0, leader=stale)

    assert await store.attempts_partitions(params) == AttemptPartitionsChange()
    assert await _partitions(store, store_url) == ["attempts_default"]
