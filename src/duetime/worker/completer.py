"""Writes attempt outcomes in batches with the fencing check, never losing one.

Completions queue up while a batch is being written; each write takes everything queued (up
to ``batch``). When fewer than ``batch`` are queued, the write first lingers ``linger`` seconds
for more: at a steady trickle of runs this turns a commit per run or two into one per linger
(the write-ahead log's flush and the round trip are per commit), at the price of outcomes
becoming visible up to ``linger`` later; on stop nothing lingers, nor does a batch holding a
workflow run's or a broker run's outcome (what follows it waits for the write: the next steps,
the message's publish). A failed write (database down) is retried with backoff, keeping its
batch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable

from duetime import _tracing
from duetime._aio import first_of
from duetime.store.base import RunCompletion, RunsCompleteParams, Store

log = logging.getLogger("duetime.worker")

CompletionListener = Callable[[RunCompletion, bool], None]
"""Called after each write with the completion and whether it was applied (False = stale)."""


REFUSED_TRIES = 3
"""Tries of a completion the database refuses (not unreachable) before it is dropped."""


class Completer:
    def __init__(
        self,
        store: Store,
        *,
        batch: int = 500,
        linger: float = 0.0,
        listener: CompletionListener | None = None,
        after_batch: Callable[[list[RunCompletion], list[bool]], None] | None = None,
    ) -> None:
        self.store = store
        self.batch = batch
        self.linger = linger
        self.listener = listener
        self.after_batch = after_batch
        """Called once a batch was written and its completions handed to ``listener``, with
        the batch and the answer per completion (one call a batch: per-run bookkeeping done
        in one loop there, not a call per completion)."""
        self._queue: deque[RunCompletion] = deque()
        """Submitted, not yet taken into a batch (a deque and an event: an ``asyncio.Queue``
        costs a wake-up check per item, and this takes one item per run)."""
        self._queued = asyncio.Event()
        """Set when a completion is queued (cleared by :meth:`run` before it waits)."""
        self._urgent = asyncio.Event()
        self._pending = 0
        self._writing: list[RunCompletion] = []
        """The batch being written (with :attr:`_queue`, every completion pending: the runs
        are read from both when asked, nothing is counted per run)."""

    def submit(self, completion: RunCompletion) -> None:
        self._pending += 1
        self._queue.append(completion)
        if not self._queued.is_set():
            self._queued.set()
        if completion.workflow is not None or completion.outbox is not None:
            # a workflow's next steps start with this write, a broker run's message is
            # published after it: it does not wait for company (decision 0040)
            self._urgent.set()

    def pending_runs(self) -> set[uuid.UUID]:
        """The runs whose outcome is waiting to be written."""
        return {c.run_id for c in self._queue} | {c.run_id for c in self._writing}

    @property
    def pending(self) -> int:
        """Completions submitted and not yet written."""
        return self._pending

    async def run(self, stop: asyncio.Event) -> None:
        """Write completions until ``stop`` is set and everything submitted has been written."""
        queue = self._queue
        while not (stop.is_set() and self._pending == 0):
            if not queue:  # (everything pending is queued here: a write is awaited below)
                self._queued.clear()
                await first_of(stop.wait(), self._queued.wait())
                continue
            batch = [queue.popleft()]
            if batch[0].workflow is not None or batch[0].outbox is not None:
                self._urgent.set()
            few = len(queue) + 1 < self.batch
            if self.linger > 0 and few and not self._urgent.is_set():
                await first_of(stop.wait(), self._urgent.wait(), asyncio.sleep(self.linger))
            self._urgent.clear()
            for _ in range(min(self.batch - 1, len(queue))):
                batch.append(queue.popleft())
            await self._write(batch)

    async def _apply(self, batch: list[RunCompletion]) -> list[bool]:
        """Write ``batch``; the answer per completion. While the database is unreachable it
        waits and retries. A batch the database refuses for what it holds (a value a column
        cannot take) is split in halves until the completion at fault is alone; that one is
        tried :data:`REFUSED_TRIES` times, then dropped (answered False) with an error logged:
        its run's lease runs out and the reaper decides, instead of every later completion of
        this worker waiting behind it."""
        delay, refused = 0.05, 0
        while True:
            try:
                with _tracing.span("duetime.complete", **{"duetime.runs": len(batch)}):
                    return await self.store.runs_complete(RunsCompleteParams(batch))
            except Exception as exc:
                if isinstance(exc, self.store.transient_errors):
                    log.warning(
                        "writing %d completions failed (%s); retrying in %.2fs",
                        len(batch), exc, delay,
                    )  # fmt: skip
                elif len(batch) > 1:
                    log.exception("writing %d completions failed; splitting it", len(batch))
                    half = len(batch) // 2
                    return await self._apply(batch[:half]) + await self._apply(batch[half:])
                else:
                    refused += 1
                    if refused >= REFUSED_TRIES:
                        log.exception(
                            "run %s: its outcome cannot be written; dropped (its lease runs "
                            "out and the reaper decides)",
                            batch[0].run_id,
                        )
                        return [False]
                    log.exception("writing the outcome of run %s failed", batch[0].run_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _write(self, batch: list[RunCompletion]) -> None:
        self._writing = batch
        applied = await self._apply(batch)
        self._writing = []
        self._pending -= len(batch)
        listener = self.listener
        for completion, ok in zip(batch, applied, strict=True):
            if ok and listener is None:
                continue
            if not ok:
                log.warning(
                    "run %s: attempt %d was stale (token %d); its outcome was refused",
                    completion.run_id,
                    completion.attempt,
                    completion.token,
                    extra={
                        "run_id": str(completion.run_id),
                        "attempt": completion.attempt,
                        "token": completion.token,
                    },
                )
            if listener is not None:
                listener(completion, ok)
        if self.after_batch is not None:
            self.after_batch(batch, applied)
