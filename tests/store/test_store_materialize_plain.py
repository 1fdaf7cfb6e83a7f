"""The materializer's set path (docs/decisions/0038): plain one-shot jobs' runs made in the
database — the same runs the planner's path makes, only for plain one-shots, one run per
occurrence with two schedulers at once, fenced by partition leases — every store."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import fields
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from storekit import TENANT, get_job, list_runs, make_job, materialize, s, stuck_planner
from test_store_partition_leases import claim

from duetime._config import Settings
from duetime._types import MisfirePolicy, OverlapPolicy, Run, Schedule, ScheduleKind
from duetime.scheduler.materializer import Materializer, materialize_plain
from duetime.scheduler.planner import plan_job
from duetime.store import Store
from duetime.store.base import JobsDueParams

SAME_FIELDS = [f.name for f in fields(Run) if f.name not in {"id", "job_id", "job_name"}]
"""The run fields two jobs' runs share when the jobs differ only in name."""


OWN_COLUMNS = {"id", "job_id", "job_name", "concurrency_key"}


def raw_runs(store_url: str) -> dict[str, dict[str, Any]]:
    """Every column of every run as stored, by job name (the store's reads leave some out)."""
    if store_url.startswith("postgresql"):
        with psycopg.connect(store_url, row_factory=dict_row) as conn:
            return {r["job_name"]: r for r in conn.execute("SELECT * FROM runs")}
    with contextlib.closing(sqlite3.connect(store_url)) as db:
        db.row_factory = sqlite3.Row
        return {r["job_name"]: dict(r) for r in db.execute("SELECT * FROM runs")}


def at(t: datetime) -> Schedule:
    return Schedule(kind=ScheduleKind.AT, at=t)


async def test_a_plain_one_shot_gets_the_run_the_planner_would_make(
    store: Store, store_url: str, t0: datetime
) -> None:
    for policy in MisfirePolicy:
        options = {
            "schedule": at(t0),
            "next_fire_at": t0,
            "payload": {"p": [1, "x"]},
            "priority": 3,
            "queue": "q",
            "timeout": 4.5,
            "misfire_policy": policy,
            "overlap_policy": OverlapPolicy.SKIP,
        }
        planned = await make_job(store, f"planned-{policy}", **options)
        assert (await materialize(store, t0, planner=plan_job)).runs_created == 1
        plain = await make_job(store, f"plain-{policy}", **options)
        done = await materialize_plain(store, horizon=0.0, now=t0)
        assert (done.jobs, done.runs, done.made) == (1, 1, ((TENANT, plain.task, t0, 1),))
        (one,) = await list_runs(store, job_id=planned.id)
        (other,) = await list_runs(store, job_id=plain.id)
        assert [getattr(other, f) for f in SAME_FIELDS] == [getattr(one, f) for f in SAME_FIELDS]
        rows = raw_runs(store_url)
        column_by_column = {k: v for k, v in rows[plain.name].items() if k not in OWN_COLUMNS}
        assert column_by_column == {
            k: v for k, v in rows[planned.name].items() if k not in OWN_COLUMNS
        }
        keys = (rows[planned.name]["concurrency_key"], rows[plain.name]["concurrency_key"])
        assert keys == (f"job:{planned.id}", f"job:{plain.id}")
        assert (await get_job(store, plain.id)).next_fire_at is None
        assert (await get_job(store, planned.id)).next_fire_at is None


async def test_a_fractional_grace_gives_the_planners_misfire_deadline(
    store: Store, store_url: str, t0: datetime
) -> None:
    """1.005 s is 1,004,999.99… µs as a double: the deadline is rounded to the microsecond as
    Python's timedelta (and PostgreSQL's make_interval) round it, never truncated."""
    options = {
        "schedule": at(t0),
        "next_fire_at": t0,
        "payload": {},
        "misfire_policy": MisfirePolicy.SKIP,
        "misfire_grace": 1.005,
    }
    await make_job(store, "planned", **options)
    assert (await materialize(store, t0, planner=plan_job)).runs_created == 1
    await make_job(store, "plain", **options)
    assert (await materialize_plain(store, horizon=0.0, now=t0)).runs == 1
    rows = raw_runs(store_url)
    assert rows["plain"]["misfire_at"] == rows["planned"]["misfire_at"]


