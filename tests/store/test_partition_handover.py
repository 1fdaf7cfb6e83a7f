"""Handovers of leased partitions between in-process schedulers (a keeper and a materializer
each, on stores of their own over one database, on the frozen clock): a node dies, a stalled
node comes back, a node joins, a node leaves — and every occurrence of every job becomes a run
exactly once, checked from the database. Both stores."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from storekit import list_runs, make_job, s

from duetime._clock import FrozenClock
from duetime._config import Settings
from duetime._types import Job
from duetime.leadership.partitions import PartitionKeeper
from duetime.scheduler.materializer import Materializer
from duetime.store import Store

TTL = 3.0
SETTINGS = Settings(scheduler_horizon=2.0, partition_lease_ttl=TTL)
PARTS = (3, 60, 127, 128, 129, 200, 255, 0, 85, 86, 170, 171)
"""Job partitions on both sides of every share boundary of 1, 2 and 3 members."""


class Node:
    """A scheduler: its keeper renews, then its materializer ticks, once per :meth:`step`."""

    def __init__(self, store: Store, name: str) -> None:
        self.keeper = PartitionKeeper(store, name, ttl=TTL)
        self.materializer = Materializer(store, SETTINGS, owner=name)

    async def step(self) -> None:
        await self.keeper.run_once()
        await self.materializer.run_once()


async def jobs_on_every_side(store: Store, t0: datetime) -> list[Job]:
    return [await make_job(store, f"p{p}", next_fire_at=t0, partition=p) for p in PARTS]


async def exactly_once(store: Store, jobs: list[Job], t0: datetime, until: datetime) -> None:
    """Every job's runs are its occurrences t0, t0 + 1 s, … through at least ``until``, each
    once, none missing, none skipped."""
    runs = await list_runs(store)
    for job in jobs:
        fired = sorted(r.scheduled_for for r in runs if r.job_id == job.id)
        assert fired[-1] >= until, (job.partition, fired[-1])
        count = int((fired[-1] - t0).total_seconds()) + 1
        assert fired == [t0 + s(k) for k in range(count)], job.partition


async def test_death_stall_join_and_leave_miss_and_double_nothing(
    make_store: Callable[..., Awaitable[Store]], clock: FrozenClock, t0: datetime
) -> None:
    a, b, c = [Node(await make_store(), name) for name in "abc"]
    store = a.keeper.store
    jobs = await jobs_on_every_side(store, t0)

    async def tick(*nodes: Node) -> None:
        for node in nodes:
            await node.step()
        clock.advance(1)

    for _ in range(10):
        await tick(a, b)
    assert (a.keeper.held, b.keeper.held) == (set(range(128)), set(range(128, 256)))

    # b dies (stops renewing): a takes its half once b's membership and leases lapse
    for _ in range(5):
        await tick(a)
    assert a.keeper.held == set(range(256))

    # b was only stalled: its materializer wakes before its keeper and is fenced out
    stale = await b.materializer.run_once()
    assert (stale.jobs, stale.runs_created) == (0, 0)
    for _ in range(5):
        await tick(a, b)
    assert (a.keeper.held, b.keeper.held) == (set(range(128)), set(range(128, 256)))

    # c joins: three shares
    for _ in range(5):
        await tick(a, b, c)
    assert (a.keeper.held, b.keeper.held, c.keeper.held) == (
        set(range(85)),
        set(range(85, 170)),
        set(range(170, 256)),
    )

    # a leaves cleanly: b and c split everything at their next renewal
    await a.keeper.leave()
    for _ in range(5):
        await tick(b, c)
    assert (b.keeper.held, c.keeper.held) == (set(range(128)), set(range(128, 256)))

    await exactly_once(store, jobs, t0, clock.now())


async def test_the_keeper_loop_takes_its_share_then_leaves_on_stop(
    make_store: Callable[..., Awaitable[Store]], clock: FrozenClock
) -> None:
    store = await make_store()
    shown: list[str] = []
    keeper = PartitionKeeper(store, "a", ttl=TTL, on_change=shown.append)
    stop = asyncio.Event()
    running = asyncio.ensure_future(keeper.run(stop))
    await keeper.ready.wait()
    assert keeper.held == set(range(256))
    assert shown == ["0-255"]
    stop.set()
    await running
    now = clock.now()
    assert [lease for lease in await store.partition_leases_list() if lease.expires_at > now] == []
    assert await store.partition_members_beat("b", TTL) == ("b",)
