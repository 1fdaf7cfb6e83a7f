"""The claim returns its runs as rows of ``_rows.CLAIMED_COLUMNS``, decoded by position: each
claim statement (the fair claim, the locked step's ``runs_claim_ids``) must return exactly
those columns in that order. A run with a value in (nearly) every column is claimed and
compared with the same run read back by name (``run_get_claimed``), so a column out of place
shows as a field that differs."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from storekit import TENANT, claim_one, complete, failed_attempt, job_params, ref, s, upsert

from duetime import _json
from duetime._types import OverlapPolicy, RetryPolicy
from duetime.store import Store
from duetime.store.base import (
    ClaimedRun,
    RunCheckpointParams,
    RunProgressParams,
    RunTriggerParams,
)

RETRY = RetryPolicy(
    max_attempts=4,
    backoff_base=0.5,
    backoff_factor=3.0,
    backoff_cap=9.0,
    within=3600.0,
    permanent_on=("ValueError",),
)


async def _second_attempt(store: Store, t0: datetime, *, overlap: OverlapPolicy) -> ClaimedRun:
    """A manual run (idempotency key, own payload and priority) of a job with a target, a
    timeout and retry rules, whose first attempt reported progress and a checkpoint and then
    failed: claimed again for its second attempt."""
    params = dataclasses.replace(
        job_params("rich", next_fire_at=None, retry=RETRY, timeout=7.5, overlap_policy=overlap),
        target={"type": "http", "url": "https://example.com/hook"},
    )
    job, _ = await upsert(store, params)
    run, created = await store.run_trigger(
        RunTriggerParams(
            job=ref(job),
            payload=_json.dumps({"n": 1}),
            priority=3,
            idempotency_key="key-1",
            request_hash="hash-1",
            now=t0,
        )
    )
    assert created
    first = await claim_one(store, t0)
    assert first.run.id == run.id
    token = first.run.token
    assert await store.run_progress_set(RunProgressParams(run.id, token, 0.25, "a quarter"))
    assert await store.run_checkpoint_set(RunCheckpointParams(run.id, token, '{"page": 2}'))
    failed = failed_attempt(first, t0 + s(1), "OSError", "disk on fire", reason="failed")
    assert await complete(store, t0 + s(0.5), failed) == [True]
    return await claim_one(store, t0 + s(2))


async def _check(store: Store, claimed: ClaimedRun) -> None:
    read = await store.run_get_claimed(TENANT, claimed.run.id)
    for field in dataclasses.fields(claimed.run):
        name = field.name
        assert getattr(claimed.run, name) == getattr(read.run, name), name
    assert claimed == read
    run = claimed.run
    assert (run.attempt, run.priority, run.idempotency_key) == (2, 3, "key-1")
    assert run.payload == {"n": 1}
    assert run.target == {"type": "http", "url": "https://example.com/hook"}
    assert run.checkpoint == {"page": 2}
    assert run.last_error_class == "OSError"
    assert claimed.timeout == 7.5
    assert claimed.retry == RETRY


async def test_the_fair_claim_returns_the_run_as_it_reads_back(store: Store, t0: datetime) -> None:
    claimed = await _second_attempt(store, t0, overlap=OverlapPolicy.ALLOW)
    await _check(store, claimed)


async def test_the_locked_step_returns_the_run_as_it_reads_back(store: Store, t0: datetime) -> None:
    # an overlap key: claimed by the locked step (runs_claim_ids), not the fair claim
    claimed = await _second_attempt(store, t0, overlap=OverlapPolicy.SKIP)
    await _check(store, claimed)
