"""Weekly attempt partitions on PostgreSQL (decision 0015): created ahead by the leader, a
week's attempts already in the default partition moved into it, a week past retention dropped
whole while the attempts of live runs, dead letters and attempts that ended after the cut stay
(in the default partition). SQLite has no partitions: the call changes nothing."""

from __future__ import annotations

import asyncio
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


WAITING_DETACH = (
    "SELECT count(*) FROM pg_locks WHERE relation = 'attempts'::regclass "
    "AND mode = 'AccessExclusiveLock' AND NOT granted"
)


@POSTGRES_ONLY
async def test_a_week_drop_waiting_for_its_lock_gives_way_to_completions_and_retries(
    store: Store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A week's DETACH waits for every transaction using attempts, and every completion that
    arrives meanwhile queues behind it: it must give up soon (not block a completion until the
    other transaction ends) and try again in the same pass, not a whole pass later."""
    import psycopg

    from duetime.store.postgres import partitions

    # tries enough that a slow poll of pg_locks on a loaded machine sees one waiting
    monkeypatch.setattr(partitions, "RETRY_PAUSES", (0.05,) * 100, raising=False)
    old = t0 - 100 * DAY
    fence = await lead(store, t0)
    setup = AttemptPartitionsParams(before=old - RETENTION, now=old, ahead=0, leader=fence)
    await store.attempts_partitions(setup)
    await succeeded_run(store, old, "gone")
    current = AttemptPartitionsParams(before=old - RETENTION, now=t0, ahead=0, leader=fence)
    await store.attempts_partitions(current)
    claimed = await running_run(store, t0, "hot")
    week = _weeks(old, 1)[0]

    async with await psycopg.AsyncConnection.connect(store_url, autocommit=True) as watch:

        async def detach_waiting() -> bool:
            cursor = await watch.execute(WAITING_DETACH)
            return (await cursor.fetchone()) != (0,)

        async with await psycopg.AsyncConnection.connect(store_url) as reader:
            await reader.execute("SELECT count(*) FROM attempts")  # holds it until rollback
            retiring = asyncio.create_task(
                store.attempts_partitions(
                    AttemptPartitionsParams(before=t0 - RETENTION, now=t0, ahead=0, leader=fence)
                )
            )
            while not await detach_waiting():
                assert not retiring.done(), "the drop ended without waiting for its lock"
                await asyncio.sleep(0.005)
            # queued behind the waiting DETACH; done while the reader still holds attempts
            assert await complete(store, t0 + s(1), completion(claimed)) == [True]
            while not await detach_waiting():  # the same pass tries the week again
                assert not retiring.done(), "the drop gave up without trying again"
                await asyncio.sleep(0.005)
            await reader.rollback()
        change = await retiring

    assert change.dropped == (week,)
    assert week not in await _partitions(store, store_url)
    assert (await get_run(store, claimed.run.id)).state is RunState.SUCCEEDED


@POSTGRES_ONLY
async def test_a_pass_that_cannot_get_the_lock_leaves_the_later_weeks_to_the_next(
    store: Store,
    store_url: str,
    t0: datetime,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once a week's every try gave up, the pass stops dropping (the table stays busy): a pass
    that went on would spend the tries of every week past retention, holding the leader's
    other duties back."""
    import psycopg

    from duetime.store.postgres import partitions

    monkeypatch.setattr(partitions, "RETRY_PAUSES", (0.01, 0.01), raising=False)
    old = t0 - 110 * DAY  # its week and the next both ended before the cut
    fence = await lead(store, t0)
    setup = AttemptPartitionsParams(before=old - RETENTION, now=old, ahead=1, leader=fence)
    await store.attempts_partitions(setup)
    current = AttemptPartitionsParams(before=old - RETENTION, now=t0, ahead=0, leader=fence)
    await store.attempts_partitions(current)
    weeks = _weeks(old, 2)
    assert set(weeks) <= set(await _partitions(store, store_url))

    async with await psycopg.AsyncConnection.connect(store_url) as reader:
        await reader.execute("SELECT count(*) FROM attempts")  # holds it until rollback
        change = await store.attempts_partitions(
            AttemptPartitionsParams(before=t0 - RETENTION, now=t0, ahead=0, leader=fence)
        )
        await reader.rollback()

    assert change == AttemptPartitionsChange()
    assert set(weeks) <= set(await _partitions(store, store_url))
    gave_up = [r for r in caplog.records if "not granted" in r.getMessage()]
    assert len(gave_up) == 1  # the first week's tries; the second was not tried
