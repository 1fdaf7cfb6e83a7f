"""What a task receives about the run it executes, and what it can tell the worker back."""

from __future__ import annotations

import math
import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from duetime import _json
from duetime.errors import UsageError, ValidationError
from duetime.workflows.types import StepInputs

CHECKPOINT_LIMIT = 64 * 1024
"""Largest checkpoint, in bytes of JSON."""
PROGRESS_MESSAGE_LIMIT = 1000
"""Longest progress message, in characters."""


class RunHooks(Protocol):
    """The worker's side of a :class:`RunContext` (``duetime.worker.run_session.RunSession``).

    Every method but :meth:`flush` and :meth:`transaction` may be called from the worker's
    event loop (async tasks) or from a task thread (sync tasks)."""

    @property
    def cancelled(self) -> bool: ...
    def progress(self, fraction: float, message: str | None) -> None: ...
    def checkpoint(self, encoded: str) -> None: ...
    def heartbeat(self) -> None: ...
    async def flush(self) -> bool: ...
    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


@dataclass(frozen=True, slots=True)
class RunContext:
    """Handed to every task call.

    ``run_id`` is the idempotency key: the same for every attempt of one run, so a handler
    that dedupes on it applies its effect once even though delivery is at-least-once.
    ``token`` is the fencing token of this attempt; pass it to systems that can fence writes.
    ``last_checkpoint`` is the latest checkpoint an earlier attempt of this run saved (None if
    none did): resume from it.

    A call that misuses this API (a progress outside 0-1, a checkpoint that is not JSON,
    :meth:`transaction` outside an async exactly-once task) raises
    :class:`~duetime.errors.UsageError`, which ends the run ``dead`` on its first attempt.

    Long runs report back through :meth:`progress` and :meth:`checkpoint` and watch
    :attr:`cancelled`; exactly-once jobs write their effect through :meth:`transaction`. These
    work in async tasks and in sync tasks (which run in a thread) alike, except
    :meth:`transaction`, which needs an async task. A context built by hand (in a unit test
    of a task) has no worker behind it: progress and checkpoints are validated, then dropped.
    """

    run_id: uuid.UUID
    job_id: uuid.UUID
    job_name: str
    tenant: str
    task: str
    scheduled_for: datetime
    attempt: int
    max_attempts: int
    token: int
    worker_id: str
    payload: Any
    last_checkpoint: Any = None
    hooks: RunHooks | None = field(default=None, repr=False, compare=False)
    workflow: StepInputs | None = None
    """For a workflow step's run: its instance, step, map index, the instance's input and
    its parents' results (``ctx.workflow.parents["extract"]``); None for a job's run."""

    @property
    def parents(self) -> dict[str, Any]:
        """A step's parents' results by step name (empty for a job's run)."""
        return {} if self.workflow is None else self.workflow.parents

    @property
    def idempotency_key(self) -> str:
        return str(self.run_id)

    @property
    def cancelled(self) -> bool:
        """True once this attempt should stop: the run was cancelled, its lease was lost (another
        attempt may own the run now; this one's writes change nothing), it timed out, or the
        worker is shutting down and handing it back. Seen at the next heartbeat at the latest.
        An async task is also cancelled (``CancelledError``); a sync task must poll this."""
        return self.hooks is not None and self.hooks.cancelled

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the attempt got: ``fraction`` from 0 to 1, and an optional message
        (up to 1000 characters). Returns at once; the latest value is written to the run
        (``Run.progress``) in the background, fenced by this attempt's token."""
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not math.isfinite(fraction)
            or not 0 <= fraction <= 1
        ):
            raise UsageError("progress", f"must be a number from 0 to 1, got {fraction!r}")
        if message is not None and (
            not isinstance(message, str) or len(message) > PROGRESS_MESSAGE_LIMIT
        ):
            raise UsageError(
                "progress message", f"must be a string of at most {PROGRESS_MESSAGE_LIMIT} chars"
            )
        if self.hooks is not None:
            self.hooks.progress(float(fraction), message)

    def checkpoint(self, data: Any) -> None:
        """Save ``data`` (JSON, at most 64 KiB) for the next attempt of this run, which receives
        it as ``ctx.last_checkpoint``. Fenced by this attempt's token: a stale attempt's
        checkpoint changes nothing (and sets :attr:`cancelled`).

        In a sync task the call returns once the checkpoint is stored. In an async task it
        returns at once and the write happens in the background; ``await ctx.flush()`` waits
        for it. Either way every checkpoint is stored before the attempt's outcome is written.
        Raises UsageError for data that is not JSON or is too large."""
        try:
            encoded = _json.encode_payload(data, limit=CHECKPOINT_LIMIT, field="checkpoint")
        except ValidationError as exc:
            raise UsageError(exc.field, exc.reason) from None
        if self.hooks is not None:
            self.hooks.checkpoint(encoded)

    async def flush(self) -> bool:
        """Wait until every progress report and checkpoint so far is written (async tasks).
        False if any was refused because this attempt is stale."""
        return True if self.hooks is None else await self.hooks.flush()

    def heartbeat(self) -> None:
        """Extend this attempt's lease now. Not needed: the worker heartbeats every run it holds
        every ``heartbeat_interval``; this only asks for one early."""
        if self.hooks is not None:
            self.hooks.heartbeat()

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """For ``exactly_once`` jobs (PostgreSQL), in async tasks::

            async with ctx.transaction() as conn:  # a psycopg AsyncConnection
                await conn.execute("INSERT INTO ledger ...", (...))

        The writes commit atomically with this attempt's successful completion, or not at all:
        they are rolled back if the task fails, times out or is cancelled, or if the attempt
        turns out stale (its run was taken over). Every block of one attempt shares one
        transaction; an exception leaving a block undoes that block's writes. Use the same
        database as duetime; do not commit or roll back on the connection yourself."""
        if self.hooks is None:
            raise UsageError("ctx.transaction()", "needs a worker: this context has none")
        return self.hooks.transaction()
