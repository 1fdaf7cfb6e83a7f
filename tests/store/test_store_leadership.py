"""Leader election, leader-fenced maintenance writes, nodes, and retention — both stores."""

from __future__ import annotations

from datetime import datetime

from storekit import (
    TENANT,
    complete,
    completion,
    get_run,
    running_run,
    s,
)

from duetime._types import NodeInfo, RunState
from duetime.store import Store
from duetime.store.base import (
    HistoryPruneParams,
    LeaderElectParams,
    LeaderFence,
    LeasesReapParams,
)


async def elect(store: Store, node: str, now: datetime, ttl: float = 10.0):  # type: ignore[no-untyped-def]
    return await store.leader_elect(LeaderElectParams(node_id=node, ttl=ttl, now=now))


async def test_first_node_is_elected_and_renews_in_the_same_term(
    store: Store, t0: datetime
) -> None:
    assert await store.leader_get() is None
    first = await elect(store, "a", t0)
    assert first is not None
    assert (first.node_id, first.term, first.expires_at) == ("a", 1, t0 + s(10))
    renewed = await elect(store, "a", t0 + s(5))
    assert renewed is not None
    assert (renewed.term, renewed.elected_at, renewed.expires_at) == (1, t0, t0 + s(15))
    assert await store.leader_get() == renewed


async def test_another_node_waits_for_expiry_then_takes_over_with_a_new_term(
    store: Store, t0: datetime
) -> None:
    await elect(store, "a", t0)
    assert await elect(store, "b", t0 + s(9)) is None
    taken = await elect(store, "b", t0 + s(11))
    assert taken is not None
    assert (taken.node_id, taken.term) == ("b", 2)
    # the old leader cannot renew its lapsed term
    assert await elect(store, "a", t0 + s(12)) is None
    assert (await store.leader_get()).node_id == "b"  # type: ignore[union-attr]


async def test_a_leader_that_lapsed_and_comes_back_first_gets_a_new_term(
    store: Store, t0: datetime
) -> None:
    await elect(store, "a", t0)
    again = await elect(store, "a", t0 + s(30))
    assert again is not None
    assert again.term == 2
    assert again.elected_at == t0 + s(30)


async def test_resignation_lets_another_node_take_over_at_once(store: Store, t0: datetime) -> None:
    lead = await elect(store, "a", t0)
    assert lead is not None
    await store.leader_resign(LeaderFence("a", lead.term))
    taken = await elect(store, "b", t0 + s(1))
    assert taken is not None
    assert (taken.node_id, taken.term) == ("b", 2)
    # resigning a term that is no longer ours changes nothing
    await store.leader_resign(LeaderFence("a", lead.term))
    assert (await store.leader_get()).node_id == "b"  # type: ignore[union-attr]


async def test_reaper_with_a_stale_term_changes_nothing(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0)
    first = await elect(store, "a", t0, ttl=5)
    assert first is not None
    await elect(store, "b", t0 + s(6))
    stale = LeaderFence("a", first.term)
    expired = t0 + s(60)
    result = await store.leases_reap(LeasesReapParams(now=expired, leader=stale))
    assert (result.rescheduled, result.dead) == (0, 0)
    assert (await get_run(store, claimed.run.id)).state is RunState.RUNNING
    # the current leader's reap goes through (its term is extended to cover `expired`)
    current = await elect(store, "b", expired - s(1), ttl=30)
    assert current is not None
    fence = LeaderFence("b", current.term)
    result = await store.leases_reap(LeasesReapParams(now=expired, leader=fence))
    assert result.rescheduled == 1
    assert (await get_run(store, claimed.run.id)).state is RunState.SCHEDULED


def node(node_id: str, at: datetime, roles: tuple[str, ...] = ("scheduler",)) -> NodeInfo:
    return NodeInfo(
        id=node_id, host="h", pid=1, roles=roles, partitions=None, started_at=at, heartbeat_at=at
    )


async def test_nodes_register_heartbeat_list_and_prune(store: Store, t0: datetime) -> None:
    await store.node_register(node("a", t0))
    await store.node_register(node("b", t0, ("worker",)))
    await store.node_heartbeat("a", now=t0 + s(50))
    listed = {n.id: n for n in await store.nodes_list()}
    assert listed["a"].heartbeat_at == t0 + s(50)
    assert listed["a"].started_at == t0
    assert listed["b"].roles == ("worker",)
    assert await store.nodes_prune(t0 + s(10)) == 1
    assert [n.id for n in await store.nodes_list()] == ["a"]
    await store.node_unregister("a")
    assert await store.nodes_list() == []


async def test_history_prune_deletes_only_old_finished_runs(store: Store, t0: datetime) -> None:
    old = await running_run(store, t0, "old")
    assert await complete(store, t0 + s(1), completion(old)) == [True]
    recent = await running_run(store, t0 + s(100), "recent")
    assert await complete(store, t0 + s(101), completion(recent)) == [True]
    still_running = await running_run(store, t0 + s(2), "busy")
    lead = await elect(store, "a", t0 + s(200))
    assert lead is not None
    stale = LeaderFence("a", lead.term + 1)
    assert await store.history_prune(HistoryPruneParams(before=t0 + s(50), leader=stale)) == 0
    fence = LeaderFence("a", lead.term)
    deleted = await store.history_prune(HistoryPruneParams(before=t0 + s(50), leader=fence))
    assert deleted == 1
    assert await store.attempts_list(TENANT, old.run.id) == []
    assert (await get_run(store, recent.run.id)).state is RunState.SUCCEEDED
    assert (await get_run(store, still_running.run.id)).state is RunState.RUNNING
