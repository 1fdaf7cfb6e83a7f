"""Reading runs back: run_get, runs_list (filters, keyset pagination), attempts_list."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from storekit import (
    LEASE,
    OTHER_TENANT,
    TENANT,
    claim_one,
    complete,
    completion,
    fill_planner,
    list_runs,
    make_job,
    materialize,
    ref,
    running_run,
    s,
)

from duetime._types import AttemptOutcome, Run, RunState
from duetime.errors import NotFound
from duetime.store import Store
from duetime.store.base import LeasesReapParams, RunListParams, RunTriggerParams


async def test_run_get_is_tenant_scoped(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    assert (await store.run_get(TENANT, claimed.run.id)).id == claimed.run.id
    with pytest.raises(NotFound):
        await store.run_get(OTHER_TENANT, claimed.run.id)
    with pytest.raises(NotFound):
        await store.run_get(TENANT, uuid.uuid4())


async def _fixture_runs(store: Store, t0: datetime) -> dict[str, list[Run]]:
    a = await make_job(store, "a", next_fire_at=t0)
    b = await make_job(store, "b", next_fire_at=t0 + s(0.5))
    # (x ranks below a: a fair claim could otherwise take x@t0, tied with a@t0)
    await make_job(store, "x", next_fire_at=t0, tenant=OTHER_TENANT, priority=-1)
    await materialize(store, t0, planner=fill_planner(1), horizon=4)  # a: 5, b: 4, x: 5
    # manual runs tie on scheduled_for with each other and with a scheduled run
    for _ in range(4):
        await store.run_trigger(RunTriggerParams(ref(a), now=t0 + s(2)))
    claimed = await claim_one(store, t0, limit=1)  # a@t0 becomes running
    assert claimed.run.job_id == a.id
    runs = await list_runs(store)
    return {
        "all": runs,
        "a": [r for r in runs if r.job_id == a.id],
        "b": [r for r in runs if r.job_id == b.id],
    }


def _newest_first(runs: list[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.scheduled_for, r.id), reverse=True)


async def test_runs_list_filters(store: Store, t0: datetime) -> None:
    runs = await _fixture_runs(store, t0)
    assert len(runs["all"]) == 5 + 4 + 4
    assert len(runs["a"]) == 9
    assert len(runs["b"]) == 4
    assert all(r.tenant == TENANT for r in runs["all"])
    job_a = runs["a"][0].job_id

    running = await list_runs(store, state=RunState.RUNNING)
    assert [(r.job_id, r.scheduled_for) for r in running] == [(job_a, t0)]
    scheduled_a = await list_runs(store, job_id=job_a, state=RunState.SCHEDULED)
    assert len(scheduled_a) == 8
    assert await list_runs(store, state=RunState.DEAD) == []
    assert len(await list_runs(store, tenant=OTHER_TENANT)) == 5
    assert await list_runs(store, tenant=OTHER_TENANT, job_id=job_a) == []


async def test_runs_list_is_newest_first(store: Store, t0: datetime) -> None:
    runs = await _fixture_runs(store, t0)
    assert runs["all"] == _newest_first(runs["all"])


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 13, 50])
async def test_runs_list_keyset_pagination(store: Store, t0: datetime, limit: int) -> None:
    runs = await _fixture_runs(store, t0)
    expected = [r.id for r in _newest_first(runs["all"])]

    seen: list[uuid.UUID] = []
    before = None
    for _ in range(len(expected) + 2):
        page = await store.runs_list(RunListParams(tenant=TENANT, limit=limit, before=before))
        assert len(page.items) <= limit
        seen.extend(r.id for r in page.items)
        if page.next_cursor is None:
            break
        assert len(page.items) == limit
        last = page.items[-1]
        before = (last.scheduled_for, last.id)
    else:
        pytest.fail("pagination never ended")
    assert seen == expected  # no duplicates, no gaps, even across equal scheduled_for


async def test_runs_list_pagination_with_a_filter(store: Store, t0: datetime) -> None:
    runs = await _fixture_runs(store, t0)
    job_a = runs["a"][0].job_id
    seen: list[uuid.UUID] = []
    before = None
    while True:
        page = await store.runs_list(
            RunListParams(
                tenant=TENANT, job_id=job_a, state=RunState.SCHEDULED, limit=3, before=before
            )
        )
        seen.extend(r.id for r in page.items)
        if page.next_cursor is None:
            break
        before = (page.items[-1].scheduled_for, page.items[-1].id)
    expected = [r.id for r in _newest_first(runs["a"]) if r.state is RunState.SCHEDULED]
    assert seen == expected


async def test_attempts_list_in_attempt_order(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", worker="w1")
    run_id = claimed.run.id
    at = t0
    for n, worker in enumerate(("w2", "w3"), start=1):
        at = at + s(LEASE + 1)
        assert (await store.leases_reap(LeasesReapParams(now=at))).rescheduled == 1
        claimed = await claim_one(store, at, worker=worker)
        assert claimed.run.attempt == n + 1
    assert await complete(store, at + s(1), completion(claimed)) == [True]

    attempts = await store.attempts_list(TENANT, run_id)
    assert [(a.number, a.worker_id, a.outcome) for a in attempts] == [
        (1, "w1", AttemptOutcome.LOST),
        (2, "w2", AttemptOutcome.LOST),
        (3, "w3", AttemptOutcome.SUCCEEDED),
    ]
    assert [a.token for a in attempts] == sorted({a.token for a in attempts})
    assert all(a.run_id == run_id and a.tenant == TENANT for a in attempts)


async def test_attempts_are_tenant_scoped(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    assert await complete(store, t0 + s(1), completion(claimed)) == [True]
    assert len(await store.attempts_list(TENANT, claimed.run.id)) == 1
    # another tenant (or an unknown id) sees no attempts: an empty list, or NotFound
    assert await _attempts_or_none(store, OTHER_TENANT, claimed.run.id) == []
    assert await _attempts_or_none(store, TENANT, uuid.uuid4()) == []


async def _attempts_or_none(store: Store, tenant: str, run_id: uuid.UUID) -> list:
    try:
        return await store.attempts_list(tenant, run_id)
    except NotFound:
        return []
