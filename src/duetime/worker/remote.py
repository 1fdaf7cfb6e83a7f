"""The remote-worker protocol: workers in any language claim, heartbeat and complete runs over
HTTP (the REST API's ``/api/v1/worker/…`` endpoints call this).

The rules are the in-process worker's: a claim is one atomic statement (only due runs, only
the caller's tenant, only the tasks it names); a heartbeat extends the leases it still holds;
a completion is fenced by the attempt's token, and the retry decision is
:mod:`duetime.worker.retry`'s, made here from the run's own retry policy. A completion whose
token no longer holds the run changes nothing: it raises :class:`~duetime.errors.Conflict`
(after recording the attempt ``stale`` when its lease had been taken over).

A remote worker's identity is structured: (tenant, worker id). Its lease owner (and the
workers table's id, the attempts' ``worker_id``) reads ``tenant/worker_id``, but that string is
never looked up alone — tenant names and worker ids may both hold ``/``, so tenant ``a``'s
worker ``x/y`` and tenant ``a/x``'s worker ``y`` spell the same ``a/x/y``. Every store call
made here (claim, heartbeat, complete, worker record) is filtered by the tenant in the store's
SQL, and the workers table is keyed by (tenant, id).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from duetime._config import Settings
from duetime._outbox import broker_connection
from duetime._types import AttemptOutcome, Run, RunState, RunTrigger, WorkerInfo
from duetime.errors import Conflict, NotFound, Permanent, RetryLater, ValidationError
from duetime.metrics import metrics
from duetime.store.base import (
    ClaimedRun,
    RunCompletion,
    RunsClaimParams,
    RunsCompleteParams,
    RunsHeartbeatParams,
    Store,
)
from duetime.worker.results import ResultRefused, encode_result
from duetime.worker.retry import after_failure, after_success, bounded_traceback
from duetime.worker.run_metrics import step_handoff
from duetime.workflows.definition import workflow_role

REMOTE_HOST = "remote"


class RemoteFailure(Exception):
    """A remote worker reported a retryable failure."""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """``kept``: leases extended. ``cancel_requested``: stop working on the run — cancelled by
    an operator (its completion would be refused), or replaced by a newer run of its job
    (overlap ``replace``: it is in ``kept`` too, its lease holds until its ``replace_timeout``;
    report the attempt once stopped, ``failed`` ends it ``replaced``; the newer run starts
    then). ``lost``: the lease is gone (expired and reaped, or taken by another worker) —
    stop, the run is someone else's now."""

    kept: list[uuid.UUID]
    lost: list[uuid.UUID]
    cancel_requested: list[uuid.UUID]


@dataclass(frozen=True, slots=True)
class RemoteOutcome:
    """What a remote worker reports about its attempt."""

    run_id: uuid.UUID
    token: int
    outcome: Literal["succeeded", "failed"]
    error_class: str | None = None
    error_message: str | None = None
    retryable: bool = True
    """False: a permanent failure — the run goes dead at once."""
    retry_after: float | None = None
    """Seconds before the retry (instead of the job's backoff); counts as an attempt."""
    traceback: str | None = None
    """The failure's traceback as the worker formatted it (kept: its last 16 KiB)."""
    result: Any = None
    """A success's return value (JSON): kept with the run, as a local worker keeps it."""


