"""Long-run writes (progress, checkpoints, cancel flags) and exactly-once transactions, on both
stores: every write fenced by (run, token); a stale exactly-once attempt's effect never commits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from storekit import TENANT, claim_one, completion, get_run, running_run, s

from duetime import _json
from duetime._types import AttemptOutcome, RunState
from duetime.errors import UnsupportedFeature
from duetime.store import Store
from duetime.store.base import (
    LeasesReapParams,
    RunCancelParams,
    RunCheckpointParams,
    RunProgressParams,
    RunsCompleteParams,
)


async def test_progress_and_checkpoint_are_stored_on_the_running_run(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0)
    run = claimed.run
    assert (run.progress, run.progress_message, run.checkpoint) == (None, None, None)

    assert await store.run_progress_set(RunProgressParams(run.id, run.token, 0.25, "a quarter"))
    assert await store.run_checkpoint_set(
        RunCheckpointParams(run.id, run.token, _json.dumps({"page": 7, "ids": [1, 2]}))
    )
    stored = await get_run(store, run.id)
    assert stored.progress == 0.25
    assert stored.progress_message == "a quarter"
    assert stored.checkpoint == {"page": 7, "ids": [1, 2]}


async def test_a_stale_attempt_changes_neither_progress_nor_checkpoint(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0)
    run = claimed.run
    assert await store.run_checkpoint_set(RunCheckpointParams(run.id, run.token, '{"v": 1}'))
    # the lease lapses; the reaper takes the run over (token + 1) and another worker claims it
    await store.leases_reap(LeasesReapParams(now=t0 + s(60)))
    retaken = await claim_one(store, t0 + s(60), worker="worker-2")
    assert retaken.run.token > run.token
    assert retaken.run.checkpoint == {"v": 1}, "the next attempt is handed the checkpoint"

    assert not await store.run_checkpoint_set(RunCheckpointParams(run.id, run.token, '{"v": 2}'))
    assert not await store.run_progress_set(RunProgressParams(run.id, run.token, 0.9, "late"))
    stored = await get_run(store, run.id)
    assert stored.checkpoint == {"v": 1}
    assert stored.progress is None

    assert await store.run_checkpoint_set(
        RunCheckpointParams(run.id, retaken.run.token, '{"v": 3}')
    )
    assert (await get_run(store, run.id)).checkpoint == {"v": 3}


async def test_a_finished_run_takes_no_more_writes(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0)
    run = claimed.run
    assert await store.runs_complete(RunsCompleteParams([completion(claimed)], now=t0 + s(1)))
    assert not await store.run_checkpoint_set(RunCheckpointParams(run.id, run.token, "{}"))
    assert not await store.run_progress_set(RunProgressParams(run.id, run.token, 1.0))


async def test_cancelling_a_running_run_flags_it(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0)
    run = claimed.run
    assert await store.runs_stop_requested([(run.id, run.token)]) == {}
    cancelled = await store.run_cancel(RunCancelParams(TENANT, run.id, now=t0 + s(1)))
    assert cancelled.state is RunState.CANCELLED
    assert cancelled.cancel_requested
    # the cancel bumped the token: the old attempt learns it through its lost lease
    assert await store.runs_stop_requested([(run.id, run.token)]) == {}


async def test_exactly_once_needs_postgres(store: Store) -> None:
    if store.dialect != "sqlite":
        pytest.skip("SQLite refuses exactly-once; PostgreSQL is tested below")
    with pytest.raises(UnsupportedFeature, match="PostgreSQL"):
        await store.exactly_once_begin()


# --- exactly-once transactions (PostgreSQL) ---------------------------------------------------


@pytest.fixture
async def pg_store(store: Store) -> AsyncIterator[Store]:
    """The PostgreSQL store with an ``effects`` table beside duetime's (dropped afterwards)."""
    if store.dialect != "postgres":
        pytest.skip("exactly-once transactions are PostgreSQL only")
    pool = store.pool  # type: ignore[attr-defined]
    async with pool.connection() as conn:
        await conn.execute("CREATE TABLE effects (run_id uuid, note text)")
    yield store
    async with pool.connection() as conn:
        await conn.execute("DROP TABLE effects")


async def _effects(store: Store) -> list[str]:
    async with store.pool.connection() as conn:  # type: ignore[attr-defined]
        cursor = await conn.execute("SELECT note FROM effects ORDER BY note")
        return [r["note"] for r in await cursor.fetchall()]


async def test_exactly_once_effect_commits_with_the_completion(
    pg_store: Store, t0: datetime
) -> None:
    claimed = await running_run(pg_store, t0)
    tx = await pg_store.exactly_once_begin()
    async with tx.block() as conn:
        await conn.execute("INSERT INTO effects VALUES (%s, 'mine')", (claimed.run.id,))
    assert await _effects(pg_store) == [], "not visible before the commit"
    assert await tx.complete(completion(claimed))
    assert await _effects(pg_store) == ["mine"]
    assert (await get_run(pg_store, claimed.run.id)).state is RunState.SUCCEEDED


async def test_a_stale_exactly_once_attempt_commits_nothing(pg_store: Store, t0: datetime) -> None:
    claimed = await running_run(pg_store, t0)
    tx = await pg_store.exactly_once_begin()
    async with tx.block() as conn:
        await conn.execute("INSERT INTO effects VALUES (%s, 'stale')", (claimed.run.id,))
    await pg_store.leases_reap(LeasesReapParams(now=t0 + s(60)))  # token bumped

    assert not await tx.complete(completion(claimed))
    assert await _effects(pg_store) == []
    attempts = await pg_store.attempts_list(TENANT, claimed.run.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.STALE]
    assert (await get_run(pg_store, claimed.run.id)).state is RunState.SCHEDULED


async def test_a_failed_block_is_undone_and_the_rest_commits(pg_store: Store, t0: datetime) -> None:
    claimed = await running_run(pg_store, t0)
    tx = await pg_store.exactly_once_begin()
    async with tx.block() as conn:
        await conn.execute("INSERT INTO effects VALUES (%s, 'kept')", (claimed.run.id,))

    async def failing_block() -> None:
        async with tx.block() as conn:
            await conn.execute("INSERT INTO effects VALUES (%s, 'undone')", (claimed.run.id,))
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        await failing_block()
    assert await tx.complete(completion(claimed))
    assert await _effects(pg_store) == ["kept"]


async def test_rollback_discards_the_effect(pg_store: Store, t0: datetime) -> None:
    claimed = await running_run(pg_store, t0)
    tx = await pg_store.exactly_once_begin()
    async with tx.block() as conn:
        await conn.execute("INSERT INTO effects VALUES (%s, 'gone')", (claimed.run.id,))
    await tx.rollback()
    await tx.rollback()  # idempotent
    assert await _effects(pg_store) == []
    assert (await get_run(pg_store, claimed.run.id)).state is RunState.RUNNING
