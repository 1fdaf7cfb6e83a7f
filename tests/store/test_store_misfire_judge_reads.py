"""The misfire judge reads only runs it could act on (issue 15's midnight burst).

A ``fire_once`` run is skipped only for a later occurrence of its job, which a one-shot job
never has: such a run carries no misfire deadline, so the judge's index (runs_misfire_due)
holds none of them. With 79,500 of them past their grace, one judge call walked them all (1.7
s). The test counts the index entries runs_misfire reads (EXPLAIN (ANALYZE, BUFFERS)), not a
duration: none for fire_once one-shots, whether their deadline was written when the run was
made or when the job's policy changed; one per `skip` one-shot, which the judge does skip."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from storekit import fill_planner, job_params, make_job, materialize, s, upsert

from duetime._types import MisfirePolicy, Schedule, ScheduleKind
from duetime.scheduler.planner import plan_job
from duetime.store import Store
from duetime.store.sqlfile import load_queries

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.parametrize("store_url", ["postgres"], indirect=True),
]

QUERIES = load_queries("postgres")
SHOTS = 120
SKIPPED = 3
RUNS = 3_000


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


async def waiting(store: Store, t0: datetime) -> None:
    """RUNS scheduled runs that no judge may skip (``backfill``), waiting like the others: on
    a table where the runs waiting outnumber those the judge may act on, as in a real one,
    the judge walks its own index."""
    job = await make_job(
        store, "backfill", next_fire_at=t0 + s(10), misfire_policy=MisfirePolicy.BACKFILL
    )
    made = await materialize(store, t0, planner=fill_planner(), horizon=RUNS + 10.0)
    assert made.runs_created == RUNS + 1, job


def judge_reads(store_url: str, now: datetime) -> int:
    """The runs_misfire_due entries one judge call reads at ``now`` (rolled back), the
    statistics of runs up to date."""
    with psycopg.connect(store_url, row_factory=dict_row) as conn:
        conn.execute("ANALYZE runs")
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + QUERIES["runs_misfire"],  # type: ignore[operator]
            {"now": now, "limit": 1000},
        ).fetchone()
        conn.rollback()
    assert row is not None
    scans = [
        node
        for node in _nodes(row["QUERY PLAN"][0]["Plan"])
        if node.get("Index Name") == "runs_misfire_due"
    ]
    assert scans, "the judge did not walk its index"
    return sum(int(n["Actual Rows"]) + int(n.get("Rows Removed by Filter", 0)) for n in scans)


def shot(name: str, t0: datetime, policy: MisfirePolicy) -> dict[str, Any]:
    at = t0 + s(5)
    return {
        "name": name,
        "schedule": Schedule(kind=ScheduleKind.AT, at=at),
        "next_fire_at": at,
        "misfire_policy": policy,
    }


async def test_fire_once_one_shots_leave_the_judge_nothing_to_read(
    store: Store, store_url: str, t0: datetime
) -> None:
    await waiting(store, t0)
    for i in range(SHOTS):
        await make_job(store, **shot(f"once-{i}", t0, MisfirePolicy.FIRE_ONCE))
    for i in range(SKIPPED):
        await make_job(store, **shot(f"skip-{i}", t0, MisfirePolicy.SKIP))
    made = await materialize(store, t0, planner=plan_job, horizon=10.0, limit=1000)
    assert made.runs_created == SHOTS + SKIPPED
    # an hour later every run is past its grace; only the `skip` ones can be judged
    assert judge_reads(store_url, t0 + s(3600)) == SKIPPED


async def test_a_policy_changed_to_fire_once_leaves_no_deadline_either(
    store: Store, store_url: str, t0: datetime
) -> None:
    await waiting(store, t0)
    for i in range(SHOTS):
        await make_job(store, **shot(f"shot-{i}", t0, MisfirePolicy.SKIP))
    made = await materialize(store, t0, planner=plan_job, horizon=10.0, limit=1000)
    assert made.runs_created == SHOTS
    assert judge_reads(store_url, t0 + s(3600)) == SHOTS
    for i in range(SHOTS - SKIPPED):
        options = shot(f"shot-{i}", t0, MisfirePolicy.FIRE_ONCE)
        name = options.pop("name")
        await upsert(store, job_params(name, **options))
    assert judge_reads(store_url, t0 + s(3600)) == SKIPPED
