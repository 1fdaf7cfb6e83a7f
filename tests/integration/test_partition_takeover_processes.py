"""Leased partitions among real scheduler processes: two schedulers split the 256 partitions;
SIGKILL the owner of one half and the other takes it over, and every occurrence of every job
of that half fires again — each exactly once, none missed (checked from the database). A
static ``--partitions`` range still serves without any lease."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from duetime import AsyncApp
from duetime._types import Job
from tests.integration.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.slow

HORIZON = 2.0
"""The schedulers' horizon: what a killed one materialized ahead ends this far after it died."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "leases.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def cluster(db_url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(url=db_url, workdir=tmp_path, env={"DUETIME_SCHEDULER_HORIZON": str(HORIZON)})
    try:
        yield c
    finally:
        c.stop_all()


def pid_of(node_id: str) -> int:
    return int(node_id.split(":")[1])


async def every_second_jobs(app: AsyncApp, count: int = 16) -> list[Job]:
    return [
        await app.schedule(
            f"tick-{i}",
            task="leases.noop",
            cron="* * * * * *",
            overlap="allow",
            allow_unregistered=True,
        )
        for i in range(count)
    ]


async def fired(app: AsyncApp, job: Job) -> list[datetime]:
    return sorted(r.scheduled_for for r in (await app.runs(job.id, limit=1000)).items)


async def test_a_killed_owners_partitions_fire_again_exactly_once(
    db_url: str, cluster: Cluster
) -> None:
    async with AsyncApp(db_url, migrate=True) as app:
        jobs = await every_second_jobs(app)
        procs = {p.pid: p for p in (cluster.start("scheduler"), cluster.start("scheduler"))}

        async def split() -> dict[int, set[int]] | None:
            now = await app.store.db_now()
            held: dict[int, set[int]] = {}
            for lease in await app.store.partition_leases_list():
                if lease.expires_at > now:
                    held.setdefault(pid_of(lease.owner), set()).add(lease.partition)
            sizes = sorted(len(v) for v in held.values())
            return held if sizes == [128, 128] else None

        halves = await eventually(split, timeout=30, what="two halves", details=cluster.logs)

        async def shown() -> bool:  # `duetime nodes` says who holds what
            nodes, _ = await app.nodes()
            return sorted(n.partitions or "" for n in nodes) == ["leased 0-127", "leased 128-255"]

        await eventually(shown, timeout=10, what="the nodes' partitions", details=cluster.logs)
        victim = next(pid for pid, parts in halves.items() if 255 in parts)
        orphans = [job for job in jobs if job.partition in halves[victim]]
        assert orphans, "no job landed in the victim's half"
        cluster.kill(procs.pop(victim))
        survivor = next(iter(procs))

        async def taken_over() -> bool:
            now = await app.store.db_now()
            return {
                pid_of(lease.owner)
                for lease in await app.store.partition_leases_list()
                if lease.partition in halves[victim] and lease.expires_at > now
            } == {survivor}

        await eventually(taken_over, timeout=30, what="the takeover", details=cluster.logs)
        beyond = (await app.store.db_now()) + timedelta(seconds=HORIZON)

        async def all_again() -> bool:
            return all([(await fired(app, job))[-1] > beyond for job in orphans])

        await eventually(all_again, timeout=30, what="the orphans fire", details=cluster.logs)
        for job in jobs:
            await app.pause(job.id)
        cluster.stop_all()

        for job in jobs:
            instants = await fired(app, job)
            span = int((instants[-1] - instants[0]).total_seconds()) + 1
            assert len(instants) == span, f"job of partition {job.partition} missed a second"


async def test_a_static_range_serves_without_leases(db_url: str, cluster: Cluster) -> None:
    async with AsyncApp(db_url, migrate=True) as app:
        jobs = await every_second_jobs(app, count=4)
        cluster.start("scheduler", "--partitions", "0-255")

        async def each_fired() -> bool:
            return all([await fired(app, job) for job in jobs])

        await eventually(each_fired, timeout=30, what="runs of every job", details=cluster.logs)
        assert await app.store.partition_leases_list() == []
