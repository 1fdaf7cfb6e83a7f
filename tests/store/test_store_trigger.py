"""run_trigger: manual runs, idempotency keys, paused and cancelled jobs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from datetime import datetime

import pytest
from storekit import (
    OTHER_TENANT,
    TENANT,
    claim,
    claim_one,
    complete,
    completion,
    get_run,
    job_params,
    list_runs,
    make_job,
    materialize,
    ref,
    s,
    upsert,
)

from duetime import _json
from duetime._types import JobStatus, OverlapPolicy, RunState, RunTrigger
from duetime.errors import Conflict, NotFound
from duetime.store import Store
from duetime.store._values import trigger_run_values
from duetime.store.base import JobRef, JobSetStatusParams, RunStartParams, RunTriggerParams


async def trigger(store: Store, job, now: datetime, **kwargs):
    return await store.run_trigger(RunTriggerParams(ref(job), now=now, **kwargs))


async def test_trigger_creates_a_manual_run_available_now(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0 + s(3600), payload={"a": 1}, priority=2)
    now = t0 + s(5)
    run, created = await trigger(store, job, now)

    assert created is True
    assert run.job_id == job.id
    assert (run.tenant, run.job_name, run.task, run.queue) == (
        TENANT,
        "j",
        job.task,
        job.queue,
    )
    assert run.trigger is RunTrigger.MANUAL
    assert run.state is RunState.SCHEDULED
    assert run.scheduled_for == now
    assert run.available_at == now
    assert run.payload == {"a": 1}
    assert run.priority == 2
    assert run.attempt == 0
    assert run.max_attempts == job.retry.max_attempts
    assert await get_run(store, run.id) == run
    claimed = await claim_one(store, now)
    assert claimed.run.id == run.id
    assert claimed.run.started_at == now
    assert claimed.one_shot is False


async def test_trigger_overrides_payload_and_priority(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=None, payload={"a": 1}, priority=2)
    run, _ = await trigger(store, job, t0, payload=_json.dumps({"b": [2]}), priority=-3)
    assert run.payload == {"b": [2]}
    assert run.priority == -3
    stored = await get_run(store, run.id)
    assert (stored.payload, stored.priority) == ({"b": [2]}, -3)


async def test_trigger_by_name(store: Store, t0: datetime) -> None:
    job = await make_job(store, "by-name", next_fire_at=None)
    run, created = await store.run_trigger(RunTriggerParams(JobRef(TENANT, name="by-name"), now=t0))
    assert created
    assert run.job_id == job.id


async def test_triggers_without_a_key_are_distinct_runs(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await materialize(store, t0)  # the scheduled occurrence at t0
    a, created_a = await trigger(store, job, t0)
    b, created_b = await trigger(store, job, t0)
    assert created_a
    assert created_b
    assert a.id != b.id
    runs = await list_runs(store, job_id=job.id)
    assert len(runs) == 3
    assert all(r.scheduled_for == t0 for r in runs)
    assert sorted(r.trigger for r in runs) == [
        RunTrigger.MANUAL,
        RunTrigger.MANUAL,
        RunTrigger.SCHEDULE,
    ]


async def test_idempotency_key_returns_the_first_run(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=None)
    first, created = await trigger(store, job, t0, idempotency_key="k1", request_hash="h")
    assert created
    assert first.idempotency_key == "k1"
    again, created_again = await trigger(
        store, job, t0 + s(30), idempotency_key="k1", request_hash="h"
    )
    assert created_again is False
    assert again.id == first.id
    assert again.scheduled_for == t0
    assert len(await list_runs(store, job_id=job.id)) == 1


async def test_idempotency_key_outlives_the_runs_end(store: Store, t0: datetime) -> None:
    """Keys live as long as their run: a finished run still answers for its key."""
    job = await make_job(store, "j", next_fire_at=None)
    first, _ = await trigger(store, job, t0, idempotency_key="k", request_hash="h")
    claimed = await claim_one(store, t0)
    assert await complete(store, t0 + s(1), completion(claimed)) == [True]
    again, created = await trigger(store, job, t0 + s(60), idempotency_key="k", request_hash="h")
    assert created is False
    assert again.id == first.id
    assert again.state is RunState.SUCCEEDED


@pytest.mark.parametrize(("first", "second"), [("h1", "h2"), ("h1", None), (None, "h2")])
async def test_same_key_with_another_request_conflicts(
    store: Store, t0: datetime, first: str | None, second: str | None
) -> None:
    job = await make_job(store, "j", next_fire_at=None)
    await trigger(store, job, t0, idempotency_key="k", request_hash=first)
    with pytest.raises(Conflict):
        await trigger(store, job, t0, idempotency_key="k", request_hash=second)
    assert len(await list_runs(store, job_id=job.id)) == 1


async def test_keys_are_per_job(store: Store, t0: datetime) -> None:
    a = await make_job(store, "a", next_fire_at=None)
    b = await make_job(store, "b", next_fire_at=None)
    run_a, created_a = await trigger(store, a, t0, idempotency_key="k", request_hash="h")
    run_b, created_b = await trigger(store, b, t0, idempotency_key="k", request_hash="other")
    assert created_a
    assert created_b
    assert run_a.id != run_b.id


async def test_concurrent_triggers_with_one_key_create_one_run(
    store: Store, make_store, t0: datetime
) -> None:
    other = await make_store()
    job = await make_job(store, "j", next_fire_at=None)
    results = await asyncio.gather(
        *[
            st.run_trigger(
                RunTriggerParams(ref(job), idempotency_key="once", request_hash="h", now=t0)
            )
            for _ in range(5)
            for st in (store, other)
        ]
    )
    assert sum(created for _, created in results) == 1
    assert len({run.id for run, _ in results}) == 1
    assert len(await list_runs(store, job_id=job.id)) == 1


async def test_a_paused_job_can_be_triggered(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0 + s(60))
    await store.job_set_status(JobSetStatusParams(ref(job), JobStatus.PAUSED, now=t0))
    run, created = await trigger(store, job, t0 + s(1))
    assert created
    assert run.state is RunState.SCHEDULED
    claimed = await claim_one(store, t0 + s(1))
    assert claimed.run.id == run.id
    assert claimed.run.started_at == t0 + s(1)


async def test_a_cancelled_job_cannot_be_triggered(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await store.job_set_status(JobSetStatusParams(ref(job), JobStatus.CANCELLED, now=t0))
    with pytest.raises(Conflict):
        await trigger(store, job, t0 + s(1))
    with pytest.raises(Conflict):
        await trigger(store, job, t0 + s(1), idempotency_key="k", request_hash="h")
    assert await list_runs(store, job_id=job.id) == []


async def test_trigger_of_an_unknown_or_foreign_job(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=None)
    with pytest.raises(NotFound):
        await store.run_trigger(RunTriggerParams(JobRef(OTHER_TENANT, id=job.id), now=t0))
    with pytest.raises(NotFound):
        await store.run_trigger(RunTriggerParams(JobRef(OTHER_TENANT, name="j"), now=t0))
    with pytest.raises(NotFound):
        await store.run_trigger(RunTriggerParams(JobRef(TENANT, id=uuid.uuid4()), now=t0))
    assert await list_runs(store, job_id=job.id) == []


async def test_no_manual_run_starts_after_its_job_is_cancelled(store: Store, t0: datetime) -> None:
    """Invariant 5: after a cancel commits no run of the job starts — the paused-job exception
    for manual triggers does not extend to a cancelled job."""
    job = await make_job(store, "j", next_fire_at=None)
    ahead, _ = await trigger(store, job, t0 + s(1))
    claimed_ahead = await claim_one(store, t0, lookahead=1)
    assert claimed_ahead.run.id == ahead.id
    assert claimed_ahead.run.started_at is None
    waiting, _ = await trigger(store, job, t0 + s(2))

    await store.job_set_status(JobSetStatusParams(ref(job), JobStatus.CANCELLED, now=t0 + s(0.5)))

    assert not await store.run_start(
        RunStartParams(ahead.id, claimed_ahead.run.token, now=t0 + s(1))
    )
    for c in await claim(store, t0 + s(2)):
        assert c.run.id != waiting.id or (
            c.run.started_at is None
            and not await store.run_start(RunStartParams(c.run.id, c.run.token, now=t0 + s(2)))
        ), "a manual run of a cancelled job was started"


@pytest.mark.parametrize(
    ("overlap", "max_concurrency", "concurrency_key"),
    [
        (OverlapPolicy.ALLOW, 0, None),
        (OverlapPolicy.ALLOW, 2, None),
        (OverlapPolicy.SKIP, 0, None),
        (OverlapPolicy.SERIALIZE, 1, "nightly-export"),
    ],
)
async def test_one_statement_trigger_writes_what_the_store_would_compute(
    store: Store,
    store_url: str,
    t0: datetime,
    overlap: OverlapPolicy,
    max_concurrency: int,
    concurrency_key: str | None,
) -> None:
    # the one-round-trip trigger computes the run's columns in SQL: they must be the ones
    # trigger_run_values / overlap_key compute from the job in Python
    params = dataclasses.replace(
        job_params("j", next_fire_at=None, overlap_policy=overlap, timeout=7.5),
        max_concurrency=max_concurrency,
        concurrency_key=concurrency_key,
        target={"type": "http", "url": "https://example.com/hook"},
    )
    job, _ = await upsert(store, params)
    run, created = await trigger(store, job, t0, payload=_json.dumps({"x": 1}), priority=3)

    expected = trigger_run_values(job, RunTriggerParams(ref(job), priority=3), t0)
    assert created is True
    assert raw_column(store_url, run.id, "concurrency_key") == expected["concurrency_key"]
    assert run.payload == {"x": 1}
    assert (run.priority, run.target) == (3, job.target)
    assert raw_column(store_url, run.id, "timeout_s") == 7.5
    assert run.max_attempts == expected["max_attempts"]
    assert raw_column(store_url, run.id, "backoff_cap") == expected["backoff_cap"]
    assert run.idempotency_key is None or run.idempotency_key.startswith("auto:")


def raw_column(store_url: str, run_id: uuid.UUID, column: str) -> object:
    """One column of a run read straight from the database (not every column is a Run field)."""
    query = f"SELECT {column} FROM runs WHERE id = ?"
    if store_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store_url) as conn:
            row = conn.execute(query.replace("?", "%s"), (run_id,)).fetchone()
    else:
        import sqlite3

        with contextlib.closing(sqlite3.connect(store_url)) as conn:
            row = conn.execute(query, (str(run_id),)).fetchone()
    assert row is not None
    return row[0]
