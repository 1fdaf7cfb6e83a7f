"""Bounded waiting for an overlap key (issue 16 item 4, decision 0016): ``buffer_one`` keeps
only the newest waiting run, ``max_waiting`` caps ``serialize`` — both stores, frozen clock."""

from __future__ import annotations

from datetime import datetime

import pytest
from storekit import (
    ClaimedRun,
    claim,
    complete,
    completion,
    job_with_runs,
    list_runs,
    ref,
    s,
)

from duetime._types import Job, OverlapPolicy, Run, RunState
from duetime.store import Store
from duetime.store.base import RunTriggerParams


async def runs_of(store: Store, job: Job) -> list[Run]:
    return sorted(await list_runs(store, job_id=job.id), key=lambda r: r.scheduled_for)


async def test_buffer_one_keeps_only_the_newest_waiting_run(store: Store, t0: datetime) -> None:
    job = await job_with_runs(store, t0, "j", 5, overlap_policy=OverlapPolicy.BUFFER_ONE)
    (first,) = await claim(store, t0)
    assert await claim(store, t0 + s(4.5)) == []
    runs = await runs_of(store, job)
    assert [(r.state, r.reason) for r in runs[1:]] == [
        (RunState.SKIPPED, "superseded"),
        (RunState.SKIPPED, "superseded"),
        (RunState.SKIPPED, "superseded"),
        (RunState.SCHEDULED, None),
    ]
    assert await complete(store, t0 + s(5), completion(first)) == [True]
    (newest,) = await claim(store, t0 + s(5))
    assert newest.run.scheduled_for == t0 + s(4)


async def test_buffer_one_catching_up_runs_the_newest(store: Store, t0: datetime) -> None:
    job = await job_with_runs(store, t0, "j", 3, overlap_policy=OverlapPolicy.BUFFER_ONE)
    (only,) = await claim(store, t0 + s(2.5))
    assert only.run.scheduled_for == t0 + s(2)
    assert [r.state for r in await runs_of(store, job)] == [
        RunState.SKIPPED,
        RunState.SKIPPED,
        RunState.RUNNING,
    ]


async def test_serialize_with_max_waiting_skips_the_newest_at_the_cap(
    store: Store, t0: datetime
) -> None:
    job = await job_with_runs(
        store, t0, "j", 6, overlap_policy=OverlapPolicy.SERIALIZE, max_waiting=2
    )
    (first,) = await claim(store, t0)
    assert await claim(store, t0 + s(5.5)) == []
    runs = await runs_of(store, job)
    assert [(r.state, r.reason) for r in runs[1:]] == [
        (RunState.SCHEDULED, None),
        (RunState.SCHEDULED, None),
        (RunState.SKIPPED, "queue_full"),
        (RunState.SKIPPED, "queue_full"),
        (RunState.SKIPPED, "queue_full"),
    ]
    assert await complete(store, t0 + s(6), completion(first)) == [True]
    (second,) = await claim(store, t0 + s(6))
    assert second.run.scheduled_for == t0 + s(1)  # in order


async def test_a_manual_trigger_is_never_dropped_for_the_cap(store: Store, t0: datetime) -> None:
    job = await job_with_runs(
        store, t0, "j", 3, overlap_policy=OverlapPolicy.SERIALIZE, max_waiting=1
    )
    await claim(store, t0)
    manual, _ = await store.run_trigger(RunTriggerParams(ref(job), now=t0))
    assert await claim(store, t0 + s(2.5)) == []
    assert next(r for r in await runs_of(store, job) if r.id == manual.id).state is (
        RunState.SCHEDULED
    )


@pytest.mark.parametrize(
    ("policy", "cap", "most"),
    [
        (OverlapPolicy.SERIALIZE, 0, None),  # the issue: grows without limit
        (OverlapPolicy.SERIALIZE, 2, 2),
        (OverlapPolicy.BUFFER_ONE, 0, 1),
    ],
)
async def test_a_1s_job_whose_handler_takes_2_5s(
    store: Store, t0: datetime, policy: OverlapPolicy, cap: int, most: int | None
) -> None:
    """The issue's scenario on a driven clock: a run due every second, each run ends 2.5 s
    after it started; the waiting runs are counted every half second for 20 s."""
    job = await job_with_runs(store, t0, "j", 21, overlap_policy=policy, max_waiting=cap)
    running: ClaimedRun | None = None
    started = t0
    peak = 0
    for step in range(41):
        now = t0 + s(step / 2)
        if running is not None and now - started >= s(2.5):
            assert await complete(store, now, completion(running)) == [True]
            running = None
        got = await claim(store, now)
        if got:
            (running,) = got
            started = now
        waiting = [
            r
            for r in await runs_of(store, job)
            if r.state is RunState.SCHEDULED and r.available_at <= now
        ]
        peak = max(peak, len(waiting))
        if most is not None:
            assert len(waiting) <= most, (now - t0, [r.scheduled_for - t0 for r in waiting])
    if most is None:
        assert peak >= 10  # before: ~0.6 more waiting every second
    else:
        assert peak == most


async def test_max_waiting_bounds_a_shared_concurrency_key(store: Store, t0: datetime) -> None:
    jobs = [
        await job_with_runs(
            store,
            t0,
            name,
            1,
            overlap_policy=OverlapPolicy.ALLOW,
            max_concurrency=1,
            concurrency_key="warehouse",
            max_waiting=1,
        )
        for name in ("a", "b", "c")
    ]
    assert len(await claim(store, t0)) == 1
    runs = [r for job in jobs for r in await runs_of(store, job)]
    assert sorted((r.state, r.reason or "") for r in runs) == [
        (RunState.RUNNING, ""),
        (RunState.SCHEDULED, ""),
        (RunState.SKIPPED, "queue_full"),
    ]
