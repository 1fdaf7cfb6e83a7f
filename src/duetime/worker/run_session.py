"""The worker's side of one attempt's :class:`~duetime.targets.context.RunContext`.

A :class:`RunSession` lives as long as one attempt. It
- writes progress and checkpoints to the run, fenced by the attempt's token: each kind through
  one writer that always writes the latest value (a burst of reports becomes a few writes), and
  retries while the database is unreachable;
- holds the cancel flag (``ctx.cancelled``), raised by the worker (cancel requested, lease lost,
  timeout, shutdown) or by a refused write (the attempt is stale);
- holds an exactly-once attempt's open transaction (``ctx.transaction``), begun on first use.

Tasks call it from the worker's event loop (async tasks) or from a task thread (sync tasks);
calls from a thread hop to the loop with ``call_soon_threadsafe`` / ``run_coroutine_threadsafe``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, TypeVar

from duetime._types import DeliveryMode, Run
from duetime.errors import UsageError
from duetime.store.base import (
    ExactlyOnceTx,
    RunCheckpointParams,
    RunCompletion,
    RunProgressParams,
    Store,
)

log = logging.getLogger("duetime.worker")

T = TypeVar("T")


class _LatestWriter(Generic[T]):
    """Writes the latest submitted value, one write at a time; waiters learn whether the write
    that covered their value was applied. Once a write is refused (stale attempt) every later
    one is refused without a round trip: the token never comes back."""

    def __init__(
        self,
        name: str,
        write: Callable[[T], Awaitable[bool]],
        *,
        transient: tuple[type[BaseException], ...],
        give_up_after: float,
        on_refused: Callable[[], None],
    ) -> None:
        self.name = name
        self._write = write
        self._transient = transient
        self._give_up_after = give_up_after
        self._on_refused = on_refused
        self._value: T | None = None
        self._seq = 0
        self._written = 0
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._task: asyncio.Task[None] | None = None
        self.refused = False

    def submit(self, value: T) -> int:
        self._seq += 1
        self._value = value
        if self.refused:
            self._written = self._seq
        elif self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"duetime-{self.name}-writer")
        return self._seq

    async def wait(self, seq: int | None = None) -> bool:
        """Until the value numbered ``seq`` (default: the latest) is written; False if refused."""
        if self.refused:
            return False
        target = self._seq if seq is None else seq
        if self._written >= target:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        return await future

    async def _run(self) -> None:
        while self._written < self._seq and not self.refused:
            seq, value = self._seq, self._value
            applied = await self._write_retrying(value)  # type: ignore[arg-type]
            self._written = seq
            if not applied:
                self.refused = True
                self._written = self._seq  # nothing later will be written either
                self._on_refused()
            self._resolve(seq, applied)
        self._resolve(self._seq, not self.refused)

    def _resolve(self, upto: int, applied: bool) -> None:
        keep = []
        for seq, future in self._waiters:
            if seq <= upto:
                if not future.done():
                    future.set_result(applied)
            else:
                keep.append((seq, future))
        self._waiters = keep

    async def _write_retrying(self, value: T) -> bool:
        delay, deadline = 0.05, time.monotonic() + self._give_up_after
        while True:
            try:
                return await self._write(value)
            except self._transient as exc:
                if time.monotonic() + delay > deadline:
                    log.error(
                        "%s write failed for %.0fs; giving up: %s",
                        self.name,
                        self._give_up_after,
                        exc,
                    )
                    return False
                log.warning("%s write failed (%s); retrying in %.2fs", self.name, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception:
                log.exception("%s write failed", self.name)
                return False

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.refused = True
        self._resolve(self._seq, False)


class RunSession:
    """What a :class:`RunContext` of one attempt reports to (its ``hooks``)."""

    def __init__(
        self,
        store: Store,
        run: Run,
        *,
        delivery: DeliveryMode,
        loop: asyncio.AbstractEventLoop,
        lease_ttl: float,
        request_heartbeat: Callable[[], None],
    ) -> None:
        # keyword-only parameters stored as attributes: constructor boilerplate, nothing shared
        self.store = store
        self.run = run
        self.delivery = delivery
        self._loop = loop
        self._request_heartbeat = request_heartbeat
        self._lease_ttl = lease_ttl

    # what an attempt starts with, set on the instance when it changes (a session is made per
    # attempt, and most attempts report nothing)
    _cancelled = False
    """A plain flag, set from the loop and read from a task thread: a cancel is seen at the
    task's next look, which is all ctx.cancelled promises."""
    _closed = False
    _tx: ExactlyOnceTx | None = None
    _tx_lock: asyncio.Lock | None = None
    _progress_writer: _LatestWriter[tuple[float, str | None]] | None = None
    """Made on first use, as the checkpoint's."""
    _checkpoint_writer: _LatestWriter[str] | None = None

    @property
    def _wait_limit(self) -> float:
        return 2 * self._lease_ttl

    @property
    def idle(self) -> bool:
        """Nothing was reported and no transaction opened: ending the attempt needs no I/O."""
        writers = self._progress_writer is None and self._checkpoint_writer is None
        return writers and self._tx is None

    def _writer(self, name: str, write: Callable[[Any], Awaitable[bool]]) -> _LatestWriter[Any]:
        return _LatestWriter(
            name,
            write,
            transient=self.store.transient_errors,
            give_up_after=self._lease_ttl,
            on_refused=self._refused,
        )

    @property
    def _progress(self) -> _LatestWriter[tuple[float, str | None]]:
        if self._progress_writer is None:
            self._progress_writer = self._writer("progress", self._write_progress)
        return self._progress_writer

    @property
    def _checkpoint(self) -> _LatestWriter[str]:
        if self._checkpoint_writer is None:
            self._checkpoint_writer = self._writer("checkpoint", self._write_checkpoint)
        return self._checkpoint_writer

    # --- called by the task (any thread) ---------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def progress(self, fraction: float, message: str | None) -> None:
        self._on_loop_soon(self._submit_progress, (fraction, message))

    def checkpoint(self, encoded: str) -> None:
        if self._in_loop():
            if self._closed:
                self._refused()
                return
            self._checkpoint.submit(encoded)
            return
        # a sync task: return once stored, as sync code expects
        try:
            future = asyncio.run_coroutine_threadsafe(self._checkpoint_wait(encoded), self._loop)
        except RuntimeError:  # the worker's loop is gone: this thread was abandoned
            self._cancelled = True
            return
        try:  # bounded: writes give up after a lease; a stopped loop never answers
            future.result(timeout=self._wait_limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self._cancelled = True

    def heartbeat(self) -> None:
        self._on_loop_soon(self._request_heartbeat)

    async def flush(self) -> bool:
        progress = True if self._progress_writer is None else await self._progress_writer.wait()
        checkpoint = (
            True if self._checkpoint_writer is None else await self._checkpoint_writer.wait()
        )
        return progress and checkpoint

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.delivery is not DeliveryMode.EXACTLY_ONCE:
            raise UsageError(
                "ctx.transaction()",
                f"is for exactly_once jobs; job {self.run.job_name!r} is {self.delivery}",
            )
        if not self._in_loop():
            raise UsageError(
                "ctx.transaction()",
                "needs an async task; a sync task runs in a thread and cannot share the "
                "worker's transaction (make the task `async def`)",
            )
        return self._transaction()

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Any]:
        if self._closed:
            raise UsageError("ctx.transaction()", "this attempt has ended; its transaction is gone")
        if self._tx_lock is None:
            self._tx_lock = asyncio.Lock()
        async with self._tx_lock:
            if self._tx is None:
                self._tx = await self.store.exactly_once_begin()
        async with self._tx.block() as conn:
            yield conn

    # --- called by the worker (on its loop) ------------------------------------------------

    def signal_cancel(self) -> None:
        """Raise ``ctx.cancelled``; the task should stop."""
        self._cancelled = True

    @property
    def in_transaction(self) -> bool:
        return self._tx is not None

    async def commit(self, completion: RunCompletion) -> bool:
        """Write ``completion`` in the exactly-once transaction and commit (see
        :meth:`ExactlyOnceTx.complete`)."""
        assert self._tx is not None
        tx, self._tx = self._tx, None
        return await tx.complete(completion)

    async def close(self) -> None:
        """The attempt is over: stop the writers, roll back an uncommitted transaction."""
        self.close_writers()
        if self._tx is not None:
            tx, self._tx = self._tx, None
            await tx.rollback()

    def close_writers(self) -> None:
        """Stop the writers (nothing more is written for this attempt); no I/O."""
        self._closed = True
        if self._progress_writer is not None:
            self._progress_writer.close()
        if self._checkpoint_writer is not None:
            self._checkpoint_writer.close()

    # --- internals -------------------------------------------------------------------------

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _on_loop_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._in_loop():
            if not self._closed:
                fn(*args)
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: an abandoned thread
            self._loop.call_soon_threadsafe(lambda: None if self._closed else fn(*args))

    def _submit_progress(self, value: tuple[float, str | None]) -> None:
        self._progress.submit(value)  # on the loop: the writer is made there

    async def _checkpoint_wait(self, encoded: str) -> bool:
        if self._closed:
            self._refused()
            return False
        return await self._checkpoint.wait(self._checkpoint.submit(encoded))

    def _refused(self) -> None:
        if not self._cancelled:
            log.warning(
                "run %s: a write of attempt %d (token %d) was refused; the attempt is stale",
                self.run.id,
                self.run.attempt,
                self.run.token,
            )
        self._cancelled = True
        self._request_heartbeat()

    async def _write_progress(self, value: tuple[float, str | None]) -> bool:
        fraction, message = value
        return await self.store.run_progress_set(
            RunProgressParams(self.run.id, self.run.token, fraction, message)
        )

    async def _write_checkpoint(self, encoded: str) -> bool:
        return await self.store.run_checkpoint_set(
            RunCheckpointParams(self.run.id, self.run.token, encoded)
        )
