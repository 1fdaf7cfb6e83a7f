"""Helpers for the CLI tests: the in-process runner type, the usage-error check, and dead runs
made through the store (no worker, no sleeps)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from typer.testing import Result

from duetime._types import AttemptOutcome, RunState
from duetime.app import AsyncApp
from duetime.store.base import RunCompletion, RunsClaimParams, RunsCompleteParams
from duetime.worker.retry import traceback_text

DOOMED_TASK = "tests.doomed"

Invoke = Callable[..., Result]


def _traceback_of(error: str) -> str:
    """What a worker stores for a task ``doomed_task`` that raised ``DemoFailure(error)``."""

    class DemoFailure(Exception):
        pass

    def doomed_task() -> None:
        raise DemoFailure(error)

    try:
        doomed_task()
    except DemoFailure as exc:
        return traceback_text(exc)
    raise AssertionError("unreachable")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def assert_usage_error(result: Result, *needles: str) -> None:
    """Exit code 2, ``error: …`` on stderr naming what is wrong, nothing on stdout, no
    traceback."""
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


@dataclass
class DeadRuns:
    """Make dead runs of a job straight through the store, as a worker whose attempts failed
    for good would."""

    db: str
    tenant: str = "default"

    def make(self, job: str, count: int = 1, *, error: str = "boom") -> list[uuid.UUID]:
        return asyncio.run(self._make(job, count, error))

    async def _make(self, job: str, count: int, error: str) -> list[uuid.UUID]:
        async with AsyncApp(self.db, tenant=self.tenant) as app:
            found = await app.schedule(
                job,
                task=DOOMED_TASK,
                cron="0 0 1 1 *",
                overlap="allow",
                allow_unregistered=True,
            )
            for _ in range(count):
                await app.trigger(found.id)
            claimed = await app.store.runs_claim(
                RunsClaimParams(
                    worker_id="worker-test",
                    tasks=[DOOMED_TASK],
                    limit=count,
                    lease_ttl=30.0,
                    lookahead=0.0,
                )
            )
            assert len(claimed) == count
            completions = [
                RunCompletion(
                    run_id=c.run.id,
                    token=c.run.token,
                    worker_id="worker-test",
                    attempt=c.run.attempt,
                    claimed_at=c.run.claimed_at,
                    started_at=c.run.started_at,
                    outcome=AttemptOutcome.FAILED,
                    next_state=RunState.DEAD,
                    reason="attempts_exhausted",
                    error_class="DemoFailure",
                    error_message=error,
                    traceback=_traceback_of(error),
                )
                for c in claimed
            ]
            applied = await app.store.runs_complete(RunsCompleteParams(completions))
            assert all(applied)
            return [c.run.id for c in claimed]
