"""Status rules: which job status moves are allowed, what a move does to the job's pending
runs, and where a run whose lease was lost goes. Pure: both stores apply them in their
transactions (docs/state_machine.md maps each transition to its query)."""

from __future__ import annotations

from duetime._types import DeliveryMode, JobStatus, Run, RunState

STATUS_MOVES: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PAUSED: frozenset({JobStatus.ACTIVE}),
    JobStatus.ACTIVE: frozenset({JobStatus.PAUSED}),
    JobStatus.CANCELLED: frozenset({JobStatus.ACTIVE, JobStatus.PAUSED}),
}
"""Target status → the statuses a job may move to it from."""

PENDING_END_STATE: dict[JobStatus, tuple[RunState, str]] = {
    JobStatus.PAUSED: (RunState.SKIPPED, "paused"),
    JobStatus.CANCELLED: (RunState.CANCELLED, "job_cancelled"),
}
"""What happens to a job's not-yet-started runs when it moves to a status."""


def status_after_schedule_change(status: JobStatus) -> JobStatus:
    """A job whose schedule is replaced: a completed one (a one-shot that fired) is active
    again; any other keeps its status."""
    return JobStatus.ACTIVE if status is JobStatus.COMPLETED else status


def lease_lost_decision(
    run: Run, delivery: DeliveryMode, *, window_over: bool = False
) -> tuple[RunState, str | None]:
    """Where a run whose lease expired goes: retry, or dead when out of attempts, past its
    retry window (``window_over``: a retry now would start after it), or when it is
    at-most-once (it may have started, so it must not start again). A run claimed ahead that
    never started goes back to ``scheduled`` whatever its attempts: nothing of it ran, and
    the store gives its attempt back (as a worker's hand-back does)."""
    if run.started_at is None:
        return RunState.SCHEDULED, None
    if delivery is DeliveryMode.AT_MOST_ONCE:
        return RunState.DEAD, "lease_lost"
    if run.attempt >= run.max_attempts:
        return RunState.DEAD, "attempts_exhausted"
    if window_over:
        return RunState.DEAD, "retry_window_exhausted"
    return RunState.SCHEDULED, None
