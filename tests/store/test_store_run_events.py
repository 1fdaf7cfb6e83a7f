"""Run events written by the store (docs/brokers.md, "Run events"; decision 0031), both
stores: each path that starts, skips or ends a run — the claim that starts it at once, the
start of a run claimed ahead (``runs_start``), an overlap skip at claim time, a misfire skip,
cancels (of a run, of a workflow instance), replays, reaps and changes to a job — writes the
run's event in its own transaction, once; with no run events set, none writes anything."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest
from storekit import (
    LEASE,
    TENANT,
    claim,
    claim_one,
    complete,
    completion,
    dead_run,
    job_params,
    job_with_runs,
    ref,
    s,
    scheduled_run,
    upsert,
)

from duetime import _json
from duetime._outbox import RUN_EVENT_KINDS, OutboxClaimParams, OutboxRow, RunEvents
from duetime._types import (
    AttemptOutcome,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    RunState,
)
from duetime.errors import Conflict
from duetime.store import Store
from duetime.store.base import (
    JobSetStatusParams,
    LeasesReapParams,
    RunCancelParams,
    RunReplayParams,
    RunsMisfireParams,
    RunStartParams,
)
from duetime.testing import FrozenApp, FrozenClock, drain
from duetime.workflows.definition import Workflow

TARGET = {"type": "nats", "connection": "events", "subject": "duetime.events"}


def events_on(store: Store, *kinds: str, tenants: frozenset[str] | None = None) -> None:
    store.run_events = RunEvents(
        "events", TARGET, frozenset(kinds or RUN_EVENT_KINDS), tenants=tenants
    )


async def written(store: Store, now: datetime) -> list[OutboxRow]:
    rows = await store.outbox_claim(
        OutboxClaimParams(connections=["events"], limit=1000, now=now + s(3600))
    )
    for row in rows:
        assert row.target == TARGET
        assert row.headers["duetime-message-id"] == row.message_id
        assert _json.loads(row.body)["message_id"] == row.message_id
    return rows


def events_of(rows: list[OutboxRow]) -> list[tuple[str, str]]:
    return sorted((str(row.run_id), _json.loads(row.body)["event"]) for row in rows)


async def test_a_run_started_at_claim_and_ended_reports_both(store: Store, t0: datetime) -> None:
    events_on(store)
    run = await scheduled_run(store, t0, "j")
    claimed = await claim_one(store, t0)
    assert await complete(store, t0 + s(1), completion(claimed)) == [True]
    rows = await written(store, t0)
    assert events_of(rows) == sorted([(str(run.id), "started"), (str(run.id), "succeeded")])
    started = next(r for r in rows if r.message_id.endswith(":started"))
    body = _json.loads(started.body)
    assert (body["state"], body["attempt"], body["job"]) == ("running", 1, "j")
    assert datetime.fromisoformat(body["started_at"]) == t0
    assert started.message_id == f"{run.id}:{claimed.run.token}:started"


async def test_a_run_claimed_ahead_reports_its_start_when_it_starts(
    store: Store, t0: datetime
) -> None:
    events_on(store, "started")
    run = await scheduled_run(store, t0 + s(1), "j")
    ahead = await claim_one(store, t0, lookahead=1)
    assert await written(store, t0) == []  # claimed, not started
    start = RunStartParams(run_id=run.id, token=ahead.run.token, now=t0 + s(1), lease_ttl=30)
    assert await store.run_start(start)
    assert await store.run_start(start) is False  # once only
    assert events_of(await written(store, t0)) == [(str(run.id), "started")]


async def test_skips_at_claim_and_by_misfire_are_reported(store: Store, t0: datetime) -> None:
    events_on(store, "skipped")
    job = await job_with_runs(store, t0, "over", 2, overlap_policy=OverlapPolicy.SKIP)
    await claim_one(store, t0)
    assert await claim(store, t0 + s(1)) == []  # the second run is skipped: overlap
    late = await job_with_runs(
        store, t0, "late", 2, misfire_policy=MisfirePolicy.SKIP, misfire_grace=10
    )
    assert await store.runs_misfire(RunsMisfireParams(now=t0 + s(60))) == ["late", "late"]
    rows = await written(store, t0)
    reasons = sorted((_json.loads(r.body)["job"], _json.loads(r.body)["reason"]) for r in rows)
    assert reasons == [("late", "misfire_skip")] * 2 + [("over", "overlap")]
    assert {_json.loads(r.body)["job_id"] for r in rows} == {str(job.id), str(late.id)}
    assert all(_json.loads(r.body)["state"] == RunState.SKIPPED.value for r in rows)


async def test_nothing_is_written_when_off_or_filtered_out(store: Store, t0: datetime) -> None:
    for n, setting in enumerate((None, frozenset({"someone-else"}))):
        if setting is not None:  # every kind, but another tenant's runs only
            events_on(store, tenants=setting)
        else:
            store.run_events = None
        await scheduled_run(store, t0, f"j{n}")
        claimed = await claim_one(store, t0)
        dead = completion(claimed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
        assert await complete(store, t0, dead) == [True]
        assert await written(store, t0) == []
        t0 += s(1)


async def test_each_attempt_reports_its_own_events_and_a_stale_end_none(
    store: Store, t0: datetime
) -> None:
    """Two attempts that each fail with a retry report two `started` and two `retrying`
    events under distinct message ids (the token names the attempt); the first attempt's late
    completion, refused by the fence, reports nothing."""
    events_on(store)
    run = await scheduled_run(store, t0, "j", retry=RetryPolicy(max_attempts=3))
    first = await claim_one(store, t0)
    retry = completion(
        first, outcome=AttemptOutcome.FAILED, next_state=RunState.SCHEDULED, available_at=t0
    )
    assert await complete(store, t0, retry) == [True]
    second = await claim_one(store, t0 + s(1))
    assert second.run.token != first.run.token
    assert await complete(store, t0 + s(1), completion(first)) == [False]  # stale
    again = completion(
        second, outcome=AttemptOutcome.FAILED, next_state=RunState.SCHEDULED, available_at=t0
    )
    assert await complete(store, t0 + s(2), again) == [True]
    rows = await written(store, t0)
    assert len({r.message_id for r in rows}) == len(rows) == 4
    assert events_of(rows) == [(str(run.id), "retrying")] * 2 + [(str(run.id), "started")] * 2


def bodies(rows: list[OutboxRow]) -> list[tuple[str, str, str | None]]:
    """(run id, event, reason) of each event, sorted."""
    return sorted(
        (str(row.run_id), (b := _json.loads(row.body))["event"], b["reason"]) for row in rows
    )


async def test_an_operator_cancel_reports_the_run_cancelled_once(
    store: Store, t0: datetime
) -> None:
    """A scheduled run and a running one cancelled by an operator each report `cancelled`
    under the token the cancel gave them; the running one's late completion, fenced off,
    reports nothing more."""
    events_on(store, "cancelled", "succeeded")
    waiting = await scheduled_run(store, t0 + s(60), "later")
    await scheduled_run(store, t0, "now")
    running = await claim_one(store, t0)
    for run_id in (waiting.id, running.run.id):
        await store.run_cancel(RunCancelParams(TENANT, run_id, now=t0 + s(1)))
    assert await complete(store, t0 + s(2), completion(running)) == [False]
    rows = await written(store, t0)
    assert bodies(rows) == sorted(
        [
            (str(waiting.id), "cancelled", "cancelled"),
            (str(running.run.id), "cancelled", "cancelled"),
        ]
    )
    ended = await store.run_get(TENANT, running.run.id)
    assert f"{running.run.id}:{ended.token}:cancelled" in {r.message_id for r in rows}


async def test_a_replaced_run_reports_cancelled_with_its_reason(store: Store, t0: datetime) -> None:
    """A run ``overlap="replace"`` cancels outright (past its replace_timeout, and a newer run
    that reaped it) reports `cancelled`, reason `replaced`, in the claim's transaction."""
    events_on(store, "cancelled")
    await job_with_runs(
        store, t0, "j", 2, overlap_policy=OverlapPolicy.REPLACE, replace_timeout=5.0
    )
    (old,) = await claim(store, t0)
    assert await claim(store, t0 + s(1)) == []  # asked to stop: no event yet
    assert await written(store, t0) == []
    (new,) = await claim(store, t0 + s(6.1))
    assert bodies(await written(store, t0)) == [(str(old.run.id), "cancelled", "replaced")]
    assert new.run.id != old.run.id


