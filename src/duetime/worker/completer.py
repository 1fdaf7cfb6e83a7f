"""Writes attempt outcomes in batches with the fencing check, never losing one.

Completions queue up while a batch is being written; each write takes everything queued (up
to ``batch``). When fewer than ``batch`` are queued, the write first lingers ``linger`` seconds
for more: at a steady trickle of runs this turns a commit per run or two into one per linger
(the write-ahead log's flush and the round trip are per commit), at the price of outcomes
becoming visible up to ``linger`` later; on stop nothing lingers. A failed write (database
down) is retried with backoff, keeping its batch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
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
        after_batch: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.batch = batch
        self.linger = linger
        self.listener = listener
        self.after_batch = after_batch
        """Called once a batch was written and its completions handed to ``listener``."""
        self._queue: asyncio.Queue[RunCompletion] = asyncio.Queue()
        self._urgent = asyncio.Event()
        self._pending = 0
        self._pending_runs: Counter[uuid.UUID] = Counter()

    def submit(self, completion: RunCompletion) -> None:
        self._pending += 1
        self._pending_runs[completion.run_id] += 1
        self._queue.put_nowait(completion)
        if completion.workflow is not None:
            # a workflow's next steps start with this write: it does not wait for company
            self._urgent.set()

    def pending_runs(self) -> set[uuid.UUID]:
        """The runs whose outcome is waiting to be written."""
        return set(self._pending_runs)

    @property
    def pending(self) -> int:
        """Completions submitted and not yet written."""
        return self._pending

    async def run(self, stop: asyncio.Event) -> None:
        """Write completions until ``stop`` is set and everything submitted has been written."""
        while not (stop.is_set() and self._pending == 0):
            if self._queue.empty():
                getter = asyncio.ensure_future(self._queue.get())
                stopper = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if getter not in done:
                    getter.cancel()
                    continue
                batch = [getter.result()]
            else:
                batch = [self._queue.get_nowait()]
            if batch[0].workflow is not None:
                self._urgent.set()
            few = self._queue.qsize() + 1 < self.batch
            if self.linger > 0 and few and not self._urgent.is_set():
                await first_of(stop.wait(), self._urgent.wait(), asyncio.sleep(self.linger))
            self._urgent.clear()
            while len(batch) < self.batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
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
        applied = await self._apply(batch)
        self._pending -= len(batch)
        self._pending_runs.subtract(c.run_id for c in batch)
        self._pending_runs += Counter()  # drop the zeros
        for completion, ok in zip(batch, applied, strict=True):
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
            if self.listener is not None:
                self.listener(completion, ok)
        if self.after_batch is not None:
            self.after_batch()
