"""``run_task``: one task body called as a worker calls it, with a :class:`RunContext` whose
progress, checkpoints and heartbeats are recorded for the test to inspect. No store is touched:
to see a task through the database (retries, stored checkpoints), schedule it and ``drain``."""

from __future__ import annotations

import contextlib
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from duetime import _json
from duetime.app import AsyncApp
from duetime.errors import UsageError
from duetime.targets.context import RunContext
from duetime.targets.python import invoke


@dataclass
class RecordedHooks:
    """What a task reported through its test :class:`RunContext`, in order. ``cancelled`` may
    be set by the test before the call (a task that checks ``ctx.cancelled`` stops)."""

    cancelled: bool = False
    progress: list[tuple[float, str | None]] = field(default_factory=list)
    """Every ``ctx.progress(fraction, message)``."""
    checkpoints: list[Any] = field(default_factory=list)
    """Every ``ctx.checkpoint(data)``, as the next attempt would read it back (JSON)."""
    heartbeats: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


class _Hooks:
    """The ``RunHooks`` (duetime.targets.context) of a test context: they record into a
    :class:`RecordedHooks`. Called from the event loop or from a sync task's thread."""

    def __init__(self, record: RecordedHooks) -> None:
        self.record = record

    @property
    def cancelled(self) -> bool:
        return self.record.cancelled

    def progress(self, fraction: float, message: str | None) -> None:
        with self.record.lock:
            self.record.progress.append((fraction, message))

    def checkpoint(self, encoded: str) -> None:
        with self.record.lock:
            self.record.checkpoints.append(_json.loads(encoded))

    def heartbeat(self) -> None:
        with self.record.lock:
            self.record.heartbeats += 1

    async def flush(self) -> bool:
        return True

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise UsageError(
            "ctx.transaction()",
            "needs a worker and a database: schedule the exactly_once job and drain() it",
        )


@dataclass(frozen=True)
class TaskCall:
    """What :func:`run_task` saw: the task's return value, the context it was given, and what
    it reported through it (``hooks.progress``, ``hooks.checkpoints``, ``hooks.heartbeats``)."""

    result: Any
    ctx: RunContext
    hooks: RecordedHooks

    @property
    def progress(self) -> list[tuple[float, str | None]]:
        return self.hooks.progress

    @property
    def checkpoints(self) -> list[Any]:
        return self.hooks.checkpoints


async def run_task(
    app: AsyncApp,
    task: str,
    payload: Any = None,
    *,
    attempt: int = 1,
    max_attempts: int = 3,
    last_checkpoint: Any = None,
    job_name: str = "test",
    scheduled_for: datetime | None = None,
    hooks: RecordedHooks | None = None,
) -> TaskCall:
    """Call the task registered as ``task`` in ``app`` the way a worker does (``fn(ctx,
    payload)``, ``fn(ctx)`` or ``fn()``; a sync task in a thread) with a :class:`RunContext`
    of attempt ``attempt`` of ``max_attempts``, ``last_checkpoint`` as an earlier attempt's
    checkpoint, ``scheduled_for`` (default: the app clock's now) and fresh run and job ids.
    What the task raises propagates; ``ctx.transaction()`` raises UsageError (it needs a worker).
    Raises LookupError, naming the registered tasks, for an unknown ``task``."""
    found = app.registry.get(task)
    if found is None:
        known = ", ".join(n for n in app.registry.names() if not n.startswith("duetime."))
        raise LookupError(f"task {task!r} is not registered in this app (registered: {known})")
    record = hooks or RecordedHooks()
    ctx = RunContext(
        run_id=uuid.uuid4(),
        job_id=uuid.uuid4(),
        job_name=job_name,
        tenant=app.tenant,
        task=task,
        scheduled_for=scheduled_for or app.clock.now(),
        attempt=attempt,
        max_attempts=max_attempts,
        token=attempt,
        worker_id="duetime.testing",
        payload=payload,
        last_checkpoint=last_checkpoint,
        hooks=_Hooks(record),
    )
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duetime-test-task")
    try:  # a sync task in a thread of its own, as the worker runs it
        result = await invoke(found, ctx, pool)
    finally:
        pool.shutdown(wait=False)
    return TaskCall(result=result, ctx=ctx, hooks=record)
