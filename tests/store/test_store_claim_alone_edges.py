"""The one-statement claim of a one-shot's keyed run (decision 0038, ``duetime_key_alone``) at
its edges: a run written before migration 027 (no partition key) beside a newer run of its
job, a run asked to stop by a ``replace`` and then replayed, a second run inserted while the
claim reads, the function's own read (a fresh snapshot, not the claim statement's) and a
limited tenant. PostgreSQL only."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from storekit import (
    TENANT,
    claim,
    complete,
    completion,
    get_run,
    list_runs,
    ref,
    s,
)
from test_store_claim_alone import QUERIES, fair_claim, one_shots

from duetime._types import (
    AttemptOutcome,
    OverlapPolicy,
    RetryPolicy,
    RunState,
)
from duetime.store import Store
from duetime.store.base import RunReplayParams, RunTriggerParams, TenantLimitsSetParams

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


@pytest.fixture
def sql(store_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(store_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def running_of(runs: list[Any]) -> list[Any]:
    return [r.id for r in runs if r.state is RunState.RUNNING]


async def test_a_run_without_partition_key_sees_its_jobs_newer_running_run(
    store: Store, sql: psycopg.Connection[Any], t0: datetime
) -> None:
    (job,) = await one_shots(store, t0, 1)
    (old,) = await list_runs(store, job_id=job.id)
    # the one-shot's run was written before migration 027 (every run of an upgraded database)
    sql.execute("UPDATE runs SET partition_key = NULL WHERE id = %s", (old.id,))
    manual, _ = await store.run_trigger(RunTriggerParams(job=ref(job), now=t0 - s(1)))
    (running,) = await claim(store, t0 - s(1))
    assert running.run.id == manual.id
    # due while the manual run (written since, with its partition key) runs: skipped, as the
    # locked step judges it — not claimed beside it
    assert fair_claim(sql, t0) == []
    assert await claim(store, t0) == []
    assert running_of(await list_runs(store, job_id=job.id)) == [manual.id]
    assert (await get_run(store, old.id)).state is RunState.SKIPPED


async def test_a_replaced_run_replayed_is_claimed_with_no_stop_request(
    store: Store, t0: datetime
) -> None:
    (job,) = await one_shots(
        store, t0, 1, overlap_policy=OverlapPolicy.REPLACE, retry=RetryPolicy(max_attempts=1)
    )
    (first,) = await claim(store, t0)
    manual, _ = await store.run_trigger(RunTriggerParams(job=ref(job), now=t0 + s(1)))
    assert await claim(store, t0 + s(1)) == []  # the running run is asked to stop
    # it failed instead of stopping, its last attempt: dead, still marked asked to stop
    dead = completion(first, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await complete(store, t0 + s(2), dead) == [True]
    (successor,) = await claim(store, t0 + s(3))
    assert successor.run.id == manual.id
    assert await complete(store, t0 + s(4), completion(successor)) == [True]
    replay = RunReplayParams(tenant=TENANT, run_ids=[first.run.id], now=t0 + s(5))
    assert await store.runs_replay(replay) == [first.run.id]

    (again,) = await claim(store, t0 + s(5))  # its job's only unfinished run now
    assert again.run.id == first.run.id
    assert again.run.cancel_requested is False
    assert await store.runs_stop_requested([(again.run.id, again.run.token)]) == {}


@pytest.mark.parametrize("policy", [OverlapPolicy.SKIP, OverlapPolicy.SERIALIZE])
async def test_a_run_inserted_while_the_claim_reads_is_judged_after_it(
    store: Store, sql: psycopg.Connection[Any], store_url: str, t0: datetime, policy: Any
) -> None:
    (job,) = await one_shots(store, t0, 1, overlap_policy=policy)
    (first,) = await list_runs(store, job_id=job.id)
    with psycopg.connect(store_url) as other:
        # a second run of the job, inserted and not committed while the claim reads
        other.execute(
            "INSERT INTO runs SELECT (jsonb_populate_record(r, jsonb_build_object("
            "'id', gen_random_uuid(), 'idempotency_key', 'second',"
            "'scheduled_for', r.scheduled_for + interval '1 second'))).* "
            "FROM runs r WHERE r.id = %s",
            (first.id,),
        )
        (claimed,) = fair_claim(sql, t0)
        assert claimed["id"] == first.id
        other.commit()
    assert await claim(store, t0) == []  # the second waits (serialize) or is skipped (skip)
    assert running_of(await list_runs(store, job_id=job.id)) == [first.id]


async def test_the_functions_read_sees_what_committed_after_the_statement_began(
    store: Store, store_url: str, t0: datetime
) -> None:
    (job,) = await one_shots(store, t0, 1)
    (first,) = await list_runs(store, job_id=job.id)
    args = (job.id, first.id, job.id, first.id, f"job:{job.id}")
    with psycopg.connect(store_url) as asking, psycopg.connect(store_url) as other:
        # one statement, its snapshot taken at DECLARE, evaluated a row per FETCH: the count
        # reads with the statement's snapshot, the function with its own
        asking.execute(
            "DECLARE q NO SCROLL CURSOR FOR "
            "SELECT (SELECT count(*) FROM runs WHERE job_id = %s) AS seen, duetime_key_alone("
            "%s, %s, (SELECT partition_key FROM runs WHERE id = %s), %s) AS alone "
            "FROM generate_series(1, 2)",
            args,
        )
        assert asking.execute("FETCH 1 FROM q").fetchall() == [(1, True)]
        other.execute(
            "INSERT INTO runs SELECT (jsonb_populate_record(r, jsonb_build_object("
            "'id', gen_random_uuid(), 'idempotency_key', 'second'))).* "
            "FROM runs r WHERE r.id = %s",
            (first.id,),
        )
        other.commit()  # a second run of the job, committed after the statement began
        assert asking.execute("FETCH 1 FROM q").fetchall() == [(1, False)]


async def test_the_locked_steps_own_key_lock_defers_the_run(
    store: Store, sql: psycopg.Connection[Any], store_url: str, t0: datetime
) -> None:
    (job,) = await one_shots(store, t0, 1)
    with psycopg.connect(store_url) as holder:
        # the statement the locked step (and runs_start) takes a key's lock with
        holder.execute(QUERIES["overlap_keys_lock"], {"keys": [f"job:{job.id}"]})
        assert fair_claim(sql, t0) == []
        holder.rollback()
    (row,) = fair_claim(sql, t0)
    assert row["job_id"] == job.id


async def test_a_limited_tenants_one_shots_keep_to_its_quota(
    store: Store, sql: psycopg.Connection[Any], t0: datetime
) -> None:
    await store.tenant_limits_set(TenantLimitsSetParams(tenant=TENANT, max_in_flight=1))
    await one_shots(store, t0, 3)
    assert fair_claim(sql, t0) == []  # all three left to the locked step
    assert len(await claim(store, t0)) == 1
