"""The row locks behind the partition lease and leadership fences (PostgreSQL; SQLite's BEGIN
IMMEDIATE serializes every transaction): a takeover waits for the previous holder's fenced
transaction still in flight, while the holder's own renewal never waits for it — so a long
batch or maintenance pass cannot make its node lose its lease."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

import psycopg
import pytest
from storekit import make_job, s
from tests.waiting import eventually

from duetime._partitions import PartitionClaimParams
from duetime.store import Store
from duetime.store.base import JobsDueParams, LeaderElectParams

pytestmark = pytest.mark.postgres


async def claim(store: Store, node: str, now: datetime) -> set[int]:
    leases = await store.partition_leases_claim(PartitionClaimParams(node, range(256), 3.0, now))
    return {lease.partition for lease in leases}


async def stores(make_store: Callable[..., Awaitable[Store]], count: int) -> list[Store]:
    made = [await make_store() for _ in range(count)]
    if made[0].dialect != "postgres":
        pytest.skip("row locks are PostgreSQL's: SQLite serializes every transaction")
    return made


def waiting_on(url: str, table: str) -> Callable[[], Awaitable[bool]]:
    """Whether a statement touching ``table`` waits for a row lock."""

    async def probe() -> bool:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s",
                (f"%{table}%",),
            )
            row = await cur.fetchone()
        return bool(row and row[0])

    return probe


async def test_a_partition_takeover_waits_for_the_old_owners_batch(
    make_store: Callable[..., Awaitable[Store]], store_url: str, t0: datetime
) -> None:
    owner, renewer, taker = await stores(make_store, 3)
    await make_job(owner, "j", next_fire_at=t0, partition=7)
    await claim(owner, "a", t0)
    async with owner.transaction() as tx:
        await tx.now(t0 + s(1))
        assert len(await tx.jobs_lock_due(JobsDueParams(t0 + s(1), 10, None, "a"))) == 1
        # the owner renews while its batch holds the lease rows
        assert await claim(renewer, "a", t0 + s(2)) == set(range(256))
        # its lease lapses (t0 + 5 s); the takeover waits for the batch to commit
        taking = asyncio.ensure_future(claim(taker, "b", t0 + s(10)))
        await eventually(waiting_on(store_url, "partition_leases"), what="the takeover waits")
        assert not taking.done()
    assert await taking == set(range(256))


async def test_a_leader_takeover_waits_for_the_leaders_fenced_transaction(
    make_store: Callable[..., Awaitable[Store]], store_url: str, t0: datetime
) -> None:
    leader, renewer, taker = await stores(make_store, 3)
    first = await leader.leader_elect(LeaderElectParams("a", 10.0, t0))
    assert first is not None
    async with leader._tx() as conn:  # what a leader-only write does first (leader_hold)
        held = await leader._one(conn, "leader_hold", node_id="a", term=first.term, now=t0)
        assert held is not None
        renewed = await renewer.leader_elect(LeaderElectParams("a", 10.0, t0 + s(2)))
        assert renewed is not None
        assert renewed.term == first.term
        taking = asyncio.ensure_future(taker.leader_elect(LeaderElectParams("b", 10.0, t0 + s(30))))
        await eventually(waiting_on(store_url, "leader"), what="the takeover waits")
        assert not taking.done()
    taken = await taking
    assert taken is not None
    assert (taken.node_id, taken.term) == ("b", first.term + 1)
