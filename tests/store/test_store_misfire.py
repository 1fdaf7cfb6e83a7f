"""Misfire judged by the scheduler (occurrences it never materialized, e.g. all schedulers down)
with the real planner — both stores."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest
from storekit import job_params, list_runs, materialize, s, upsert

from duetime._types import Job, MisfirePolicy, RunState
from duetime.scheduler.planner import BACKFILL_RATE, plan_job
from duetime.store import Store


async def every_second_job(store: Store, t0: datetime, policy: MisfirePolicy) -> Job:
    job, _ = await upsert(
        store,
        replace(
            job_params("j", next_fire_at=t0, misfire_policy=policy, misfire_grace=10),
            max_backfill=5,
        ),
    )
    return job


@pytest.mark.parametrize(
    ("policy", "missed_runs"),
    [(MisfirePolicy.SKIP, 0), (MisfirePolicy.FIRE_ONCE, 1), (MisfirePolicy.BACKFILL, 5)],
)
async def test_a_scheduler_outage_is_judged_by_the_misfire_policy(
    store: Store, t0: datetime, policy: MisfirePolicy, missed_runs: int
) -> None:
    job = await every_second_job(store, t0, policy)
    now = t0 + s(100)  # down for 100 s: occurrences t0 .. t0+89 are older than the 10 s grace
    await materialize(store, now, planner=plan_job, horizon=0)
    runs = sorted(await list_runs(store, job_id=job.id), key=lambda r: r.scheduled_for)
    within_grace = [t0 + s(i) for i in range(90, 101)]
    missed = [r for r in runs if r.scheduled_for < t0 + s(90)]
    assert [r.scheduled_for for r in runs if r.scheduled_for >= t0 + s(90)] == within_grace
    assert [r.scheduled_for for r in missed] == [t0 + s(89 - i) for i in range(missed_runs)][::-1]
    assert all(r.state is RunState.SCHEDULED for r in runs)
    if policy is MisfirePolicy.BACKFILL:
        assert [r.available_at for r in missed] == [
            now + s(i / BACKFILL_RATE) for i in range(missed_runs)
        ]
    (skip,) = await store.skips_list(job.tenant, job.id)
    assert (skip.first, skip.count, skip.reason) == (t0, 90 - missed_runs, f"misfire_{policy}")
    assert skip.last == t0 + s(89 - missed_runs)
    # every occurrence up to now is accounted for: a run or a recorded skip
    assert len(runs) + skip.count == 101
