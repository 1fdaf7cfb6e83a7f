"""The lease metrics (issue 23): ``duetime_partitions_held{node}`` and
``duetime_lease_renewal_gap_seconds{lease}``, recorded by real keepers and electors on a real
store, driven step by step on the frozen clock (the gaps are measured on it). Both stores."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
from prometheus_client import CollectorRegistry

from duetime._clock import FrozenClock
from duetime.leadership.elector import Elector
from duetime.leadership.partitions import PartitionKeeper
from duetime.metrics import Metrics
from duetime.store import Store

TTL = 3.0


def sample(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def gaps(m: Metrics, lease: str) -> tuple[float | None, float | None, float | None]:
    """(count, sum, count of gaps <= 2 s) of a lease's renewal gaps."""
    name = "duetime_lease_renewal_gap_seconds"
    return (
        sample(m, f"{name}_count", lease=lease),
        sample(m, f"{name}_sum", lease=lease),
        sample(m, f"{name}_bucket", lease=lease, le="2.0"),
    )


async def test_partitions_held_follow_the_members_and_gaps_are_the_renewals_spacing(
    make_store: Callable[..., Awaitable[Store]],
    clock: FrozenClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = Metrics(CollectorRegistry())

    def keeper(store: Store, node: str) -> PartitionKeeper:
        return PartitionKeeper(
            store, node, ttl=TTL, metrics_to=m, monotonic=lambda: clock.now().timestamp()
        )

    a = keeper(await make_store(), "a")
    b = keeper(await make_store(), "b")
    await a.run_once()
    assert sample(m, "duetime_partitions_held", node="a") == 256
    assert gaps(m, "partitions") == (0.0, 0.0, 0.0)  # a first renewal has no gap

    clock.advance(1)
    await b.run_once()  # b joins; a gives up half at its next renewal, b takes it at its next
    await a.run_once()
    clock.advance(1.5)
    await b.run_once()
    assert sample(m, "duetime_partitions_held", node="a") == 128
    assert sample(m, "duetime_partitions_held", node="b") == 128
    assert gaps(m, "partitions") == (2.0, 2.5, 2.0)  # a: 1 s, b: 1.5 s

    clock.advance(1)  # a renews late, 2.5 s after its last renewal: past two thirds of its lease
    with caplog.at_level(logging.WARNING, logger="duetime.leadership"):
        await a.run_once()
    assert gaps(m, "partitions") == (3.0, 5.0, 2.0)
    assert "partitions lease renewed 2.5s after the previous renewal (lease 3.0s)" in caplog.text
    assert a.max_gap == 2.5

    await b.leave()
    assert sample(m, "duetime_partitions_held", node="b") == 0
    clock.advance(1)
    await a.run_once()
    assert sample(m, "duetime_partitions_held", node="a") == 256


async def test_the_leader_gap_counts_renewals_while_leading_only(
    make_store: Callable[..., Awaitable[Store]], clock: FrozenClock
) -> None:
    m = Metrics(CollectorRegistry())

    def elector(store: Store, node: str) -> Elector:
        return Elector(
            store, node, ttl=TTL, metrics_to=m, monotonic=lambda: clock.now().timestamp()
        )

    a = elector(await make_store(), "a")
    b = elector(await make_store(), "b")
    assert await a.run_once() is not None
    assert await b.run_once() is None  # a follower renews nothing
    clock.advance(1)
    await a.run_once()
    await b.run_once()
    assert gaps(m, "leader") == (1.0, 1.0, 1.0)

    clock.advance(10)  # a stalls past its lease: b takes over, a's old term ends
    assert await b.run_once() is not None
    assert await a.run_once() is None
    clock.advance(1)
    await b.run_once()
    # the 11 s between a's two renewals were never a gap of one term: only b's 1 s counts
    assert gaps(m, "leader") == (2.0, 2.0, 2.0)
    await b.resign()
    assert gaps(m, "leader") == (2.0, 2.0, 2.0)
