"""The worker's metrics bookkeeping (``RunObserver``) counts a batch of written outcomes at
once (issue 15): every attempt, run end and duration is counted exactly as one by one; a stale
outcome counts as ``stale`` and ends no run; an outcome whose attempt never began here has no
duration."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry
from tests.worker.test_completer import completion

from duetime._types import AttemptOutcome, RunState
from duetime.metrics import Metrics
from duetime.store.base import RunCompletion
from duetime.worker.run_metrics import RunObserver

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _value(m: Metrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


def _ended(outcome: AttemptOutcome, state: RunState, reason: str | None) -> RunCompletion:
    c = completion()
    return RunCompletion(
        run_id=c.run_id, token=1, worker_id="w", attempt=1, claimed_at=T0,
        started_at=T0 + timedelta(seconds=1), outcome=outcome, next_state=state, reason=reason,
    )  # fmt: skip


class _Run:
    """What :meth:`RunObserver.ending` reads of a run."""

    def __init__(self, run_id: uuid.UUID, tenant: str, task: str) -> None:
        self.id, self.tenant, self.task = run_id, tenant, task


def test_a_batch_is_counted_as_its_outcomes_one_by_one() -> None:
    m = Metrics(CollectorRegistry())
    observer = RunObserver(m)
    ok = [_ended(AttemptOutcome.SUCCEEDED, RunState.SUCCEEDED, None) for _ in range(3)]
    dead = _ended(AttemptOutcome.FAILED, RunState.DEAD, "permanent_error")
    stale = _ended(AttemptOutcome.SUCCEEDED, RunState.SUCCEEDED, None)
    never = completion()  # never began here (handed back): no duration
    batch = [*ok, dead, stale, never]
    for c in batch:
        began = None if c is never else 0.0
        observer.ending(_Run(c.run_id, "t", "k"), began)  # type: ignore[arg-type]
    observer.completed(batch, [True, True, True, True, False, True])
    observer.flush()
    attempts = "duetime_attempts_total"
    assert _value(m, attempts, tenant="t", task="k", outcome="succeeded") == 4
    assert _value(m, attempts, tenant="t", task="k", outcome="failed") == 1
    assert _value(m, attempts, tenant="t", task="k", outcome="stale") == 1
    assert _value(m, "duetime_runs_succeeded_total", tenant="t", task="k") == 4
    assert _value(m, "duetime_runs_dead_total", tenant="t", task="k", reason="permanent_error") == 1
    # durations of the attempts that began here: all but ``never``
    assert _value(m, "duetime_run_duration_seconds_count", tenant="t", task="k") == 5
    # nothing left waiting, nothing counted twice
    observer.completed([], [])
    observer.flush()
    assert _value(m, attempts, tenant="t", task="k", outcome="succeeded") == 4


def test_an_outcome_the_observer_was_not_told_of_counts_under_all() -> None:
    m = Metrics(CollectorRegistry())
    observer = RunObserver(m)
    observer.completed([completion()], [True])
    observer.flush()
    assert _value(m, "duetime_attempts_total", tenant="_all", task="_all", outcome="succeeded") == 1
