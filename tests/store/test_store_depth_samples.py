"""Queue-depth history (issue 17): ``depth_samples_record`` / ``_list`` / ``_prune`` on both
stores, and the leader's maintenance step recording samples with no dashboard open."""

from __future__ import annotations

from datetime import datetime

from storekit import (
    OTHER_TENANT,
    TENANT,
    complete,
    completion,
    running_run,
    s,
    scheduled_run,
)

from duetime._config import Settings
from duetime._monitoring import QueueDepth
from duetime._types import AttemptOutcome, RunState
from duetime.maintenance import MaintenanceManager
from duetime.store import Store
from duetime.store.base import LeaderElectParams, LeaderFence


async def _acme_busy_due_dead_and_globex_due(store: Store, t0: datetime) -> None:
    """acme: one running, one dead, one due and one not due yet; globex: one due."""
    await running_run(store, t0, "busy")
    doomed = await running_run(store, t0, "doomed")
    dead = completion(doomed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await complete(store, t0, dead) == [True]
    await scheduled_run(store, t0, "due-1")
    await scheduled_run(store, t0 + s(3600), "later")
    await scheduled_run(store, t0, "g-due", tenant=OTHER_TENANT)


async def test_samples_are_recorded_per_tenant_read_back_and_pruned(
    store: Store, t0: datetime
) -> None:
    await _acme_busy_due_dead_and_globex_due(store, t0)
    assert await store.depth_samples_record(t0 + s(5)) == 3  # acme, globex, the cluster
    await scheduled_run(store, t0 + s(6), "due-2")
    assert await store.depth_samples_record(t0 + s(15)) == 3

    acme = await store.depth_samples_list(TENANT, t0)
    assert acme == [QueueDepth(t0 + s(5), 1, 1, 1), QueueDepth(t0 + s(15), 2, 1, 1)]
    globex = await store.depth_samples_list(OTHER_TENANT, t0)
    assert globex == [QueueDepth(t0 + s(5), 1, 0, 0), QueueDepth(t0 + s(15), 1, 0, 0)]
    # a tenant with nothing queued reads zeros at every sampling instant, not a gap
    assert await store.depth_samples_list("initech", t0) == [
        QueueDepth(t0 + s(5), 0, 0, 0),
        QueueDepth(t0 + s(15), 0, 0, 0),
    ]
    assert await store.depth_samples_list(TENANT, t0 + s(10)) == [acme[1]]

    assert await store.depth_samples_prune(t0 + s(10)) == 3
    assert await store.depth_samples_list(TENANT, t0) == [acme[1]]
    assert await store.depth_samples_prune(t0 + s(10)) == 0


async def test_an_empty_cluster_still_records_the_sampling_instant(
    store: Store, t0: datetime
) -> None:
    assert await store.depth_samples_record(t0) == 1
    assert await store.depth_samples_list(TENANT, t0) == [QueueDepth(t0, 0, 0, 0)]


async def test_the_leaders_maintenance_step_records_depth_with_no_page_open(
    store: Store, t0: datetime
) -> None:
    """No API process, no reader: the leader alone keeps the history (store clock frozen at
    t0)."""
    await _acme_busy_due_dead_and_globex_due(store, t0)
    lead = await store.leader_elect(LeaderElectParams("node-a", ttl=30))
    assert lead is not None
    fence = LeaderFence("node-a", lead.term)
    manager = MaintenanceManager(store, Settings(), lambda: fence)
    try:
        assert "queue depth" in await manager.run_once()
    finally:
        await manager.alerts.close()
    assert await store.depth_samples_list(TENANT, t0 - s(60)) == [QueueDepth(t0, 1, 1, 1)]
    assert await store.depth_samples_list(OTHER_TENANT, t0 - s(60)) == [QueueDepth(t0, 1, 0, 0)]


async def test_a_follower_records_nothing(store: Store, t0: datetime) -> None:
    manager = MaintenanceManager(store, Settings(), lambda: None)
    try:
        assert await manager.run_once() == []
    finally:
        await manager.alerts.close()
    assert await store.depth_samples_list(TENANT, t0 - s(60)) == []
