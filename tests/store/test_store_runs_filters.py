"""The runs list filtered by task and scheduled instant (issue 17, the dashboard's runs page),
with the keyset cursor still walking every match once; and the worker of each run's latest
attempt (``runs_last_workers``) — on both stores."""

from __future__ import annotations

from datetime import datetime

from storekit import (
    OTHER_TENANT,
    TENANT,
    complete,
    completion,
    running_run,
    s,
    scheduled_run,
)

from duetime._types import Run
from duetime.store import Store
from duetime.store.base import RunListParams


async def _walk(store: Store, **filters: object) -> list[Run]:
    """Every matching run, one per page (the cursor carries across the filters)."""
    runs: list[Run] = []
    before = None
    while True:
        page = await store.runs_list(
            RunListParams(tenant=TENANT, limit=1, before=before, **filters)  # type: ignore[arg-type]
        )
        runs.extend(page.items)
        if page.next_cursor is None:
            return runs
        before = RunListParams.before_cursor(page.next_cursor)


async def test_runs_filter_by_task_and_scheduled_instant_page_by_page(
    store: Store, t0: datetime
) -> None:
    made = {}
    for i, task in enumerate(["etl.a", "etl.b", "etl.a", "etl.a", "etl.b"]):
        made[i] = await scheduled_run(store, t0 + s(60 * i), f"job-{i}", task=task)
    await scheduled_run(store, t0 + s(60), "other-tenant", task="etl.a", tenant=OTHER_TENANT)

    def ids(runs: list[Run]) -> list[int]:
        return [next(i for i, r in made.items() if r.id == run.id) for run in runs]

    assert ids(await _walk(store, task="etl.a")) == [3, 2, 0]
    assert ids(await _walk(store, since=t0 + s(60), until=t0 + s(240))) == [3, 2, 1]
    assert ids(await _walk(store, task="etl.a", since=t0 + s(60))) == [3, 2]
    assert ids(await _walk(store, until=t0 + s(60))) == [0]
    assert await _walk(store, task="etl.none") == []


async def test_the_worker_of_each_runs_latest_attempt(store: Store, t0: datetime) -> None:
    done = await running_run(store, t0, "done", worker="worker-a")
    assert await complete(store, t0 + s(1), completion(done)) == [True]
    busy = await running_run(store, t0 + s(2), "busy", worker="worker-b")
    waiting = await scheduled_run(store, t0 + s(3600), "waiting")
    ids = [done.run.id, busy.run.id, waiting.id]
    # attempts are recorded as they end: a running run's worker is its lease owner
    assert await store.runs_last_workers(TENANT, ids) == {done.run.id: "worker-a"}
    assert busy.run.lease_owner == "worker-b"
    assert await store.runs_last_workers(OTHER_TENANT, ids) == {}
    assert await store.runs_last_workers(TENANT, []) == {}