class RemoteWorkers:
    """The protocol for one tenant, over a store."""

    def __init__(self, store: Store, settings: Settings, tenant: str) -> None:
        self.store = store
        self.settings = settings
        self.tenant = tenant

    def owner(self, worker_id: str) -> str:
        """The lease owner / workers-table id of a remote worker of this tenant: unique only
        together with the tenant (see the module's docstring)."""
        return f"{self.tenant}/{worker_id}"

    async def claim(
        self, worker_id: str, tasks: Sequence[str], *, limit: int, lease_ttl: float
    ) -> list[ClaimedRun]:
        """Record the worker and its task names, then claim up to ``limit`` due runs of those
        tasks in this tenant, each leased for ``lease_ttl`` seconds (all started at once: a
        remote worker is never handed a run ahead of its instant). A broker task
        (``duetime.broker:<connection>``) is refused: only a worker holding the connection
        publishes its messages (docs/brokers.md)."""
        brokers = [t for t in tasks if broker_connection(t) is not None]
        if brokers:
            raise ValidationError(
                "tasks",
                f"{brokers[0]!r} is a broker connection: only a worker configured with it "
                "(DUETIME_BROKERS) serves it",
            )
        owner = self.owner(worker_id)
        now = await self.store.db_now()
        await self.store.worker_register(
            WorkerInfo(
                id=owner,
                host=REMOTE_HOST,
                pid=0,
                tasks=tuple(dict.fromkeys(tasks)),
                queues=("default",),
                started_at=now,
                heartbeat_at=now,
                tenant=self.tenant,
            )
        )
        claimed = await self.store.runs_claim(
            RunsClaimParams(
                worker_id=owner,
                tasks=list(dict.fromkeys(tasks)),
                limit=limit,
                lease_ttl=lease_ttl,
                lookahead=0.0,
                tenant=self.tenant,
                priority_aging=self.settings.priority_aging,
                priority_aging_cap=self.settings.priority_aging_cap,
            )
        )
        for item in claimed:  # started when claimed: their fire lag is known now
            run = item.run
            due = run.scheduled_for if run.attempt <= 1 else run.available_at
            metrics().started(run.tenant, run.task, due, run.started_at or now)
            handoff = step_handoff(run, run.started_at or now)
            if handoff is not None:
                metrics().steps_handed_off(run.tenant, [handoff])
        return claimed

    async def heartbeat(
        self, worker_id: str, runs: Sequence[tuple[uuid.UUID, int]], *, lease_ttl: float
    ) -> HeartbeatResult:
        owner = self.owner(worker_id)
        await self.store.worker_heartbeat(owner, tenant=self.tenant)
        kept = await self.store.runs_heartbeat(
            RunsHeartbeatParams(
                worker_id=owner, runs=list(runs), lease_ttl=lease_ttl, tenant=self.tenant
            )
        )
        lost: list[uuid.UUID] = []
        cancelled: list[uuid.UUID] = []
        for run_id, _ in runs:
            if run_id in kept or run_id in lost or run_id in cancelled:
                continue
            try:
                run = await self.store.run_get(self.tenant, run_id)
            except NotFound:
                lost.append(run_id)
                continue
            (cancelled if run.state is RunState.CANCELLED else lost).append(run_id)
        ordered = list(dict.fromkeys(run_id for run_id, _ in runs if run_id in kept))
        asked = await self.store.runs_stop_requested([r for r in runs if r[0] in kept])
        cancelled += [run_id for run_id in ordered if run_id in asked]
        return HeartbeatResult(kept=ordered, lost=lost, cancel_requested=cancelled)

    async def complete(self, worker_id: str, report: RemoteOutcome) -> Run:
        """Apply the attempt's outcome, fenced by its token; return the run afterwards.

        Raises NotFound (no such run in this tenant) or Conflict (the token no longer holds the
        run: lease lost and taken over, cancelled, or already completed)."""
        owner = self.owner(worker_id)
        claimed = await self.store.run_get_claimed(self.tenant, report.run_id)
        run = claimed.run
        holds = (
            run.state is RunState.RUNNING and report.token == run.token and run.lease_owner == owner
        )
        if not holds:
            if report.token < run.token:
                await self._record_stale(owner, claimed, report)
            raise Conflict(
                f"run {run.id}: token {report.token} no longer holds it (the run is "
                f"{run.state}, token {run.token}); this outcome was not applied"
            )
        completion = self._completion(owner, claimed, report, await self.store.db_now())
        if report.outcome == "failed" and run.cancel_requested:
            completion = await self._stopped_for_replace(completion)
        (applied,) = await self.store.runs_complete(
            RunsCompleteParams([completion], tenant=self.tenant)
        )
        _count_remote(run, completion, applied)
        if not applied:
            raise Conflict(
                f"run {run.id}: its lease was taken over while completing; this outcome was "
                "not applied"
            )
        return await self.store.run_get(self.tenant, run.id)

    async def _stopped_for_replace(self, completion: RunCompletion) -> RunCompletion:
        """A failure reported by a run replaced by a newer one (it was told to stop) ends it
        ``cancelled`` / ``replaced``, never retried (decision 0016)."""
        stops = await self.store.runs_stop_requested([(completion.run_id, completion.token)])
        if stops.get(completion.run_id) != "replaced":
            return completion
        return dataclasses.replace(
            completion,
            outcome=AttemptOutcome.CANCELLED,
            next_state=RunState.CANCELLED,
            available_at=None,
            reason="replaced",
        )

    def _completion(
        self, owner: str, claimed: ClaimedRun, report: RemoteOutcome, now: datetime
    ) -> RunCompletion:
        run = claimed.run
        if report.outcome == "succeeded":
            decision = after_success()
        else:
            message = report.error_message or ""
            exc: Exception
            if not report.retryable:
                exc = Permanent(message)
            elif report.retry_after is not None:
                exc = RetryLater(message, delay=report.retry_after)
            else:
                exc = RemoteFailure(message)
            # keyword arguments from the run, the shape of RunCompletion's below: different calls
            decision = after_failure(
                exc=exc,
                outcome=AttemptOutcome.FAILED,
                attempt=run.attempt,
                max_attempts=run.max_attempts,
                policy=claimed.retry,
                delivery=claimed.delivery,
                now=now,
                window_from=claimed.window_from,
                error_class=report.error_class,
            )
            decision = dataclasses.replace(
                decision,
                error_class=report.error_class or "RemoteError",
                error_message=report.error_message,
            )
        assert run.claimed_at is not None, "a running run has been claimed"
        # as Worker._completion on purpose: that one is on the per-run hot path, kept inline
        return RunCompletion(
            run_id=run.id,
            token=report.token,
            worker_id=owner,
            attempt=run.attempt,
            claimed_at=run.claimed_at,
            started_at=run.started_at,
            outcome=decision.outcome,
            next_state=decision.next_state,
            available_at=decision.available_at,
            reason=decision.reason,
            error_class=decision.error_class,
            error_message=decision.error_message,
            traceback=(
                bounded_traceback(report.traceback)
                if report.traceback and report.outcome == "failed"
                else None
            ),
            completes_job=claimed.one_shot and run.trigger is RunTrigger.SCHEDULE,
            result=self._result(report),
            workflow=workflow_role(run),  # a step's children start with its end, as locally
        )

    def _result(self, report: RemoteOutcome) -> str | None:
        """A success's result as JSON text; over the limit (or not JSON) it is refused
        (ValidationError, 422): the remote worker's report is wrong, not the run."""
        if report.outcome != "succeeded" or report.result is None:
            return None
        try:
            return encode_result(
                report.result,
                limit=self.settings.result_max_bytes,
                required=True,
                run=str(report.run_id),
            )
        except ResultRefused as exc:
            raise ValidationError("result", str(exc)) from None

    async def _record_stale(self, owner: str, claimed: ClaimedRun, report: RemoteOutcome) -> None:
        """A late outcome of an attempt whose lease was taken over (reaped or cancelled):
        record that attempt ``stale``, as the in-process worker's late writes are. Nothing
        is written for a token this worker never held."""
        attempts = await self.store.attempts_list(self.tenant, claimed.run.id)
        prior = next(
            (a for a in attempts if a.token == report.token and a.worker_id == owner), None
        )
        if prior is None or prior.outcome not in (AttemptOutcome.LOST, AttemptOutcome.CANCELLED):
            return
        late = RunCompletion(
            run_id=claimed.run.id,
            token=report.token,
            worker_id=owner,
            attempt=prior.number,
            claimed_at=prior.claimed_at,
            started_at=prior.started_at,
            outcome=AttemptOutcome.STALE,
            next_state=RunState.SUCCEEDED if report.outcome == "succeeded" else RunState.DEAD,
            error_class=report.error_class,
            error_message=report.error_message,
        )
        await self.store.runs_complete(RunsCompleteParams([late], tenant=self.tenant))


def _count_remote(run: Run, completion: RunCompletion, applied: bool) -> None:
    """Metrics of a remote worker's outcome (this API process counts it)."""
    duration = None
    if applied and completion.started_at is not None:
        duration = max(0.0, (datetime.now(UTC) - completion.started_at).total_seconds())
    registry = metrics()
    registry.attempt_ended(
        run.tenant, run.task, str(completion.outcome) if applied else "stale", duration
    )
    if applied:
        registry.run_ended(run.tenant, run.task, str(completion.next_state), completion.reason)
