"""Review of issue 18's engine on PostgreSQL (reviewer's findings): the lock order between a
step run's completion (the run's row, then the instance's) and the paths that lock an
instance's runs (an operator's cancel; the sweep cancelling a cancelled job's instances).
Tests of open defects are marked xfail(strict) until fixed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from duetime._types import AttemptOutcome, RunState
from duetime.store.base import RunCompletion, RunsCompleteParams
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState


async def _waiting(conn: Any, n: int) -> None:
    """Until ``n`` lock requests are waiting (pg_locks is read live, not per transaction)."""
    for _ in range(2000):
        cur = await conn.execute("SELECT count(*) AS n FROM pg_locks WHERE NOT granted")
        row = await cur.fetchone()
        if (row["n"] if isinstance(row, dict) else row[0]) >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{n} lock waits never showed")


async def test_a_cancel_racing_a_step_completion_does_not_deadlock(
    app: FrozenApp, store_url: str
) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("row locks: PostgreSQL only")
    flow = Workflow("race")
    a = flow.step("a", task="slow")
    flow.step("b", task="slow", after=a)
    await app.workflows.register(flow, allow_unregistered=True)
    await app.schedule("r", target={"type": "workflow", "name": "race"}, now=True)
    await drain(app)
    [instance] = await app.workflows.instances()
    [step_a] = [s for s in await app.workflows.steps(instance.id) if s.step == "a"]
    store: Any = app.store
    async with store._tx() as conn:  # a worker has claimed and started a's run
        cur = await conn.execute(
            "UPDATE runs SET state = 'running', token = token + 1, attempt = 1,"
            " lease_owner = 'w1', lease_expires_at = now() + interval '1 hour',"
            " started_at = now() WHERE id = %s RETURNING token",
            (step_a.run_id,),
        )
        row = await cur.fetchone()
        token = row["token"] if isinstance(row, dict) else row[0]
    now = app.clock.now()
    completion = RunCompletion(
        run_id=step_a.run_id, token=token, worker_id="w1", attempt=1, claimed_at=now,
        started_at=now, outcome=AttemptOutcome.SUCCEEDED, next_state=RunState.SUCCEEDED,
        result="1", workflow="step",
    )  # fmt: skip

    async with store._tx() as holder:  # hold the instance so both line up behind it
        await holder.execute(
            "SELECT 1 FROM workflow_instances WHERE id = %s FOR UPDATE", (instance.id,)
        )
        cancel = asyncio.create_task(app.workflows.cancel(instance.id))
        await _waiting(holder, 1)
        complete = asyncio.create_task(
            store.runs_complete(RunsCompleteParams(completions=[completion]))
        )
        await _waiting(holder, 2)  # the completion holds a's run and waits for the instance
    outcomes = await asyncio.gather(cancel, complete, return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert not errors, errors
    assert (await app.workflows.instance(instance.id)).state is InstanceState.CANCELLED


async def _claim(store: Any, run_id: Any) -> int:
    """``run_id`` as a worker has claimed and started it; its token."""
    async with store._tx() as conn:
        cur = await conn.execute(
            "UPDATE runs SET state = 'running', token = token + 1, attempt = 1,"
            " lease_owner = 'w1', lease_expires_at = now() + interval '1 hour',"
            " started_at = now() WHERE id = %s RETURNING token",
            (run_id,),
        )
        row = await cur.fetchone()
        return int(row["token"] if isinstance(row, dict) else row[0])


async def test_the_sweep_and_a_completion_batch_do_not_deadlock(
    app: FrozenApp, store_url: str
) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("row locks: PostgreSQL only")
    store: Any = app.store
    for name in ("wa", "wb"):
        flow = Workflow(name)
        flow.step("x", task="slow")
        flow.step("y", task="slow")
        await app.workflows.register(flow, allow_unregistered=True)
    ja = await app.schedule("ja", target={"type": "workflow", "name": "wa"}, every="1h")
    jb = await app.schedule("jb", target={"type": "workflow", "name": "wb"}, every="1h")
    await app.jobs.trigger(ja.id)
    await app.jobs.trigger(jb.id)
    await drain(app)
    a = (await app.workflows.instances(job=ja.id))[0]  # (an `every` job may also have fired)
    b = (await app.workflows.instances(job=jb.id))[0]
    runs_a = {s.step: s.run_id for s in await app.workflows.steps(a.id)}
    runs_b = {s.step: s.run_id for s in await app.workflows.steps(b.id)}
    await app.runs.cancel(runs_a["x"])  # an end the sweep plans: a is the sweep's
    token_ay = await _claim(store, runs_a["y"])
    token_bx = await _claim(store, runs_b["x"])
    await app.jobs.cancel(jb.id)  # b is the sweep's to cancel
    now = app.clock.now()
    completions = [
        RunCompletion(
            run_id=run, token=token, worker_id="w1", attempt=1, claimed_at=now,
            started_at=now, outcome=AttemptOutcome.SUCCEEDED, next_state=RunState.SUCCEEDED,
            workflow="step",
        )
        for run, token in ((runs_a["y"], token_ay), (runs_b["x"], token_bx))
    ]  # fmt: skip

    async with store._tx() as holder:  # hold a so the sweep, then the batch, line up behind
        await holder.execute("SELECT 1 FROM workflow_instances WHERE id = %s FOR UPDATE", (a.id,))
        sweep = asyncio.create_task(store.workflows_sweep())
        await _waiting(holder, 1)
        complete = asyncio.create_task(store.runs_complete(RunsCompleteParams(completions)))
        await _waiting(holder, 2)  # the batch holds both runs and waits for a
    outcomes = await asyncio.gather(sweep, complete, return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert not errors, errors


async def test_a_completion_batch_of_large_results_is_written(
    app: FrozenApp, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("jsonb's size limit: PostgreSQL only")
    from duetime.store.postgres import store as pg_store

    # jsonb holds at most 256 MiB: a batch's results go in statements of at most a chunk
    # (64 MiB; 1 MiB here, so the test need not send a quarter of a gigabyte)
    monkeypatch.setattr(pg_store, "RESULT_CHUNK_BYTES", 1024 * 1024)
    store: Any = app.store
    job = await app.schedule("big", task="big", every="1d", allow_unregistered=True)
    runs = [(await app.jobs.trigger_run(job.id, idempotency_key=f"k{i}"))[0].id for i in range(12)]
    tokens = {run: await _claim(store, run) for run in runs}
    now = app.clock.now()
    result = '"' + "x" * (300 * 1024 - 16) + '"'  # within the limit
    completions = [
        RunCompletion(
            run_id=run, token=tokens[run], worker_id="w1", attempt=1, claimed_at=now,
            started_at=now, outcome=AttemptOutcome.SUCCEEDED, next_state=RunState.SUCCEEDED,
            result=result,
        )
        for run in runs
    ]  # fmt: skip
    assert pg_store.result_chunks(completions) != [completions]  # several statements
    applied = await store.runs_complete(RunsCompleteParams(completions))
    assert all(applied)
    for run in runs:
        assert (await app.runs.get(run)).result == "x" * (300 * 1024 - 16)