async def test_the_reaper_reports_the_runs_it_sends_back_or_kills(
    store: Store, t0: datetime
) -> None:
    """Expired leases: a run sent back reports `retrying`, one out of attempts `dead`, each
    under its own message id (the reap bumps the token); a run claimed ahead and sent back
    unstarted reports nothing; a second reap of the retried run reports a second
    `retrying`."""
    events_on(store, "retrying", "dead")
    again = await scheduled_run(store, t0, "again", retry=RetryPolicy(max_attempts=3))
    once = await scheduled_run(store, t0, "once", retry=RetryPolicy(max_attempts=1))
    await claim(store, t0)
    ahead = await scheduled_run(store, t0 + s(LEASE * 2), "ahead")
    await claim_one(store, t0 + s(LEASE), lookahead=LEASE * 2)  # claimed, never started
    reaped = await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE + 1)))
    assert (reaped.rescheduled, reaped.dead) == (1, 1)
    reaped = await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE * 3 + 2)))
    assert (reaped.rescheduled, reaped.dead) == (1, 0)  # `ahead`, unstarted: nothing to say
    first = await written(store, t0)
    assert events_of(first) == sorted([(str(again.id), "retrying"), (str(once.id), "dead")])
    assert str(ahead.id) not in {str(r.run_id) for r in first}
    (second,) = [c for c in await claim(store, t0 + s(LEASE * 4)) if c.run.id == again.id]
    await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE * 6)))
    rows = [*first, *await written(store, t0)]
    assert [e for e in events_of(rows) if e[0] == str(again.id)] == [
        (str(again.id), "retrying")
    ] * 2
    assert len({r.message_id for r in rows}) == len(rows)
    assert f"{again.id}:{second.run.token + 1}:retrying" in {r.message_id for r in rows}


