"""runs_complete: applied outcomes, retries, the attempt history, and fencing of stale writes."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from storekit import (
    LEASE,
    TENANT,
    WORKER,
    claim,
    claim_one,
    complete,
    completion,
    failed_attempt,
    get_job,
    get_run,
    is_utc,
    make_job,
    materialize,
    running_run,
    s,
    scheduled_run,
)

from duetime._types import AttemptOutcome, JobStatus, RetryPolicy, RunState, Schedule, ScheduleKind
from duetime.store import Store
from duetime.store.base import JobRef, JobSetStatusParams, LeasesReapParams, RunsHeartbeatParams


async def test_success_is_applied_and_recorded(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j", worker="w-1")
    done_at = t0 + s(2.5)

    assert await complete(store, done_at, completion(claimed)) == [True]

    run = await get_run(store, claimed.run.id)
    assert run.state is RunState.SUCCEEDED
    assert run.finished_at == done_at
    assert is_utc(run.finished_at)
    assert run.lease_owner is None
    assert run.lease_expires_at is None
    assert run.started_at == t0
    assert run.attempt == 1
    (attempt,) = await store.attempts_list(TENANT, run.id)
    assert attempt.run_id == run.id
    assert attempt.job_id == run.job_id
    assert attempt.tenant == TENANT
    assert attempt.number == 1
    assert attempt.token == claimed.run.token
    assert attempt.worker_id == "w-1"
    assert attempt.claimed_at == t0
    assert attempt.started_at == t0
    assert attempt.finished_at == done_at
    assert attempt.outcome is AttemptOutcome.SUCCEEDED
    assert attempt.duration == s(2.5)
    assert attempt.error_class is None


async def test_retry_reschedules_with_available_at(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    retry_at = t0 + s(10)
    failed = failed_attempt(claimed, retry_at, "ValueError", "bad input")
    applied = await complete(store, t0 + s(1), failed)
    assert applied == [True]

    run = await get_run(store, claimed.run.id)
    assert run.state is RunState.SCHEDULED
    assert run.available_at == retry_at
    assert run.scheduled_for == t0
    assert run.finished_at is None
    assert run.lease_owner is None
    assert (run.last_error_class, run.last_error_message) == ("ValueError", "bad input")
    (attempt,) = await store.attempts_list(TENANT, run.id)
    assert attempt.outcome is AttemptOutcome.FAILED
    assert (attempt.error_class, attempt.error_message) == ("ValueError", "bad input")

    assert await claim(store, retry_at - s(0.001)) == []
    again = await claim_one(store, retry_at, worker="w-2")
    assert again.run.attempt == 2
    assert again.run.token > claimed.run.token
    assert await complete(store, retry_at + s(1), completion(again)) == [True]
    attempts = await store.attempts_list(TENANT, run.id)
    assert [(a.number, a.outcome, a.worker_id) for a in attempts] == [
        (1, AttemptOutcome.FAILED, WORKER),
        (2, AttemptOutcome.SUCCEEDED, "w-2"),
    ]


async def test_a_failed_attempt_keeps_its_traceback(store: Store, t0: datetime) -> None:
    """Issue 17: the traceback a failed attempt carries is stored on the attempt (a stale one
    too); a success has none."""
    tb = 'Traceback (most recent call last):\n  File "t.py", line 1, in boom\nRuntimeError: boom\n'
    big = "x" * 16_000 + "\n" + tb  # no engine cap below the worker's bound
    claimed = await running_run(store, t0, "j")
    failed = failed_attempt(claimed, t0 + s(5), "RuntimeError", "boom", traceback=big)
    stale = replace(failed, token=claimed.run.token - 1, traceback=tb)
    assert await complete(store, t0 + s(1), failed, stale) == [True, False]
    attempts = await store.attempts_list(TENANT, claimed.run.id)
    assert {a.outcome: a.traceback for a in attempts} == {
        AttemptOutcome.STALE: tb,
        AttemptOutcome.FAILED: big,
    }

    again = await claim_one(store, t0 + s(5))
    assert await complete(store, t0 + s(6), completion(again)) == [True]
    attempts = await store.attempts_list(TENANT, claimed.run.id)
    assert attempts[-1].outcome is AttemptOutcome.SUCCEEDED
    assert attempts[-1].traceback is None


async def test_permanent_failure_goes_dead(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    applied = await complete(
        store,
        t0 + s(1),
        completion(
            claimed,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.DEAD,
            reason="permanent_error",
            error_class="Permanent",
            error_message="no",
        ),
    )
    assert applied == [True]
    run = await get_run(store, claimed.run.id)
    assert run.state is RunState.DEAD
    assert run.reason == "permanent_error"
    assert run.finished_at == t0 + s(1)
    assert run.last_error_class == "Permanent"
    assert await claim(store, t0 + s(100)) == []


async def test_timed_out_and_cancelled_outcomes(store: Store, t0: datetime) -> None:
    a = await running_run(store, t0, "a")
    b = await running_run(store, t0, "b")
    applied = await complete(
        store,
        t0 + s(5),
        completion(a, outcome=AttemptOutcome.TIMED_OUT, next_state=RunState.DEAD, reason="t"),
        completion(b, outcome=AttemptOutcome.CANCELLED, next_state=RunState.CANCELLED),
    )
    assert applied == [True, True]
    assert (await get_run(store, a.run.id)).state is RunState.DEAD
    assert (await get_run(store, b.run.id)).state is RunState.CANCELLED
    assert [x.outcome for x in await store.attempts_list(TENANT, a.run.id)] == [
        AttemptOutcome.TIMED_OUT
    ]
    assert [x.outcome for x in await store.attempts_list(TENANT, b.run.id)] == [
        AttemptOutcome.CANCELLED
    ]


async def test_attempt_that_never_started_has_no_duration(store: Store, t0: datetime) -> None:
    await scheduled_run(store, t0 + s(1), "j")
    claimed = await claim_one(store, t0, lookahead=1)
    assert claimed.run.started_at is None
    applied = await complete(
        store,
        t0 + s(0.5),
        completion(claimed, outcome=AttemptOutcome.CANCELLED, next_state=RunState.CANCELLED),
    )
    assert applied == [True]
    (attempt,) = await store.attempts_list(TENANT, claimed.run.id)
    assert attempt.started_at is None
    assert attempt.duration is None


async def test_stale_token_changes_nothing_and_is_recorded_stale(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0, "j")
    stale = completion(claimed, token=claimed.run.token - 1)
    assert await complete(store, t0 + s(1), stale) == [False]
    assert await get_run(store, claimed.run.id) == claimed.run
    attempts = await store.attempts_list(TENANT, claimed.run.id)
    assert [(a.token, a.outcome) for a in attempts] == [
        (claimed.run.token - 1, AttemptOutcome.STALE)
    ]
    # the current holder still completes normally
    assert await complete(store, t0 + s(2), completion(claimed)) == [True]


async def test_a_repeated_completion_is_refused_and_keeps_the_first_outcome(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0, "j")
    assert await complete(store, t0 + s(1), completion(claimed)) == [True]
    finished = await get_run(store, claimed.run.id)

    late = completion(claimed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await complete(store, t0 + s(2), late) == [False]

    assert await get_run(store, claimed.run.id) == finished
    # "record it, never overwrite": the applied outcome of this attempt stays in the history
    (attempt,) = await store.attempts_list(TENANT, claimed.run.id)
    assert attempt.outcome is AttemptOutcome.SUCCEEDED
    assert attempt.finished_at == t0 + s(1)


async def test_lost_attempt_completed_late_is_stale_and_the_newer_outcome_stands(
    store: Store, t0: datetime
) -> None:
    old = await running_run(store, t0, "j", worker="old")
    reaped_at = t0 + s(LEASE + 1)
    reaped = await store.leases_reap(LeasesReapParams(now=reaped_at))
    assert (reaped.rescheduled, reaped.dead) == (1, 0)
    new = await claim_one(store, reaped_at, worker="new")
    assert new.run.token > old.run.token + 1  # reaper and claim both bumped it

    # the old worker wakes up: its heartbeat and its completion change nothing
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams("old", [(old.run.id, old.run.token)], LEASE, now=reaped_at + s(1))
    )
    assert kept == set()
    assert await complete(store, reaped_at + s(2), completion(old)) == [False]
    current = await get_run(store, old.run.id)
    assert current == new.run

    assert await complete(
        store,
        reaped_at + s(3),
        completion(new, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD, reason="x"),
    ) == [True]
    final = await get_run(store, old.run.id)
    assert final.state is RunState.DEAD
    assert final.reason == "x"
    attempts = await store.attempts_list(TENANT, old.run.id)
    assert [(a.number, a.token, a.worker_id, a.outcome) for a in attempts] == [
        (1, old.run.token, "old", AttemptOutcome.STALE),
        (2, new.run.token, "new", AttemptOutcome.FAILED),
    ]


async def test_completion_after_expiry_but_before_reaping_applies(
    store: Store, t0: datetime
) -> None:
    """Expiry alone rejects nothing."""
    claimed = await running_run(store, t0, "j")
    assert await complete(store, t0 + s(LEASE * 2), completion(claimed)) == [True]
    assert (await get_run(store, claimed.run.id)).state is RunState.SUCCEEDED
    reaped = await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE * 3)))
    assert (reaped.rescheduled, reaped.dead) == (0, 0)


async def test_batch_returns_one_flag_per_completion_in_order(store: Store, t0: datetime) -> None:
    a = await running_run(store, t0, "a")
    b = await running_run(store, t0, "b")
    c = await running_run(store, t0, "c")
    flags = await complete(
        store,
        t0 + s(1),
        completion(a),
        completion(b, token=b.run.token + 5),
        completion(
            c,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.SCHEDULED,
            available_at=t0 + s(9),
        ),
    )
    assert flags == [True, False, True]
    assert (await get_run(store, a.run.id)).state is RunState.SUCCEEDED
    assert (await get_run(store, b.run.id)).state is RunState.RUNNING
    assert (await get_run(store, c.run.id)).state is RunState.SCHEDULED
    assert await complete(store, t0 + s(1)) == []


async def test_stale_and_current_completions_of_one_run_in_one_batch(
    store: Store, t0: datetime
) -> None:
    """One process may hold an abandoned attempt (taken over) and the current attempt of the
    same run: its completer can send both in one batch. Each is fenced on its own token."""
    old = await running_run(store, t0, "j", worker=WORKER)
    reaped_at = t0 + s(LEASE + 1)
    assert (await store.leases_reap(LeasesReapParams(now=reaped_at))).rescheduled == 1
    new = await claim_one(store, reaped_at, worker=WORKER)

    flags = await complete(
        store,
        reaped_at + s(1),
        completion(old, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD, reason="old"),
        completion(new),
    )

    assert flags == [False, True]
    run = await get_run(store, new.run.id)
    assert run.state is RunState.SUCCEEDED
    assert run.reason is None
    attempts = await store.attempts_list(TENANT, run.id)
    assert [(a.token, a.outcome) for a in attempts] == [
        (old.run.token, AttemptOutcome.STALE),
        (new.run.token, AttemptOutcome.SUCCEEDED),
    ]


async def test_the_same_completion_twice_in_one_batch(store: Store, t0: datetime) -> None:
    """A completer that retries a batch may repeat an item: the repeat is refused, not an
    error, and the first outcome stands."""
    claimed = await running_run(store, t0, "j")
    flags = await complete(store, t0 + s(1), completion(claimed), completion(claimed))
    assert flags == [True, False]
    assert (await get_run(store, claimed.run.id)).state is RunState.SUCCEEDED


async def test_completion_of_an_unknown_run(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    ghost = replace(completion(claimed), run_id=uuid.uuid4())
    assert await complete(store, t0 + s(1), ghost) == [False]
    assert (await get_run(store, claimed.run.id)).state is RunState.RUNNING


async def _one_shot(store: Store, at: datetime, **kwargs):
    job = await make_job(
        store, "once", next_fire_at=at, schedule=Schedule(kind=ScheduleKind.AT, at=at), **kwargs
    )
    await materialize(store, at)
    claimed = await claim_one(store, at)
    assert claimed.one_shot is True
    return job, claimed


async def test_completes_job_marks_the_one_shot_job_completed(store: Store, t0: datetime) -> None:
    job, claimed = await _one_shot(store, t0)
    assert await complete(store, t0 + s(1), completion(claimed, completes_job=True)) == [True]
    assert (await get_job(store, job.id)).status is JobStatus.COMPLETED


async def test_completes_job_with_a_dead_end_too(store: Store, t0: datetime) -> None:
    job, claimed = await _one_shot(store, t0)
    applied = await complete(
        store,
        t0 + s(1),
        completion(
            claimed,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.DEAD,
            reason="permanent_error",
            completes_job=True,
        ),
    )
    assert applied == [True]
    assert (await get_job(store, job.id)).status is JobStatus.COMPLETED


async def test_a_retry_does_not_complete_the_job(store: Store, t0: datetime) -> None:
    job, claimed = await _one_shot(store, t0, retry=RetryPolicy(max_attempts=3))
    applied = await complete(
        store,
        t0 + s(1),
        completion(
            claimed,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.SCHEDULED,
            available_at=t0 + s(2),
            completes_job=True,
        ),
    )
    assert applied == [True]
    assert (await get_job(store, job.id)).status is JobStatus.ACTIVE


async def test_a_stale_completion_does_not_complete_the_job(store: Store, t0: datetime) -> None:
    job, claimed = await _one_shot(store, t0)
    stale = completion(claimed, token=claimed.run.token + 1, completes_job=True)
    assert await complete(store, t0 + s(1), stale) == [False]
    assert (await get_job(store, job.id)).status is JobStatus.ACTIVE


async def test_completion_without_completes_job_leaves_the_job(store: Store, t0: datetime) -> None:
    job, claimed = await _one_shot(store, t0)
    assert await complete(store, t0 + s(1), completion(claimed)) == [True]
    assert (await get_job(store, job.id)).status is JobStatus.ACTIVE


# --- handing an attempt back (refund_attempt) ------------------------------------------------


async def test_a_refunded_attempt_does_not_count(store: Store, t0: datetime) -> None:
    """A claimed-ahead run handed back at shutdown: its attempt is not charged, so the run
    keeps its whole budget."""
    await scheduled_run(store, t0 + s(5), "j", retry=RetryPolicy(max_attempts=2))
    claimed = await claim_one(store, t0, lookahead=5)
    assert claimed.run.attempt == 1
    handed_back = completion(
        claimed,
        outcome=AttemptOutcome.CANCELLED,
        next_state=RunState.SCHEDULED,
        refund_attempt=True,
    )
    assert await complete(store, t0 + s(1), handed_back) == [True]
    run = await get_run(store, claimed.run.id)
    assert run.state is RunState.SCHEDULED
    assert run.attempt == 0
    assert run.available_at == t0 + s(5)

    again = await claim_one(store, t0 + s(5), worker="w-2")
    assert again.run.attempt == 1
    # one lost attempt of two: retried, not dead
    reaped = await store.leases_reap(LeasesReapParams(now=t0 + s(5 + LEASE + 1)))
    assert (reaped.rescheduled, reaped.dead) == (1, 0)


async def test_a_stale_refund_changes_nothing(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    stale = completion(
        claimed,
        token=claimed.run.token - 1,
        outcome=AttemptOutcome.CANCELLED,
        next_state=RunState.SCHEDULED,
        refund_attempt=True,
    )
    assert await complete(store, t0 + s(1), stale) == [False]
    assert await get_run(store, claimed.run.id) == claimed.run


@pytest.mark.parametrize(
    ("outcome", "refund"),
    [(AttemptOutcome.CANCELLED, True), (AttemptOutcome.FAILED, False)],
    ids=["handed-back", "retry"],
)
async def test_a_run_going_back_to_scheduled_after_its_job_was_cancelled_ends_cancelled(
    store: Store, t0: datetime, outcome: AttemptOutcome, refund: bool
) -> None:
    """A run claimed (ahead, say) when its job is cancelled, then handed back or failed for a
    retry: back in `scheduled` nothing would ever claim it (cancelling ended the job's
    scheduled runs already); it ends `cancelled` instead, its attempt recorded."""
    claimed = await running_run(store, t0, "j")
    job_ref = JobRef(claimed.run.tenant, id=claimed.run.job_id)
    await store.job_set_status(JobSetStatusParams(job_ref, JobStatus.CANCELLED, now=t0 + s(0.5)))
    back = completion(
        claimed,
        outcome=outcome,
        next_state=RunState.SCHEDULED,
        available_at=t0 + s(5),
        refund_attempt=refund,
        reason="handed back" if refund else "retry",
    )

    assert await complete(store, t0 + s(1), back) == [True]

    run = await get_run(store, claimed.run.id)
    assert (run.state, run.reason, run.finished_at) == (RunState.CANCELLED, "cancelled", t0 + s(1))
    assert [a.outcome for a in await store.attempts_list(TENANT, claimed.run.id)] == [outcome]


ODD = 'quote " backslash \\ {braces, commas} NULL ✓ 日本語 😀 \n\ttab'
"""Text an array literal would have to quote and escape, and characters beyond ASCII."""


async def test_a_batch_with_unusual_values_comes_back_exactly(store: Store, t0: datetime) -> None:
    """Every column of a completion batch round-trips as it was sent: NULLs beside values in one
    column, text that an array literal would escape, empty text (not NULL), instants with
    microseconds in another zone, the largest attempt number and token, a result with
    non-ASCII JSON (on PostgreSQL the batch is an array per column built in binary by
    store/postgres/arrays.py; before, one JSON document)."""
    india = timezone(timedelta(hours=5, minutes=30))
    retried = await running_run(store, t0, "retried")
    succeeded = await running_run(store, t0 + s(1), "succeeded")
    refused = await running_run(store, t0 + s(2), "refused")
    due_again = (t0 + timedelta(seconds=10, microseconds=123457)).astimezone(india)
    claimed_at = (t0 + timedelta(microseconds=654321)).astimezone(india)
    batch = [
        completion(
            retried,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.SCHEDULED,
            available_at=due_again,
            reason="",
            error_class="Ошибка",
            error_message=ODD,
            traceback=ODD * 300,
        ),
        replace(
            completion(succeeded, result='{"k": "ü 😀 \\"x\\"", "n": 9223372036854775807}'),
            started_at=None,
            claimed_at=claimed_at,
        ),
        completion(
            refused,
            token=2**63 - 1,
            worker="wörker ☃",
            error_message="",
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.DEAD,
        ),
    ]
    batch[2] = replace(batch[2], attempt=2**31 - 1)

    assert await complete(store, t0 + timedelta(seconds=3, microseconds=1), *batch) == [
        True,
        True,
        False,
    ]

    run = await get_run(store, retried.run.id)
    assert (run.state, run.available_at, run.reason) == (RunState.SCHEDULED, due_again, "")
    assert (run.last_error_class, run.last_error_message) == ("Ошибка", ODD)
    (attempt,) = await store.attempts_list(TENANT, retried.run.id)
    assert (attempt.error_class, attempt.error_message, attempt.traceback) == (
        "Ошибка",
        ODD,
        ODD * 300,
    )
    assert attempt.finished_at == t0 + timedelta(seconds=3, microseconds=1)
    run = await get_run(store, succeeded.run.id)
    assert run.result == {"k": 'ü 😀 "x"', "n": 2**63 - 1}
    assert (run.last_error_class, run.last_error_message, run.reason) == (None, None, None)
    (attempt,) = await store.attempts_list(TENANT, succeeded.run.id)
    assert (attempt.started_at, attempt.claimed_at) == (None, claimed_at)
    assert (attempt.error_class, attempt.error_message, attempt.traceback) == (None, None, None)
    (attempt,) = await store.attempts_list(TENANT, refused.run.id)
    assert (attempt.token, attempt.number, attempt.worker_id) == (2**63 - 1, 2**31 - 1, "wörker ☃")
    assert (attempt.outcome, attempt.error_message) == (AttemptOutcome.STALE, "")
    assert attempt.started_at == refused.run.started_at
