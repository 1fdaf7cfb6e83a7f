"""Starting a run claimed ahead: fenced, refused on a lapsed lease, and renewing the lease —
one at a time (run_start) or in a batch (runs_start), with the same verdict for each run."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from storekit import (
    LEASE,
    TENANT,
    claim,
    claim_one,
    fill_planner,
    get_run,
    job_params,
    make_job,
    materialize,
    ref,
    s,
    scheduled_run,
    upsert,
)

from duetime._types import Job, JobStatus, OverlapPolicy, RunState
from duetime.store import Store
from duetime.store.base import (
    JobPlan,
    JobRef,
    JobSetStatusParams,
    RunsStartParams,
    RunStartParams,
    RunTriggerParams,
)


async def test_a_start_on_a_lapsed_lease_is_refused(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(1), "j")
    ahead = await claim_one(store, t0, lookahead=1)
    late = t0 + s(LEASE + 1)  # e.g. the database was down past the lease
    started = await store.run_start(
        RunStartParams(run_id=run.id, token=ahead.run.token, now=late, lease_ttl=LEASE)
    )
    assert started is False
    assert (await get_run(store, run.id)).started_at is None


async def test_a_start_renews_the_lease(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(1), "j")
    ahead = await claim_one(store, t0, lookahead=1)
    assert ahead.run.lease_expires_at == t0 + s(LEASE)
    assert await store.run_start(
        RunStartParams(run_id=run.id, token=ahead.run.token, now=t0 + s(1), lease_ttl=LEASE)
    )
    started = await get_run(store, run.id)
    assert started.started_at == t0 + s(1)
    assert started.lease_expires_at == t0 + s(1 + LEASE)


# --- runs_start: a batch, each run judged as run_start judges it alone ------------------------

OTHER_TASK = "reports.other"
"""The task of the run claimed with a short lease (claims pick runs by task)."""


async def _keyed_job(store: Store, t0: datetime, name: str, count: int) -> None:
    """A job under overlap ``skip`` (runs carry its overlap key) with ``count`` runs due at t0,
    t0+1 s, …"""
    params = replace(job_params(name, next_fire_at=t0), overlap_policy=OverlapPolicy.SKIP)
    job, _ = await upsert(store, params)

    def only(due: Job, now: datetime, until: datetime) -> JobPlan:
        plan = fill_planner(1)(due, now, until)
        return plan if due.id == job.id else replace(plan, runs=[], next_fire_at=None)

    await materialize(store, t0, planner=only, horizon=count - 1)


async def _cases(store: Store, t0: datetime, prefix: str) -> None:
    """One run of each case, due at t0+1 s (the keyed `busy` job also has one at t0)."""
    for case in ("ok", "wrong_token", "paused"):
        await scheduled_run(store, t0 + s(1), prefix + case)
    await scheduled_run(store, t0 + s(1), prefix + "lapsed", task=OTHER_TASK)
    manual = await make_job(store, prefix + "manual", next_fire_at=None)
    await store.run_trigger(RunTriggerParams(ref(manual), now=t0 + s(1)))
    await _keyed_job(store, t0, prefix + "busy", 2)  # its first run still runs at t0+1 s
    await _keyed_job(store, t0 + s(1), prefix + "keyed", 1)  # nothing else runs under its key


CASES = ("ok", "wrong_token", "lapsed", "paused", "manual", "busy", "keyed")
EXPECTED = {
    "ok": True,
    "wrong_token": False,
    "lapsed": False,
    "paused": False,
    "manual": True,  # a manual trigger of a paused job may start
    "busy": False,  # skipped: the previous run of its key still runs
    "keyed": True,
}


async def test_a_batch_start_judges_each_run_as_run_start_does(store: Store, t0: datetime) -> None:
    await _cases(store, t0, "batch-")
    await _cases(store, t0, "alone-")
    assert len(await claim(store, t0, limit=50)) == 2  # the `busy` jobs' first runs start
    ahead = await claim(store, t0, tasks=(OTHER_TASK,), lease_ttl=0.5, lookahead=1.5)
    ahead += await claim(store, t0, limit=50, lookahead=1.5)
    assert len(ahead) == 2 * len(CASES)
    for name in ("paused", "manual"):
        for prefix in ("batch-", "alone-"):
            # paused at the runs' instant: skipped (a pause before it would withdraw them)
            await store.job_set_status(
                JobSetStatusParams(
                    JobRef(TENANT, name=prefix + name), JobStatus.PAUSED, now=t0 + s(1)
                )
            )
    claimed = {c.run.job_name: c.run for c in ahead}

    def pair(prefix: str, case: str) -> tuple[uuid.UUID, int]:
        run = claimed[prefix + case]
        return run.id, run.token + 1 if case == "wrong_token" else run.token

    at = t0 + s(1)
    started = await store.runs_start(
        RunsStartParams([pair("batch-", c) for c in CASES], now=at, lease_ttl=LEASE)
    )
    alone = {
        c: await store.run_start(RunStartParams(*pair("alone-", c), now=at, lease_ttl=LEASE))
        for c in CASES
    }
    assert {c: claimed["batch-" + c].id in started for c in CASES} == alone == EXPECTED
    assert started <= {claimed["batch-" + c].id for c in CASES}

    async def outcome(prefix: str, case: str) -> tuple[object, ...]:
        before = claimed[prefix + case]
        run = await get_run(store, before.id)
        return (
            run.state,
            run.reason,
            run.attempt,
            run.token - before.token,
            run.started_at,
            run.lease_expires_at,
        )

    for case in CASES:
        assert await outcome("batch-", case) == await outcome("alone-", case), case
    ok = await get_run(store, claimed["batch-ok"].id)
    assert (ok.started_at, ok.lease_expires_at) == (at, at + s(LEASE))
    busy = await get_run(store, claimed["batch-busy"].id)
    assert (busy.state, busy.reason) == (RunState.SKIPPED, "overlap")


async def test_a_batch_start_of_nothing_starts_nothing(store: Store) -> None:
    assert await store.runs_start(RunsStartParams([])) == set()


async def test_a_run_repeated_in_a_batch_starts_once(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j")
    run = (await claim_one(store, t0, lookahead=1)).run
    pairs = [(run.id, run.token), (run.id, run.token)]
    assert await store.runs_start(RunsStartParams(pairs, now=t0 + s(1))) == {run.id}
    assert await store.runs_start(RunsStartParams(pairs, now=t0 + s(2))) == set()
    assert (await get_run(store, run.id)).started_at == t0 + s(1)
