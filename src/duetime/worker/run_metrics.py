"""What a worker tells the metrics (:class:`RunObserver`): starts (fire lag), outcomes
(attempt outcomes, run ends, durations), runs that did not start, misfire skips. The worker
calls it at those points; the completion listener it wraps sees every written outcome
(applied or stale)."""

from __future__ import annotations

import time
import uuid
from datetime import datetime

from duetime._types import RunState
from duetime.metrics import Metrics, metrics
from duetime.store.base import ClaimedRun, RunCompletion
from duetime.worker.completer import CompletionListener

ALL = "_all"


class RunObserver:
    def __init__(self, registry: Metrics | None = None) -> None:
        self.metrics = registry or metrics()
        self._labels: dict[uuid.UUID, tuple[str, str]] = {}
        self._started: dict[uuid.UUID, float] = {}
        self._finished: dict[uuid.UUID, float] = {}

    def claimed(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        self._labels[run.id] = (run.tenant, run.task)

    def started(self, claimed: ClaimedRun, started_at: datetime | None) -> None:
        run = claimed.run
        self._labels[run.id] = (run.tenant, run.task)
        self._started[run.id] = time.monotonic()
        due = run.scheduled_for if run.attempt <= 1 else run.available_at
        self.metrics.started(run.tenant, run.task, due, started_at or run.available_at)

    def finished(self, run_id: uuid.UUID) -> None:
        """The attempt's outcome is known (its duration ends here)."""
        self._finished[run_id] = time.monotonic()

    def not_started(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        self.metrics.skipped(run.tenant, run.task, "not_started")

    def misfired(self, count: int) -> None:
        self.metrics.skipped(ALL, ALL, "misfire", count)

    def completed(self, completion: RunCompletion, applied: bool) -> None:
        run_id = completion.run_id
        tenant, task = self._labels.pop(run_id, (ALL, ALL))
        start = self._started.pop(run_id, None)
        end = self._finished.pop(run_id, None) or time.monotonic()
        duration = None if start is None or completion.started_at is None else end - start
        outcome = str(completion.outcome) if applied else "stale"
        self.metrics.attempt_ended(tenant, task, outcome, duration)
        if applied and completion.next_state in (RunState.SUCCEEDED, RunState.DEAD):
            self.metrics.run_ended(tenant, task, str(completion.next_state), completion.reason)

    def listener(self, then: CompletionListener | None) -> CompletionListener:
        """A completion listener that records the outcome, then calls ``then``."""

        def listen(completion: RunCompletion, applied: bool) -> None:
            self.completed(completion, applied)
            if then is not None:
                then(completion, applied)

        return listen
