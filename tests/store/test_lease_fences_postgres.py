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


@pytest.mark.parametrize("blocked", [8, 16, 24])
async def test_claims_of_nodes_whose_views_differ_never_deadlock(
    make_store: Callable[..., Awaitable[Store]], store_url: str, t0: datetime, blocked: int
) -> None:
    """Node a still sees itself alone and renews partitions 0-31; node b no longer sees a
    (their instants differ) and takes the same leases, lapsed at its instant. Their rows lie in
    descending key order on disk, and a third transaction holds row ``blocked`` until both
    claims wait: a renewal that locked rows in scan order (31 down) and a takeover in key order
    (0 up) would each hold what the other waits for, and PostgreSQL would abort one."""
    renewer, taker, holder = await stores(make_store, 3)
    await lay_out_descending(holder, t0)
    blocker = await psycopg.AsyncConnection.connect(store_url)
    try:
        await blocker.execute(
            "SELECT 1 FROM partition_leases WHERE partition_key = %s FOR UPDATE", (blocked,)
        )
        renewing = asyncio.ensure_future(claim_range(renewer, "a", t0 + s(1)))
        taking = asyncio.ensure_future(claim_range(taker, "b", t0 + s(10)))
        await eventually(waiting_count(store_url, 2), what="both claims wait for a row lock")
        await blocker.commit()
        renewed, taken = await asyncio.gather(renewing, taking)
    finally:
        await blocker.close()
    # whichever locked row 0 first waited for the holder, the other for it: a renewed all
    # 32 before b took them, or b took them first and a, renewing after, found none its own
    assert renewed in (set(range(32)), set())
    assert taken == set(range(32))
    assert {lease.owner for lease in await taker.partition_leases_list()} == {"b"}


async def test_a_batch_and_a_takeover_lock_lease_rows_in_one_order(
    make_store: Callable[..., Awaitable[Store]], store_url: str, t0: datetime
) -> None:
    """Node a's materializer locks its lease rows (FOR KEY SHARE) while node b takes them over
    (lapsed at b's instant, FOR UPDATE, in key order). The rows lie in descending key order on
    disk, and a third transaction shares row 20 (FOR KEY SHARE): b's takeover locks 0-19 and
    waits for it; then a's batch starts. One that locked in scan order would take 31 down to
    20 and wait for 19, held by b, while b waits for 20, held by it — a deadlock."""
    materializer, taker, holder = await stores(make_store, 3)
    await make_job(holder, "j", next_fire_at=t0, partition=0)
    await lay_out_descending(holder, t0)
    blocker = await psycopg.AsyncConnection.connect(store_url)

    async def batch() -> int:
        async with materializer.transaction() as tx:
            await tx.now(t0 + s(1))
            return len(await tx.jobs_lock_due(JobsDueParams(t0 + s(1), 10, None, "a")))

    try:
        await blocker.execute(
            "SELECT 1 FROM partition_leases WHERE partition_key = 20 FOR KEY SHARE"
        )
        taking = asyncio.ensure_future(claim_range(taker, "b", t0 + s(10)))
        await eventually(waiting_count(store_url, 1), what="the takeover waits")
        batching = asyncio.ensure_future(batch())
        await eventually(waiting_count(store_url, 2), what="the batch waits too")
        await blocker.commit()
        taken, locked = await asyncio.gather(taking, batching)
    finally:
        await blocker.close()
    assert taken == set(range(32))
    assert locked == 0  # a's batch waited for b's takeover, then held no lease: fenced out


async def lay_out_descending(store: Store, t0: datetime) -> None:
    """Leases 0-31 of node a until t0 + 3 s, their rows written in descending key order."""
    async with store._tx() as conn:
        for partition in reversed(range(32)):
            await conn.execute(
                "INSERT INTO partition_leases (partition_key, owner, epoch, expires_at) "
                "VALUES (%s, 'a', 1, %s)",
                (partition, t0 + s(3)),
            )


async def claim_range(store: Store, node: str, now: datetime) -> set[int]:
    leases = await store.partition_leases_claim(PartitionClaimParams(node, range(32), 3.0, now))
    return {lease.partition for lease in leases}


def waiting_count(url: str, count: int) -> Callable[[], Awaitable[bool]]:
    """Whether ``count`` statements on partition_leases (or reading them) wait for a row
    lock."""

    async def probe() -> bool:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND query LIKE '%partition_leases%'"
            )
            row = await cur.fetchone()
        return bool(row and row[0] >= count)

    return probe
