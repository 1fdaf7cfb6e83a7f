"""Partition leases (docs/decisions/0028): membership, fair shares, release and takeover with
epochs, and the fence of the materializer — both stores, instants passed explicitly."""

from __future__ import annotations

from datetime import datetime

from storekit import list_runs, make_job, materialize, s

from duetime._partitions import PARTITIONS, PartitionClaimParams, fair_share, spans
from duetime.store import Store

TTL = 3.0


async def claim(store: Store, node: str, want: range | tuple[int, ...], now: datetime) -> set[int]:
    leases = await store.partition_leases_claim(PartitionClaimParams(node, tuple(want), TTL, now))
    return {lease.partition for lease in leases}


async def owners(store: Store, now: datetime) -> dict[int, str]:
    """Who holds each partition unexpired at ``now``."""
    return {
        lease.partition: lease.owner
        for lease in await store.partition_leases_list()
        if lease.expires_at > now
    }


def test_fair_shares_cover_every_partition_once() -> None:
    for n in (1, 2, 3, 7, 256, 300):
        members = [f"n{i}" for i in range(n)]
        shares = [fair_share(members, m) for m in members]
        assert sorted(p for share in shares for p in share) == list(range(PARTITIONS))
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert fair_share(["a"], "b") == ()


def test_spans_name_the_partitions_as_ranges() -> None:
    assert spans([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert spans(range(256)) == "0-255"
    assert spans([]) == "-"


async def test_members_live_until_their_lease_ends_first_joined_first(
    store: Store, t0: datetime
) -> None:
    assert await store.partition_members_beat("b", TTL, t0) == ("b",)
    assert await store.partition_members_beat("a", TTL, t0 + s(1)) == ("b", "a")
    # b stops renewing: it is gone once its membership expires
    assert await store.partition_members_beat("a", TTL, t0 + s(2)) == ("b", "a")
    assert await store.partition_members_beat("a", TTL, t0 + s(3)) == ("a",)


async def test_a_lease_held_by_another_node_waits_for_its_release(
    store: Store, t0: datetime
) -> None:
    assert await claim(store, "a", range(256), t0) == set(range(256))
    # b's share is the upper half, still a's: nothing taken
    assert await claim(store, "b", range(128, 256), t0 + s(1)) == set()
    # a renews its own share only, releasing the rest at once
    assert await claim(store, "a", range(128), t0 + s(1)) == set(range(128))
    assert await claim(store, "b", range(128, 256), t0 + s(1)) == set(range(128, 256))
    held = await owners(store, t0 + s(1))
    assert {p for p, o in held.items() if o == "a"} == set(range(128))
    assert {p for p, o in held.items() if o == "b"} == set(range(128, 256))


async def test_an_expired_lease_is_taken_over_with_the_next_epoch(
    store: Store, t0: datetime
) -> None:
    await claim(store, "a", range(4), t0)
    await claim(store, "a", range(4), t0 + s(1))  # a renewal keeps the epoch
    epochs = {lease.partition: lease.epoch for lease in await store.partition_leases_list()}
    assert epochs == {0: 1, 1: 1, 2: 1, 3: 1}
    assert await claim(store, "b", range(4), t0 + s(3.5)) == set()  # a's lease still runs
    assert await claim(store, "b", range(4), t0 + s(4)) == set(range(4))
    leases = await store.partition_leases_list()
    assert {(lease.owner, lease.epoch) for lease in leases} == {("b", 2)}
    # a comes back: its lapsed leases are b's now
    assert await claim(store, "a", range(4), t0 + s(5)) == set()


async def test_leaving_releases_every_lease_and_the_membership(store: Store, t0: datetime) -> None:
    await store.partition_members_beat("a", TTL, t0)
    await claim(store, "a", range(256), t0)
    await store.partition_leases_leave("a", t0 + s(1))
    assert await owners(store, t0 + s(1)) == {}
    assert await store.partition_members_beat("b", TTL, t0 + s(1)) == ("b",)
    assert await claim(store, "b", range(256), t0 + s(1)) == set(range(256))


async def test_the_materializer_locks_only_jobs_of_partitions_it_holds(
    store: Store, t0: datetime
) -> None:
    low = await make_job(store, "low", next_fire_at=t0, partition=3)
    high = await make_job(store, "high", next_fire_at=t0, partition=200)
    await claim(store, "a", range(256), t0)
    assert (await materialize(store, t0, owner="b")).jobs == 0  # b holds nothing
    # a's lease on the upper half lapses and b takes it: a's batch leaves that job alone
    await claim(store, "a", range(128), t0 + s(2))
    await claim(store, "b", range(128, 256), t0 + s(4))
    done = await materialize(store, t0 + s(4), owner="a")
    assert done.jobs == 1
    assert {r.job_id for r in await list_runs(store)} == {low.id}
    assert (await materialize(store, t0 + s(4), owner="b")).jobs == 1
    assert {r.job_id for r in await list_runs(store)} == {low.id, high.id}
    # past its lease, a materializes nothing at all
    assert (await materialize(store, t0 + s(6), owner="a")).jobs == 0
