"""What a worker tells the metrics (:class:`RunObserver`): starts (fire lag), outcomes
(attempt outcomes, run ends, durations), runs that did not start, misfire skips, workflow
step hand-offs (a step run's first start − its creation; retries and replays are no hand-off).
The worker calls it at those points; the completion listener it wraps sees every written
outcome (applied or stale).

Starts and outcomes are tallied in plain dictionaries on the hot path and handed to
Prometheus per batch (:meth:`RunObserver.flush`): the worker flushes after every completion
batch and on its summary tick, so a run's start and outcome are exported by the time its
outcome is written (and listeners called), at most one batch later than one by one."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

from duetime._types import Run, RunState
from duetime.metrics import Metrics, metrics
from duetime.store.base import ClaimedRun, RunCompletion
from duetime.worker.completer import CompletionListener
from duetime.workflows.definition import WorkflowRole, workflow_role

ALL = "_all"

_Labels = tuple[str, str]
"""(tenant, task)."""

_ENDED_STATES = {RunState.SUCCEEDED: "succeeded", RunState.DEAD: "dead"}


def step_handoff(run: Run, started_at: datetime) -> float | None:
    """Seconds from a workflow step run's creation (its parents allowed it) to its first
    start; None for a run that is no step's, a retry or a replay."""
    if run.attempt > 1 or run.replays or workflow_role(run) != "step":
        return None
    return (started_at - run.created_at).total_seconds()


class RunObserver:
    """Per-run bookkeeping for the worker's metrics; not thread-safe (the worker's loop)."""

    __slots__ = (
        "_ended",
        "_finished",
        "_handoffs",
        "_labels",
        "_outcomes",
        "_started",
        "_starts",
        "metrics",
    )

    def __init__(self, registry: Metrics | None = None) -> None:
        self.metrics = registry or metrics()
        # by the run id's integer (``UUID.int``): a UUID hashes in Python code, and each run
        # goes in and out of these three
        self._labels: dict[int, _Labels] = {}
        self._started: dict[int, float] = {}
        self._finished: dict[int, float] = {}
        self._starts: dict[_Labels, list[float]] = {}
        """Fire lags (seconds) of the starts not yet flushed, by labels."""
        self._outcomes: dict[tuple[str, str, str], list[float | None]] = {}
        """Durations (None: not measured) of the attempts ended and not yet flushed, by
        (tenant, task, outcome)."""
        self._ended: dict[tuple[str, str, str, str | None], int] = {}
        """Runs ended (succeeded or dead) and not yet flushed, by (tenant, task, state,
        reason)."""
        self._handoffs: dict[str, list[float]] = {}
        """Workflow step hand-offs (a step run's first start − its creation, which is when
        its parents allowed it) not yet flushed, by tenant."""

    def claimed(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        self._labels[run.id.int] = (run.tenant, run.task)

    def started(
        self, claimed: ClaimedRun, started_at: datetime | None, role: WorkflowRole | None
    ) -> None:
        """The run's attempt began (``role``: its ``workflow_role``, which the caller knows)."""
        run = claimed.run
        labels = (run.tenant, run.task)
        key = run.id.int
        self._labels[key] = labels
        self._started[key] = time.monotonic()
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

    def finished(self, run_id: uuid.UUID) -> None:
        """The attempt's outcome is known (its duration ends here)."""
        self._finished[run_id.int] = time.monotonic()

    def not_started(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        self.metrics.skipped(run.tenant, run.task, "not_started")

    def misfired(self, count: int) -> None:
        self.metrics.skipped(ALL, ALL, "misfire", count)

    def completed(self, completion: RunCompletion, applied: bool) -> None:
        run_key = completion.run_id.int
        tenant, task = self._labels.pop(run_key, (ALL, ALL))
        start = self._started.pop(run_key, None)
        end = self._finished.pop(run_key, None) or time.monotonic()
        duration = None if start is None or completion.started_at is None else end - start
        outcome = str(completion.outcome) if applied else "stale"
        key = (tenant, task, outcome)
        durations = self._outcomes.get(key)
        if durations is None:
            self._outcomes[key] = [duration]
        else:
            durations.append(duration)
        state = _ENDED_STATES.get(completion.next_state) if applied else None
        if state is not None:
            ended = (tenant, task, state, completion.reason)
            self._ended[ended] = self._ended.get(ended, 0) + 1

    def flush(self) -> None:
        """Hand the tallied starts and outcomes to Prometheus."""
        starts, self._starts = self._starts, {}
        outcomes, self._outcomes = self._outcomes, {}
        ended, self._ended = self._ended, {}
        handoffs, self._handoffs = self._handoffs, {}
        for (tenant, task), lags in starts.items():
            self.metrics.started_many(tenant, task, lags)
        for (tenant, task, outcome), durations in outcomes.items():
            measured = [d for d in durations if d is not None]
            self.metrics.attempts_ended(tenant, task, outcome, len(durations), measured)
        for (tenant, task, state, reason), count in ended.items():
            self.metrics.runs_ended(tenant, task, state, reason, count)
        for tenant, latencies in handoffs.items():
            self.metrics.steps_handed_off(tenant, latencies)

    def listener(self, then: CompletionListener | None) -> CompletionListener:
        """A completion listener that records the outcome, then calls ``then``."""

        def listen(completion: RunCompletion, applied: bool) -> None:
            self.completed(completion, applied)
            if then is not None:
                then(completion, applied)

        return listen