async def test_runs_ended_by_a_change_to_their_job_report_it(store: Store, t0: datetime) -> None:
    """A job's due, unstarted runs skipped outside its new bounds (`out_of_bounds`), skipped
    by a pause and cancelled with the job each report their event, in the change's
    transaction."""
    events_on(store, "skipped", "cancelled")
    bounded = await job_with_runs(store, t0, "bounded", 1)
    params = replace(job_params("bounded", next_fire_at=t0), start_at=t0 + s(3600))
    await upsert(store, params)
    paused = await job_with_runs(store, t0, "paused", 1)
    await store.job_set_status(JobSetStatusParams(ref(paused), JobStatus.PAUSED, now=t0))
    cancelled = await job_with_runs(store, t0, "cancelled", 1)
    await store.job_set_status(JobSetStatusParams(ref(cancelled), JobStatus.CANCELLED, now=t0))
    rows = await written(store, t0)
    jobs = sorted(
        (b["job"], b["event"], b["reason"]) for b in map(_json.loads, (r.body for r in rows))
    )
    assert jobs == [
        ("bounded", "skipped", "out_of_bounds"),
        ("cancelled", "cancelled", "job_cancelled"),
        ("paused", "skipped", "paused"),
    ]
    assert {_json.loads(r.body)["job_id"] for r in rows} == {
        str(bounded.id),
        str(paused.id),
        str(cancelled.id),
    }


