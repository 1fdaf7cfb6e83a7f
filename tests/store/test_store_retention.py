"""Retention and deletes without the attempts → runs foreign key (decision 0010), both stores:
the history prune keeps dead letters with their attempts; the prune and a job's delete take
the attempts of the runs they delete, leaving none behind."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from historykit import ORPHANS, attempt_count, lead, query, succeeded_run
from storekit import TENANT, claim_one, complete, completion, dead_run, get_run, running_run, s

from duetime._types import AttemptOutcome, RunState
from duetime.store import Store
from duetime.store.base import HistoryPruneParams, JobRef, RunReplayParams


async def test_the_prune_keeps_an_old_dead_letter_with_its_attempts(
    store: Store, store_url: str, t0: datetime
) -> None:
    dead = await dead_run(store, t0, "dead", attempts=2)
    old = await succeeded_run(store, t0 + s(10), "old")
    recent = await succeeded_run(store, t0 + s(100), "recent")
    fence = await lead(store, t0 + s(200))

    deleted = await store.history_prune(HistoryPruneParams(before=t0 + s(50), leader=fence))

    assert deleted == 1
    assert (await get_run(store, dead.run.id)).state is RunState.DEAD
    assert [a.outcome for a in await store.attempts_list(TENANT, dead.run.id)] == [
        AttemptOutcome.FAILED,
        AttemptOutcome.FAILED,
    ]
    assert await attempt_count(store, store_url, old.run.id) == 0
    assert await attempt_count(store, store_url, recent.run.id) == 1
    assert await query(store, store_url, ORPHANS) == [(0,)]
    # however old it gets, a dead letter stays; another pass finds nothing to prune
    later = await lead(store, t0 + s(205))
    far = HistoryPruneParams(before=t0 + s(100_000), leader=later)
    assert await store.history_prune(far) == 1  # `recent`, not the dead letter
    assert (await get_run(store, dead.run.id)).state is RunState.DEAD
    assert await attempt_count(store, store_url, dead.run.id) == 2


async def test_a_replayed_dead_letter_is_pruned_once_it_ends_again(
    store: Store, store_url: str, t0: datetime
) -> None:
    dead = await dead_run(store, t0, "dead", attempts=1)
    assert await store.runs_replay(
        RunReplayParams(tenant=TENANT, run_ids=[dead.run.id], now=t0 + s(5))
    ) == [dead.run.id]
    replayed = await claim_one(store, t0 + s(5))
    assert replayed.run.id == dead.run.id
    assert await complete(store, t0 + s(6), completion(replayed)) == [True]
    fence = await lead(store, t0 + s(200))

    assert await store.history_prune(HistoryPruneParams(before=t0 + s(50), leader=fence)) == 1

    assert await query(store, store_url, "SELECT count(*) FROM runs") == [(0,)]
    assert await query(store, store_url, "SELECT count(*) FROM attempts") == [(0,)]


async def test_the_prune_goes_in_batches_oldest_first(
    store: Store, store_url: str, t0: datetime
) -> None:
    runs = [await succeeded_run(store, t0 + s(n), f"run-{n}") for n in range(3)]
    dead = await dead_run(store, t0 + s(3), "dead", attempts=2)
    fence = await lead(store, t0 + s(200))
    params = HistoryPruneParams(before=t0 + s(50), limit=2, leader=fence)

    assert await store.history_prune(params) == 2
    left = await query(store, store_url, "SELECT id, state FROM runs ORDER BY state")
    assert [(str(i), state) for i, state in left] == [
        (str(dead.run.id), "dead"),
        (str(runs[2].run.id), "succeeded"),
    ]
    assert await store.history_prune(params) == 1
    assert await store.history_prune(params) == 0
    assert await query(store, store_url, ORPHANS) == [(0,)]


async def test_a_job_delete_takes_its_runs_attempts_and_no_other(
    store: Store, store_url: str, t0: datetime
) -> None:
    doomed = await dead_run(store, t0, "doomed", attempts=2)
    other = await succeeded_run(store, t0, "other")
    job_id = (await get_run(store, doomed.run.id)).job_id
    assert await attempt_count(store, store_url, doomed.run.id) == 2

    await store.job_delete(JobRef(tenant=TENANT, id=job_id))

    assert await query(store, store_url, ORPHANS) == [(0,)]
    assert await query(store, store_url, "SELECT count(*) FROM attempts") == [(1,)]
    assert await attempt_count(store, store_url, other.run.id) == 1
    assert (await get_run(store, other.run.id)).state is RunState.SUCCEEDED
    assert await query(store, store_url, "SELECT count(*) FROM runs") == [(1,)]


async def test_a_completion_waiting_on_a_deleted_run_records_no_attempt(
    store: Store, store_url: str, t0: datetime
) -> None:
    """A delete of runs (job delete, retention) locks them, then deletes their attempts in a
    statement of its own. A completion that was waiting for one of those runs must not record
    its attempt after that: nothing would ever delete it (no foreign key cascades)."""
    if store.dialect == "sqlite":
        pytest.skip("SQLite writers are serialized (BEGIN IMMEDIATE): nothing can wait mid-delete")
    import psycopg

    claimed = await running_run(store, t0, "j")
    run_id = claimed.run.id
    async with await psycopg.AsyncConnection.connect(store_url) as deleter:
        await deleter.execute("DELETE FROM runs WHERE id = %s", (run_id,))
        xid = await (await deleter.execute("SELECT pg_current_xact_id()::text")).fetchone()
        assert xid is not None
        finishing = asyncio.create_task(complete(store, t0 + s(1), completion(claimed)))
        watching = psycopg.AsyncConnection.connect(  # no prepared statements: PgBouncer's too
            store_url, autocommit=True, prepare_threshold=None
        )
        async with await watching as watch:
            while not finishing.done():  # until the completion waits for the deleter's lock
                waiting = await watch.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' "
                    "AND transactionid::text = %s AND NOT granted",
                    (xid[0],),
                )
                if (await waiting.fetchone()) != (0,):
                    break
                await asyncio.sleep(0.005)
        assert not finishing.done()
        await deleter.execute("DELETE FROM attempts WHERE run_id = %s", (run_id,))
        await deleter.commit()
    assert await finishing == [False]
    assert await query(store, store_url, ORPHANS) == [(0,)]
