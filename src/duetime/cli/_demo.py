"""``duetime up --demo``: a few demo jobs, and a line printed as each of their runs starts and
ends."""

from __future__ import annotations

import logging
from datetime import timedelta

import typer

from duetime._types import RetryPolicy as Retry
from duetime._types import RunState
from duetime.app import AsyncApp, ClaimedRun, RunCompletion

DEMO_RETRY = Retry(max_attempts=3, backoff_base=0.5, backoff_factor=2.0, backoff_cap=2.0)


class _DemoFailuresInOneLine(logging.Filter):
    """The demo's jobs fail on purpose and the console already says so: their WARNING lines
    keep one line, without the traceback (`duetime runs show` still has it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and type(record.exc_info[1]).__name__ == "DemoFailure":
            record.exc_info = None
        return True


def quiet_demo_failures() -> None:
    """Install :class:`_DemoFailuresInOneLine` on the worker's logger (idempotent)."""
    worker_log = logging.getLogger("duetime.worker")
    if not any(isinstance(f, _DemoFailuresInOneLine) for f in worker_log.filters):
        worker_log.addFilter(_DemoFailuresInOneLine())


async def register_demo(app: AsyncApp) -> None:
    """Demo jobs; re-registering them on the same database is safe (create-or-update): the
    one-shots are declared as delays, so a restart keeps their instants and those that ran do
    not run again (no second dead letter)."""
    quiet_demo_failures()
    await app.schedule("demo.every-2s", task="duetime.noop", every=2)
    await app.schedule("demo.one-shot", task="duetime.noop", at=timedelta(seconds=3))
    # One-shots one second out: declared again unchanged, they keep their first instant.
    await app.schedule(
        "demo.flaky",
        task="duetime.fail",
        at=timedelta(seconds=1),
        payload={"times": 2},
        retry=DEMO_RETRY,
    )
    await app.schedule(
        "demo.doomed",
        task="duetime.fail",
        at=timedelta(seconds=1),
        payload={"always": True},
        retry=Retry(max_attempts=2, backoff_base=0.5, backoff_cap=1.0),
    )
    typer.echo(
        "demo jobs: demo.every-2s (every 2 s), demo.one-shot (in 3 s), demo.flaky "
        "(fails twice, then succeeds), demo.doomed (always fails → dead-letter queue)"
    )


def print_start(claimed: ClaimedRun) -> None:
    run = claimed.run
    typer.echo(f"  ▶ {run.job_name:<16} run {str(run.id)[:8]} attempt {run.attempt} started")


def print_completion(completion: RunCompletion, applied: bool) -> None:
    if not applied:
        typer.echo(f"  ! run {str(completion.run_id)[:8]} stale attempt refused")
        return
    state = completion.next_state
    short = str(completion.run_id)[:8]
    if state is RunState.SUCCEEDED:
        typer.echo(f"  ✓ run {short} succeeded (attempt {completion.attempt})")
    elif state is RunState.SCHEDULED and completion.reason is None:
        typer.echo(f"  ↻ run {short} failed ({completion.error_message}); retry scheduled")
    elif state is RunState.DEAD:
        typer.echo(
            f"  ✗ run {short} is dead ({completion.reason}: {completion.error_message}) "
            "→ dead-letter queue (`duetime dlq list`)"
        )