async def test_with_events_off_the_new_sources_write_nothing(store: Store, t0: datetime) -> None:
    store.run_events = None
    await scheduled_run(store, t0, "c")
    claimed = await claim_one(store, t0)
    await store.run_cancel(RunCancelParams(TENANT, claimed.run.id, now=t0))
    await scheduled_run(store, t0, "r")
    await claim_one(store, t0)
    await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE + 1)))
    job = await job_with_runs(store, t0 + s(1), "p", 1)
    await store.job_set_status(JobSetStatusParams(ref(job), JobStatus.CANCELLED, now=t0 + s(1)))
    dead = await dead_run(store, t0 + s(2), "d")
    assert await store.runs_replay(RunReplayParams(TENANT, now=t0 + s(3))) == [dead.run.id]
    assert await written(store, t0) == []


async def test_a_replayed_run_reports_retrying_once_per_replay(store: Store, t0: datetime) -> None:
    """A dead run an operator replays is scheduled again: `retrying`, in the replay's
    transaction, under its dead attempt's token; replayed again after its next attempt died,
    a second `retrying` under that attempt's token."""
    events_on(store, "retrying")
    dead = await dead_run(store, t0, "j")
    replay = RunReplayParams(TENANT, run_ids=[dead.run.id], now=t0 + s(10))
    assert await store.runs_replay(replay) == [dead.run.id]
    assert await store.runs_replay(replay) == []  # scheduled now: nothing to replay
    again = await claim_one(store, t0 + s(10))
    failed = completion(again, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await complete(store, t0 + s(11), failed) == [True]
    assert await store.runs_replay(replace(replay, now=t0 + s(12))) == [dead.run.id]
    rows = await written(store, t0)
    assert sorted(r.message_id for r in rows) == sorted(
        [f"{dead.run.id}:{dead.run.token}:retrying", f"{dead.run.id}:{again.run.token}:retrying"]
    )
    body = _json.loads(rows[0].body)
    assert (body["event"], body["state"], body["job"]) == ("retrying", "scheduled", "j")


@pytest.mark.parametrize("on", [True, False], ids=["events-on", "events-off"])
async def test_a_workflow_instance_cancel_reports_its_step_runs_cancelled(
    store_url: str, clock: FrozenClock, on: bool
) -> None:
    """Cancelling a running instance ends its step runs — one not started, one running — and
    each reports `cancelled` (reason `workflow cancelled`) under the token the cancel gave it,
    in the cancel's transaction; the running one's late completion, fenced off, reports
    nothing more. With no run events set, nothing is written."""
    async with FrozenApp(store_url, clock=clock) as app:
        flow = Workflow("cancel-me")
        flow.step("a", task="t")
        flow.step("b", task="u")
        await app.workflows.register(flow, allow_unregistered=True)
        await app.schedule("c", target={"type": "workflow", "name": "cancel-me"}, now=True)
        await drain(app)  # the start run only: no worker here serves "t" or "u"
        store = app.store
        if on:
            events_on(store, "cancelled", "succeeded")
        else:
            store.run_events = None
        running = await claim_one(store, clock.now(), tasks=["t"])
        [instance] = await app.workflows.instances()
        await app.workflows.cancel(instance.id)
        with pytest.raises(Conflict):  # ended: a second cancel writes nothing
            await app.workflows.cancel(instance.id)
        assert await complete(store, clock.now(), completion(running)) == [False]
        steps = await app.workflows.steps(instance.id)
        ended = [await store.run_get(instance.tenant, s.run_id) for s in steps if s.run_id]
        assert {run.state for run in ended} == {RunState.CANCELLED}
        assert len(ended) == 2
        rows = await written(store, clock.now())
        if not on:
            assert rows == []
            return
        assert sorted(r.message_id for r in rows) == sorted(
            f"{run.id}:{run.token}:cancelled" for run in ended
        )
        assert {_json.loads(r.body)["reason"] for r in rows} == {"workflow cancelled"}
        assert running.run.id in {r.run_id for r in rows}
