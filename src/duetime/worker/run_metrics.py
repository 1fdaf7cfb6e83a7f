"""What a worker tells the metrics (:class:`RunObserver`): starts (fire lag), outcomes
(attempt outcomes, run ends, durations), runs that did not start, misfire skips, workflow
step hand-offs (a step run's first start − its creation; retries and replays are no hand-off).
The worker calls it at those points, and hands it every written batch of outcomes (applied
or stale) at once.

Starts and outcomes are tallied in plain dictionaries on the hot path (an outcome waiting to
be written is one entry; a written one is grouped with the batch's others of the same
labels, outcome, next state and reason) and handed to Prometheus per batch
(:meth:`RunObserver.flush`): the worker flushes after every completion batch and on its
summary tick, so a run's start and outcome are exported once its outcome's batch is written,
at most one batch later than one by one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime

from duetime._types import Run, RunState
from duetime.metrics import Metrics, metrics
from duetime.store.base import ClaimedRun, RunCompletion
from duetime.workflows.definition import WorkflowRole, workflow_role

ALL = "_all"

_Labels = tuple[str, str]
"""(tenant, task)."""

_ENDED_STATES = {RunState.SUCCEEDED: "succeeded", RunState.DEAD: "dead"}

_Outcome = tuple[str, str, str, RunState | None, str | None]
"""(tenant, task, outcome, next state, reason) of written attempts: see
:attr:`RunObserver._outcomes`."""

_UNKNOWN: tuple[str, str, float | None] = (ALL, ALL, None)
"""The labels of an outcome whose attempt the observer was not told of."""


def step_handoff(run: Run, started_at: datetime) -> float | None:
    """Seconds from a workflow step run's creation (its parents allowed it) to its first
    start; None for a run that is no step's, a retry or a replay."""
    if run.attempt > 1 or run.replays or workflow_role(run) != "step":
        return None
    return (started_at - run.created_at).total_seconds()


class RunObserver:
    """Per-run bookkeeping for the worker's metrics; not thread-safe (the worker's loop).

    The worker calls :meth:`started` when an attempt begins (it keeps the instant returned),
    :meth:`ending` when the attempt's outcome goes to be written, and :meth:`completed` with
    each written batch (applied or stale); :meth:`flush` hands what was tallied to Prometheus."""

    __slots__ = ("_ending", "_handoffs", "_outcomes", "_starts", "metrics")

    def __init__(self, registry: Metrics | None = None) -> None:
        self.metrics = registry or metrics()
        self._ending: dict[int, tuple[str, str, float | None]] = {}
        """(tenant, task, duration or None: not measured) of the outcomes waiting to be
        written, by the run id's integer (``UUID.int``: a UUID hashes in Python code)."""
        self._starts: dict[_Labels, list[float]] = {}
        """Fire lags (seconds) of the starts not yet flushed, by labels."""
        self._outcomes: dict[_Outcome, list[float | None]] = {}
        """Durations (None: not measured) of the attempts written and not yet flushed, by
        (tenant, task, outcome, the run's next state, reason); a stale attempt's is
        (tenant, task, ``stale``, None, None)."""
        self._handoffs: dict[str, list[float]] = {}
        """Workflow step hand-offs (a step run's first start − its creation, which is when
        its parents allowed it) not yet flushed, by tenant."""

    def started(
        self, claimed: ClaimedRun, started_at: datetime | None, role: WorkflowRole | None
    ) -> float:
        """The run's attempt began (``role``: its ``workflow_role``, which the caller knows).
        Returns when, on the monotonic clock: hand it to :meth:`ending`."""
        run = claimed.run
        labels = (run.tenant, run.task)
        due = run.scheduled_for if run.attempt <= 1 else run.available_at
        lag = ((started_at or run.available_at) - due).total_seconds()
        lags = self._starts.get(labels)
        if lags is None:
            self._starts[labels] = [lag]
        else:
            lags.append(lag)
        if role == "step" and run.attempt <= 1 and not run.replays:  # as step_handoff says
            handoff = ((started_at or run.available_at) - run.created_at).total_seconds()
            self._handoffs.setdefault(run.tenant, []).append(handoff)
        return time.monotonic()

    def ending(self, run: Run, began: float | None) -> None:
        """The attempt's outcome is known and goes to be written: its duration ends here
        (``began``: what :meth:`started` returned; None if the attempt never began here)."""
        duration = None if began is None else time.monotonic() - began
        self._ending[run.id.int] = (run.tenant, run.task, duration)

    def not_started(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        self.metrics.skipped(run.tenant, run.task, "not_started")

    def misfired(self, count: int) -> None:
        self.metrics.skipped(ALL, ALL, "misfire", count)

    def completed(self, batch: Sequence[RunCompletion], applied: Sequence[bool]) -> None:
        """The outcomes of ``batch`` were written (``applied[i]``: the i-th was; False:
        stale). Tallied until :meth:`flush`."""
        ending = self._ending
        outcomes = self._outcomes
        for completion, ok in zip(batch, applied, strict=True):
            tenant, task, duration = ending.pop(completion.run_id.int, _UNKNOWN)
            if completion.started_at is None:
                duration = None
            if ok:
                key: _Outcome = (
                    tenant, task, completion.outcome, completion.next_state, completion.reason
                )  # fmt: skip
            else:
                key = (tenant, task, "stale", None, None)
            durations = outcomes.get(key)
            if durations is None:
                outcomes[key] = [duration]
            else:
                durations.append(duration)

    def flush(self) -> None:
        """Hand the tallied starts and outcomes to Prometheus."""
        starts, self._starts = self._starts, {}
        outcomes, self._outcomes = self._outcomes, {}
        handoffs, self._handoffs = self._handoffs, {}
        for (tenant, task), lags in starts.items():
            self.metrics.started_many(tenant, task, lags)
        attempts: dict[tuple[str, str, str], list[float | None]] = {}
        for (tenant, task, outcome, state, reason), durations in outcomes.items():
            attempts.setdefault((tenant, task, str(outcome)), []).extend(durations)
            ended = _ENDED_STATES.get(state) if state is not None else None
            if ended is not None:
                self.metrics.runs_ended(tenant, task, ended, reason, len(durations))
        for (tenant, task, outcome), durations in attempts.items():
            measured = [d for d in durations if d is not None]
            self.metrics.attempts_ended(tenant, task, outcome, len(durations), measured)
        for tenant, latencies in handoffs.items():
            self.metrics.steps_handed_off(tenant, latencies)
