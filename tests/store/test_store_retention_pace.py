"""The leader's retention pace, both stores: a pass that stopped at its cap (a backlog) is
followed after a short pause instead of the interval, until a pass finds less than its cap;
retention is busy at most ``retention_duty`` of the time; every pass is fenced.

The manager runs on a monotonic clock of the test's (it moves only by the manager's own
waits and by what a pass is made to take); the store's clock is frozen at ``t0``. The cap is
2 runs a pass (batches of 1, 2 batches), the history 7 old runs: 4 passes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest
from historykit import query, succeeded_run
from storekit import dead_run, s

from duetime._config import Settings
from duetime.errors import ValidationError
from duetime.maintenance import MaintenanceManager, RetentionPruner
from duetime.store import Store
from duetime.store.base import LeaderElectParams, LeaderFence

OLD = timedelta(days=100)  # past the default 90-day retention
BACKLOG = 7


class Monotonic:
    """The manager's clock: seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedPruner(RetentionPruner):
    """The product's pruner with a cap of 2 runs a pass, recording when each pass started and
    making each take ``takes`` seconds of the manager's clock."""

    def __init__(self, store: Store, settings: Settings, clock: Monotonic, takes: float) -> None:
        super().__init__(store, settings, batch=1, max_batches=2)
        self.clock = clock
        self.takes = takes
        self.starts: list[float] = []

    async def run_once(self, fence: LeaderFence | None = None) -> int:
        self.starts.append(self.clock.now)
        self.clock.now += self.takes
        return await super().run_once(fence)


async def drive(manager: MaintenanceManager, clock: Monotonic, until: float) -> None:
    """The manager's loop (``run``) with its sleeps taken on the test's clock."""
    while clock.now < until:
        await manager.run_once()
        clock.now += manager.next_wait()


@pytest.fixture
async def fence(store: Store, t0: datetime) -> LeaderFence:
    held = await store.leader_elect(LeaderElectParams(node_id="a", ttl=10.0, now=t0))
    assert held is not None
    return LeaderFence("a", held.term)


async def history(store: Store, t0: datetime, old: int) -> None:
    """``old`` runs finished past retention, an old dead letter, a recent run."""
    for n in range(old):
        await succeeded_run(store, t0 - OLD + s(n), f"old-{n}")
    await dead_run(store, t0 - OLD, "dead", attempts=1)
    await succeeded_run(store, t0 - s(100), "recent")


async def states(store: Store, store_url: str) -> list[str]:
    rows = await query(store, store_url, "SELECT state FROM runs ORDER BY state")
    return [state for (state,) in rows]


@pytest.fixture
async def made() -> AsyncIterator[list[MaintenanceManager]]:
    """The managers a test made, closed after it."""
    managers: list[MaintenanceManager] = []
    yield managers
    for manager in managers:
        await manager.alerts.close()


def manager_for(
    store: Store,
    fence: LeaderFence | None,
    made: list[MaintenanceManager],
    *,
    takes: float = 0.0,
    duty: float = 0.25,
) -> tuple[MaintenanceManager, TimedPruner, Monotonic]:
    clock = Monotonic()
    settings = Settings(retention_duty=duty)
    pruner = TimedPruner(store, settings, clock, takes)
    manager = MaintenanceManager(store, settings, lambda: fence, retention=pruner, clock=clock)
    made.append(manager)
    return manager, pruner, clock


async def test_a_backlog_is_retired_in_follow_up_passes_then_the_interval_resumes(
    store: Store, store_url: str, t0: datetime, fence: LeaderFence, made: list[MaintenanceManager]
) -> None:
    await history(store, t0, BACKLOG)
    manager, pruner, clock = manager_for(store, fence, made)

    await drive(manager, clock, 60.0)

    # 2 + 2 + 2 runs (each pass at its cap), then 1: the backlog ends at the fourth pass,
    # a second apart (the old pace: one pass a minute, 4 minutes)
    assert pruner.starts == [0.0, 1.0, 2.0, 3.0]
    assert await states(store, store_url) == ["dead", "succeeded"]  # dead letter, recent
    await drive(manager, clock, 64.0)
    assert pruner.starts[4:] == [63.0]  # a pass below its cap waits the whole interval


async def test_without_a_backlog_the_next_pass_waits_the_whole_interval(
    store: Store, store_url: str, t0: datetime, fence: LeaderFence, made: list[MaintenanceManager]
) -> None:
    await history(store, t0, 1)
    manager, pruner, clock = manager_for(store, fence, made)

    await drive(manager, clock, 121.0)

    assert pruner.starts == [0.0, 60.0, 120.0]
    assert await states(store, store_url) == ["dead", "succeeded"]


@pytest.mark.parametrize(("duty", "starts"), [(0.25, [0, 8, 16, 24]), (1.0, [0, 3, 6, 9])])
async def test_follow_ups_keep_retention_busy_at_most_its_duty(
    store: Store,
    store_url: str,
    t0: datetime,
    fence: LeaderFence,
    made: list[MaintenanceManager],
    duty: float,
    starts: list[float],
) -> None:
    """Passes of 2 s: at duty 0.25 each is followed 6 s after it ends (busy 2 s of every 8),
    at duty 1 after the 1 s floor."""
    takes = 2.0
    await history(store, t0, BACKLOG)
    manager, pruner, clock = manager_for(store, fence, made, takes=takes, duty=duty)

    await drive(manager, clock, 59.0)

    assert pruner.starts == starts
    for first, second in zip(pruner.starts, pruner.starts[1:], strict=False):
        assert takes / (second - first) <= duty
    assert await states(store, store_url) == ["dead", "succeeded"]


async def test_a_follow_up_pass_is_fenced(
    store: Store,
    store_url: str,
    t0: datetime,
    fence: LeaderFence,
    made: list[MaintenanceManager],
) -> None:
    """Leadership moved after the first pass: the follow-up deletes nothing and so finds no
    backlog (no pass a second forever on a stale term); a node that does not lead runs none."""
    await history(store, t0, BACKLOG)
    manager, pruner, mono = manager_for(store, fence, made)
    await drive(manager, mono, 1.0)
    assert pruner.starts == [0.0]
    assert await store.leader_elect(LeaderElectParams(node_id="b", ttl=10.0, now=t0 + s(11)))

    await drive(manager, mono, 60.0)

    assert pruner.starts == [0.0, 1.0]
    assert len(await states(store, store_url)) == BACKLOG - 2 + 2
    follower, idle, mono = manager_for(store, None, made)
    await drive(follower, mono, 120.0)
    assert idle.starts == []


async def test_a_duty_that_outlasts_its_interval_is_not_run_back_to_back(
    store: Store, fence: LeaderFence, made: list[MaintenanceManager]
) -> None:
    """A pass longer than its duty's interval (a slow database) leaves that duty due at once:
    the manager still sleeps a second before the next pass, as it slept its tick after every
    pass before retention set its own pace."""
    clock = Monotonic()
    passes: list[float] = []

    async def slow(fence: LeaderFence) -> None:
        passes.append(clock.now)
        clock.now += 3.0  # its interval is 2 s

    manager = MaintenanceManager(
        store, Settings(), lambda: fence, extra=[("slow", 2.0, slow)], clock=clock
    )
    made.append(manager)

    await drive(manager, clock, 20.0)

    assert passes == [0.0, 4.0, 8.0, 12.0, 16.0]  # 3 s busy, 1 s asleep (was: 0, 3, 6, …)


def test_the_duty_is_a_fraction_of_the_time() -> None:
    for duty in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValidationError):
            Settings(retention_duty=duty)
    assert Settings(retention_duty=1.0).retention_duty == 1.0
