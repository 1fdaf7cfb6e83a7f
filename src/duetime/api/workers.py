"""``/api/v1/worker/…``: the remote-worker protocol, for workers in any language.

1. ``POST /worker/claim`` with the task names the worker runs: up to ``max_runs`` due runs of
   the caller's tenant, each leased to the worker for ``lease_seconds`` with a fencing
   ``token``. The worker's task names are recorded (so jobs may name them).
2. ``POST /worker/heartbeat`` well within the lease (every third of it), with the ``(run_id,
   token)`` pairs it holds: ``kept`` leases are extended; stop work on ``lost`` and
   ``cancel_requested`` runs.
3. ``POST /worker/complete`` once per attempt, with its token: ``succeeded``, or ``failed``
   (``retryable``: false fails for good; ``retry_after`` overrides the backoff). The server
   decides retry or dead from the run's retry policy. A token that no longer holds the run
   (lease lost and taken over, cancelled, already completed) is 409 and changes nothing.

Needs an ``operator`` key. See docs/remote-workers.md for a worker in thirty lines.
"""

from __future__ import annotations

from duetime.api.auth import Operator
from duetime.api.endpoint import Endpoint
from duetime.api.schemas import (
    ClaimedRunOut,
    ClaimIn,
    ClaimOut,
    CompleteIn,
    CompleteOut,
    HeartbeatIn,
    HeartbeatOut,
)
from duetime.app import RemoteOutcome


class ClaimRuns(Endpoint):
    """Claim due runs (remote worker)
    Atomically leases up to `max_runs` runs that are due now, of the given tasks, in the
    caller's tenant, highest priority first. Each comes with its fencing `token`: send it with
    every heartbeat and with the completion. Heartbeat within `lease_seconds` (every third of
    it), or the lease expires and the run is retried elsewhere. An empty list means nothing is
    due: poll again after a second or so."""

    method, path, tag = "POST", "/worker/claim", "remote workers"
    errors = (422,)

    async def handle(self, body: ClaimIn, caller: Operator) -> ClaimOut:
        claimed = await caller.app.remote_workers().claim(
            body.worker_id, body.tasks, limit=body.max_runs, lease_ttl=body.lease_seconds
        )
        return ClaimOut(
            runs=[
                ClaimedRunOut(
                    run_id=c.run.id,
                    token=c.run.token,
                    attempt=c.run.attempt,
                    max_attempts=c.run.max_attempts,
                    job_id=c.run.job_id,
                    job_name=c.run.job_name,
                    task=c.run.task,
                    payload=c.run.payload,
                    scheduled_for=c.run.scheduled_for,
                    lease_expires_at=c.run.lease_expires_at,
                    timeout=c.timeout,
                )
                for c in claimed
            ]
        )


class HeartbeatRuns(Endpoint):
    """Extend leases (remote worker)
    Send every `(run_id, token)` the worker holds. `kept`: extended by `lease_seconds`;
    `lost`: the lease is gone (expired and reaped, or the run is another worker's now) — stop;
    `cancel_requested`: stop — an operator cancelled the run, or a newer run of its job replaces
    it (overlap `replace`; then it is also in `kept`, and the newer run starts once this one
    is reported, `failed` counting as stopped, or after the job's `replace_timeout`)."""

    method, path, tag = "POST", "/worker/heartbeat", "remote workers"
    errors = (422,)

    async def handle(self, body: HeartbeatIn, caller: Operator) -> HeartbeatOut:
        result = await caller.app.remote_workers().heartbeat(
            body.worker_id,
            [(r.run_id, r.token) for r in body.runs],
            lease_ttl=body.lease_seconds,
        )
        return HeartbeatOut(
            kept=result.kept, lost=result.lost, cancel_requested=result.cancel_requested
        )


class CompleteRun(Endpoint):
    """Complete an attempt (remote worker)
    `succeeded`, or `failed`: the server retries with the job's backoff (or after
    `retry_after` seconds) until the attempts run out, then the run is dead; `retryable`:
    false makes it dead at once. Fenced by `token`: if the lease was lost and the run taken
    over, cancelled, or already completed, the answer is 409 and nothing changes (the late
    attempt is recorded `stale`)."""

    method, path, tag = "POST", "/worker/complete", "remote workers"
    errors = (404, 409, 422)

    async def handle(self, body: CompleteIn, caller: Operator) -> CompleteOut:
        run = await caller.app.remote_workers().complete(
            body.worker_id,
            RemoteOutcome(
                run_id=body.run_id,
                token=body.token,
                outcome=body.outcome,
                error_class=body.error_class,
                error_message=body.error_message,
                traceback=body.traceback,
                retryable=body.retryable,
                retry_after=body.retry_after,
                result=body.result,
            ),
        )
        return CompleteOut(
            run_id=run.id, state=run.state, attempt=run.attempt, available_at=run.available_at
        )


ENDPOINTS: tuple[type[Endpoint], ...] = (ClaimRuns, HeartbeatRuns, CompleteRun)