async def test_only_plain_one_shots_due_within_the_horizon_take_the_set_path(
    store: Store, t0: datetime
) -> None:
    now = t0 + s(100)
    plain = await make_job(store, "plain", schedule=at(now + s(5)), next_fire_at=now + s(5))
    left = [
        await make_job(store, "recurring", next_fire_at=now),
        await make_job(store, "later", schedule=at(now + s(11)), next_fire_at=now + s(11)),
        # registered (at t0) before its instant, which is past its grace (60 s) at `now`
        await make_job(
            store,
            "missed",
            schedule=at(t0 + s(5)),
            next_fire_at=t0 + s(5),
            misfire_policy=MisfirePolicy.SKIP,
        ),
        await make_job(
            store,
            "replace",
            schedule=at(now),
            next_fire_at=now,
            overlap_policy=OverlapPolicy.REPLACE,
        ),
        await make_job(store, "elsewhere", schedule=at(now), next_fire_at=now, partition=9),
    ]
    done = await materialize_plain(store, horizon=10.0, now=now, partitions=(0, 8))
    assert (done.jobs, done.runs) == (1, 1)
    assert {r.job_id for r in await list_runs(store)} == {plain.id}
    for job in left:
        assert (await get_job(store, job.id)).next_fire_at is not None, job.name


async def test_a_job_registered_after_its_instant_is_not_a_miss(store: Store, t0: datetime) -> None:
    job = await make_job(
        store,
        "past",
        schedule=at(t0 - s(3600)),
        next_fire_at=t0 - s(3600),
        misfire_policy=MisfirePolicy.SKIP,
    )
    done = await materialize_plain(store, horizon=0.0, now=t0)
    assert done.jobs == 1
    (run,) = await list_runs(store, job_id=job.id)
    assert run.scheduled_for == t0 - s(3600)


async def test_an_existing_occurrence_is_left_alone_and_the_job_advanced(
    store: Store, t0: datetime
) -> None:
    job = await make_job(store, "stuck", schedule=at(t0), next_fire_at=t0)
    # the planner's path made the run but left the job due (as a scheduler that crashed
    # between the two could not: one transaction; here a planner that never advances)
    assert (await materialize(store, t0, planner=stuck_planner)).runs_created == 1
    (first,) = await list_runs(store, job_id=job.id)
    done = await materialize_plain(store, horizon=0.0, now=t0)
    assert (done.jobs, done.runs) == (1, 0)
    assert [r.id for r in await list_runs(store, job_id=job.id)] == [first.id]
    assert (await get_job(store, job.id)).next_fire_at is None


async def test_a_node_makes_runs_only_for_partitions_whose_lease_it_holds(
    store: Store, t0: datetime
) -> None:
    low = await make_job(store, "low", schedule=at(t0), next_fire_at=t0, partition=3)
    high = await make_job(store, "high", schedule=at(t0), next_fire_at=t0, partition=200)
    await claim(store, "a", range(256), t0)
    assert (await materialize_plain(store, horizon=0.0, now=t0, owner="b")).jobs == 0
    await claim(store, "a", range(128), t0 + s(2))
    await claim(store, "b", range(128, 256), t0 + s(4))
    assert (await materialize_plain(store, horizon=0.0, now=t0 + s(4), owner="a")).jobs == 1
    assert {r.job_id for r in await list_runs(store)} == {low.id}
    assert (await materialize_plain(store, horizon=0.0, now=t0 + s(6), owner="a")).jobs == 0
    assert (await materialize_plain(store, horizon=0.0, now=t0 + s(4), owner="b")).jobs == 1
    assert {r.job_id for r in await list_runs(store)} == {low.id, high.id}


async def test_the_scheduler_loop_takes_plain_one_shots_by_the_set_path(
    store: Store, t0: datetime
) -> None:
    jobs = [await make_job(store, f"shot-{i}", schedule=at(t0), next_fire_at=t0) for i in range(7)]
    recurring = await make_job(store, "recurring", next_fire_at=t0)
    settings = Settings(scheduler_horizon=0.5)
    done = await Materializer(store, settings).run_once()
    assert done.jobs == 8
    runs = await list_runs(store)
    assert sorted(r.job_id for r in runs if r.job_id != recurring.id) == sorted(j.id for j in jobs)


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgres", "hashed"], indirect=True)
async def test_two_schedulers_make_one_run_per_occurrence(
    make_store: Callable[..., Awaitable[Store]], t0: datetime
) -> None:
    one, other = await make_store(), await make_store()
    jobs = [await make_job(one, f"shot-{i}", schedule=at(t0), next_fire_at=t0) for i in range(40)]
    held = asyncio.Event()
    release = asyncio.Event()

    async def first() -> int:
        # holds its batch's job rows locked until the other scheduler has done its work
        async with one.transaction() as tx:
            await tx.now(t0)
            batch = await tx.runs_materialize_plain(JobsDueParams(t0, 25))
            held.set()
            await release.wait()
            return batch.runs

    task = asyncio.create_task(first())
    await held.wait()
    second = await materialize_plain(other, horizon=0.0, now=t0)  # skips the locked 25
    release.set()
    assert (await task, second.runs) == (25, 15)
    # and once both committed, nothing is due: neither makes a second run
    assert (await materialize_plain(one, horizon=0.0, now=t0)).jobs == 0
    runs = await list_runs(one)
    assert sorted(r.job_id for r in runs) == sorted(j.id for j in jobs)
