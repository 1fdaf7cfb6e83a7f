"""On PostgreSQL's own clock, a child step's run is stamped after each parent run's end, even
when the completion that creates it took its instant before another parent's completion and
then waited for the instance's lock behind it (the chaos verdict reads the order of steps
from these stamps: chaos/checks.py, "step runs created before their parents allowed them")."""

from __future__ import annotations

import asyncio
from datetime import datetime

import psycopg
import pytest

from duetime import RunContext
from duetime._types import AttemptOutcome, RunState
from duetime.store import create_store
from duetime.store.base import ClaimedRun, RunCompletion, RunsClaimParams, RunsCompleteParams
from duetime.testing import FrozenApp, FrozenClock, drain
from duetime.workflows.definition import Workflow

pytestmark = pytest.mark.postgres


def finished(claimed: ClaimedRun) -> RunsCompleteParams:
    run = claimed.run
    assert run.claimed_at is not None
    done = RunCompletion(
        run_id=run.id,
        token=run.token,
        worker_id="w",
        attempt=run.attempt,
        claimed_at=run.claimed_at,
        started_at=run.started_at,
        outcome=AttemptOutcome.SUCCEEDED,
        next_state=RunState.SUCCEEDED,
        workflow="step",
    )
    return RunsCompleteParams([done], tenant=run.tenant)  # now: the database's clock


async def blocked_by(conn: psycopg.AsyncConnection, holder: psycopg.AsyncConnection) -> None:
    """Until a session waits for a lock ``holder`` holds (the completion held up by our row
    lock); polled, as PostgreSQL does not announce it."""
    query = "SELECT count(*) FROM pg_locks WHERE NOT granted AND %s = ANY(pg_blocking_pids(pid))"
    for _ in range(1000):
        row = await (await conn.execute(query, [holder.info.backend_pid])).fetchone()
        if row and row[0]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the completion never waited for the row lock")


async def test_a_child_is_stamped_after_a_parent_that_ended_while_it_waited(
    pg_url: str, clock: FrozenClock
) -> None:
    async with FrozenApp(pg_url, clock=clock) as app:

        @app.task("t")
        async def t(ctx: RunContext) -> None:
            return None

        flow = Workflow("join")
        a = flow.step("a", task="t")
        b = flow.step("b", task="t")
        flow.step("c", task="t", after=[a, b])
        await app.workflows.register(flow)
        await app.schedule("j", target={"type": "workflow", "name": "join"}, now=True)
        app.registry._tasks.pop("t")  # drain runs the start run only
        await drain(app)
        [instance] = await app.workflows.instances()

    store = create_store(pg_url, clock=None)  # the database's clock, as in production
    await store.open()
    try:
        claimed = await store.runs_claim(
            RunsClaimParams(
                worker_id="w", tasks=("t",), limit=10, lease_ttl=60, lookahead=0, now=clock.now()
            )
        )
        by_step = {}
        for c in claimed:
            key = c.run.idempotency_key or ""
            by_step[key.rsplit(":", 2)[-2]] = c
        assert sorted(by_step) == ["a", "b"]
        async with (
            await psycopg.AsyncConnection.connect(pg_url) as holder,
            await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as watcher,
        ):
            await holder.execute(
                "SELECT 1 FROM runs WHERE id = %s FOR UPDATE", [by_step["b"].run.id]
            )
            # b's completion takes its instant, then waits for b's row
            b_done = asyncio.create_task(store.runs_complete(finished(by_step["b"])))
            await blocked_by(watcher, holder)
            # a's completion comes later, ends first, and plans nothing (b still runs)
            assert await store.runs_complete(finished(by_step["a"])) == [True]
            await holder.commit()  # b's completion goes on: it ends b and creates c
            assert await b_done == [True]
        steps = {s.step: s for s in await store.workflow_steps_list(instance.tenant, instance.id)}
        c_run = steps["c"].run_id
        assert c_run is not None, "b's completion started c"
        ids = {"a": by_step["a"].run.id, "b": by_step["b"].run.id, "c": c_run}
        runs = {name: await store.run_get(instance.tenant, id_) for name, id_ in ids.items()}
    finally:
        await store.close()
    a_end, b_end = runs["a"].finished_at, runs["b"].finished_at
    assert isinstance(a_end, datetime)
    assert isinstance(b_end, datetime)
    assert b_end < a_end  # b's completion took its instant first
    assert runs["c"].created_at >= a_end
    assert runs["c"].created_at >= b_end
