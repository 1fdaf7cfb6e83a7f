"""The one-statement claim of a one-shot's keyed run (issue 15's midnight burst, decision 0038):
a run of a one-shot job under its job's own overlap key is claimed by the fair claim, without
the locked step, when it is its job's only unfinished run and its key's advisory lock is free
(``duetime_key_alone``, migration 028). Anything else about the key — another run of the job
waiting or running, a locked step holding the key — leaves it to the locked step as before.
PostgreSQL only (SQLite's claim is one write transaction and takes every keyed run through its
locked step)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from storekit import TASK, claim, list_runs, make_job, materialize, ref, s
from test_store_plans import _claim_params
from wirekit import Wire, counted_store

from duetime._types import Job, OverlapPolicy, RunState, Schedule, ScheduleKind
from duetime.scheduler.materializer import materialize_plain
from duetime.store import Store
from duetime.store.base import RunTriggerParams
from duetime.store.sqlfile import load_queries

pytestmark = pytest.mark.parametrize("store_url", ["postgres", "hashed"], indirect=True)

QUERIES = load_queries("postgres")


async def one_shots(store: Store, at: datetime, count: int, **kwargs: Any) -> list[Job]:
    """``count`` one-shot jobs due at ``at`` (overlap ``skip`` unless given), their runs made."""
    kwargs.setdefault("overlap_policy", OverlapPolicy.SKIP)
    jobs = [
        await make_job(
            store,
            f"shot-{i}",
            schedule=Schedule(kind=ScheduleKind.AT, at=at),
            next_fire_at=at,
            **kwargs,
        )
        for i in range(count)
    ]
    made = (await materialize_plain(store, horizon=0.0, now=at)).runs
    if made < count:  # `replace` jobs are not plain: the planner's path
        made += (await materialize(store, at)).runs_created
    assert made == count
    return jobs


@pytest.fixture
async def wired(store_url: str) -> AsyncIterator[tuple[Store, Wire]]:
    """A store whose every round trip passes through a counting relay (wirekit.py)."""
    async with counted_store(store_url) as wired:
        yield wired


@pytest.fixture
def sql(store_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(store_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def fair_claim(
    conn: psycopg.Connection[Any], now: datetime, name: str = "runs_claim_fair"
) -> list[dict[str, Any]]:
    """The one-statement claim ``name``, alone (no locked step after it)."""
    params = _claim_params(worker_id="w", limit=10, now=now, tasks=[TASK])
    return conn.execute(QUERIES[name], params).fetchall()  # type: ignore[arg-type]


async def test_one_shots_runs_are_claimed_in_one_statement(
    wired: tuple[Store, Wire], t0: datetime
) -> None:
    store, wire = wired
    await one_shots(store, t0, 3)
    wire.rounds.clear()

    claimed = await claim(store, t0, limit=10)

    # before: the fair claim deferred all three to the locked step — BEGIN, its candidates,
    # the keys' advisory locks, the running count, the claim by id, COMMIT, and a last fair
    # claim of what was left: eight round trips
    assert len(wire.statements()) == 1
    assert len(claimed) == 3
    assert all(c.run.state is RunState.RUNNING for c in claimed)


@pytest.mark.parametrize("name", ["runs_claim_fair", "runs_claim_fair_wide"])
async def test_a_key_held_by_a_locked_step_is_left_to_it(
    store: Store, sql: psycopg.Connection[Any], store_url: str, t0: datetime, name: str
) -> None:
    (job,) = await one_shots(store, t0, 1)
    with psycopg.connect(store_url) as holder:
        # a locked step of another worker deciding about this key: it holds the key's lock
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (f"job:{job.id}",))
        assert fair_claim(sql, t0, name) == []
        holder.rollback()
    (row,) = fair_claim(sql, t0, name)
    assert (row["job_id"], row["state"], row["deferred"]) == (job.id, "running", 0)


async def test_a_one_shot_with_another_unfinished_run_is_left_to_the_locked_step(
    store: Store, sql: psycopg.Connection[Any], t0: datetime
) -> None:
    (job,) = await one_shots(store, t0, 1)
    manual, _ = await store.run_trigger(RunTriggerParams(job=ref(job), now=t0))
    # two runs of one key due: neither is claimed by the fair claim (the locked step judges)
    assert fair_claim(sql, t0) == []
    (first,) = await claim(store, t0)
    await claim(store, t0)  # the other waits (manual) or is skipped (a run of the busy key)
    runs = await list_runs(store, job_id=job.id)
    assert len(runs) == 2
    assert manual.id in {r.id for r in runs}
    waiting = {r.state for r in runs if r.id != first.run.id}
    assert waiting <= {RunState.SCHEDULED, RunState.SKIPPED}
    assert [r.id for r in runs if r.state is RunState.RUNNING] == [first.run.id]


async def test_a_run_due_while_its_jobs_run_runs_is_skipped(
    store: Store, sql: psycopg.Connection[Any], t0: datetime
) -> None:
    (job,) = await one_shots(store, t0, 1)
    manual, _ = await store.run_trigger(RunTriggerParams(job=ref(job), now=t0 - s(1)))
    (running,) = await claim(store, t0 - s(1))
    assert running.run.id == manual.id
    # the scheduled run is now alone among the scheduled ones, but its job has a run running
    assert fair_claim(sql, t0) == []
    assert await claim(store, t0) == []
    (scheduled,) = [r for r in await list_runs(store, job_id=job.id) if r.id != manual.id]
    assert (scheduled.state, scheduled.reason) == (RunState.SKIPPED, "overlap")
