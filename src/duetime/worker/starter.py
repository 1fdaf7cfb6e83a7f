"""Writes the starts of runs claimed ahead in batches: one ``runs_start`` for every run whose
instant came while the previous batch was being written.

A worker asks for a run's start :meth:`Starter.lead` seconds before the run's instant (twice
the recent time a request took to be answered) and waits for the instant before calling the
task: the start is written by then, and the task is called at the instant itself
(prefetch-and-wait). The store stamps such a run ``started_at`` = its instant.

A run's task asks ``await starter.start(run_id, token, tenant)`` at the run's instant and learns
whether the run started (False: it must not run here). A write that fails because the database
is unreachable (``store.transient_errors``) is retried with backoff, keeping its batch but for
the runs whose task was cancelled meanwhile (lease lost, shutdown). After a failed try, a run
the retry did not start may have been started by that try (its answer was lost): it is read
back, and counts as started when it is ``running`` with its token and a ``started_at``. Another
error is tried again run by run, and then raised to the run's task.

Stopping: requests not yet written are answered False; a batch being written is finished, but
its retries end (the runs whose start is still unknown are answered False). Every request is
answered, so no run's task waits forever.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from duetime import _tracing
from duetime._aio import first_of, wait_or_stop
from duetime._types import RunState
from duetime.store.base import RunsStartParams, Store

log = logging.getLogger("duetime.worker")

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class _Request:
    run_id: uuid.UUID
    token: int
    tenant: str
    answer: asyncio.Future[bool]
    unsure: bool = False
    """A try that held this run failed: it may have started it (its answer was lost)."""


class Stopped(Exception):
    """Stop was requested while waiting for the database (raised by :func:`retrying`)."""


MIN_LEAD = 0.05
"""Seconds ahead of its instant a run's start is asked for at the least. A start's answer
usually takes a few milliseconds, but under CPU contention single answers take tens; the
recent maximum reacts only after such a spike, so the floor covers the spikes."""

LEAD_MEMORY = 5.0
"""Seconds over which the memory of a slow start request halves (see :meth:`Starter.lead`)."""

ASK_TICK = 0.01
"""Asks for starts are aligned to this grid of the event loop's clock (see
:meth:`Starter.ask_delay`)."""


class Starter:
    def __init__(
        self,
        store: Store,
        *,
        batch: int = 500,
        lease_ttl: float | None = None,
        max_lead: float = 0.25,
    ) -> None:
        self.store = store
        self.batch = batch
        self.lease_ttl = lease_ttl
        """Each run that starts gets a lease this long from its start (None: kept as it is)."""
        self.max_lead = max_lead
        self._queue: deque[_Request] = deque()
        self._queued = asyncio.Event()
        self._closed = False
        self._slowest = 0.0
        self._slowest_at = 0.0

    def lead(self) -> float:
        """How long before a run's instant to ask for its start, so that the start is written
        by then: twice the slowest request (queueing included), the memory of a slow one
        halving every :data:`LEAD_MEMORY` seconds — a spike is expected again for a while —
        between :data:`MIN_LEAD` and ``max_lead`` seconds (``max_lead`` wins if smaller)."""
        return min(self.max_lead, max(MIN_LEAD, 2 * self._slowest))

    def _observe(self, latency: float, now: float) -> None:
        faded = self._slowest * 0.5 ** ((now - self._slowest_at) / LEAD_MEMORY)
        self._slowest = max(latency, faded)
        self._slowest_at = now

    def ask_delay(self, until_instant: float, now: float | None = None) -> float:
        """How long to wait before asking for the start of a run whose instant is
        ``until_instant`` seconds away: until :meth:`lead` before it, rounded down to
        :data:`ASK_TICK` of the loop's clock, so runs whose instants are close ask in the same
        loop iteration and share one batch (one commit), and the process wakes once per tick
        rather than once per run. Zero or negative: ask now. ``now``: the loop's clock (read
        when not given)."""
        if now is None:
            now = asyncio.get_running_loop().time()
        ask_at = now + until_instant - self.lead()
        return math.floor(ask_at / ASK_TICK) * ASK_TICK - now

    async def start(self, run_id: uuid.UUID, token: int, tenant: str) -> bool:
        """Start the run (claimed ahead with ``token``) with the next batch: True if it started
        and is ours to run. Cancelling the caller leaves the run out if not yet written."""
        if self._closed:
            return False
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bool] = loop.create_future()
        self._queue.append(_Request(run_id, token, tenant, answer))
        self._queued.set()
        asked = loop.time()
        started = await answer
        answered = loop.time()
        self._observe(answered - asked, answered)
        return started

    @property
    def pending(self) -> int:
        """Start requests waiting for the next batch."""
        return len(self._queue)

    async def run(self, stop: asyncio.Event) -> None:
        """Write start batches until ``stop`` is set; then answer what is left with False."""
        try:
            while not stop.is_set():
                if not self._queue:
                    self._queued.clear()
                    await first_of(stop.wait(), self._queued.wait())
                    continue
                batch: list[_Request] = []
                while self._queue and len(batch) < self.batch:
                    request = self._queue.popleft()
                    if not request.answer.done():  # else its task was cancelled meanwhile
                        batch.append(request)
                if batch:
                    await self._write(batch, stop)
        finally:
            self._closed = True
            while self._queue:
                _answer(self._queue.popleft().answer, False)

    async def _write(self, batch: list[_Request], stop: asyncio.Event) -> None:
        try:
            try:
                answers = await self._try(batch, stop)
            except Stopped:
                return
            except Exception as exc:
                if len(batch) > 1:  # not the database being down: one run may be the cause
                    log.warning(
                        "starting %d runs failed (%s); starting them one by one", len(batch), exc
                    )
                    for request in batch:
                        await self._write([request], stop)
                    return
                _fail(batch[0].answer, exc)
                return
            for request, started in answers:
                _answer(request.answer, started)
        finally:
            for request in batch:  # those left unanswered: stopped, or the starter failed
                _answer(request.answer, False)

    async def _try(self, batch: list[_Request], stop: asyncio.Event) -> list[tuple[_Request, bool]]:
        """Write the batch until it is written: each request and whether its run started."""
        delay = 0.05
        while True:
            batch = [r for r in batch if not r.answer.done()]
            if not batch:
                return []
            try:
                runs = [(r.run_id, r.token) for r in batch]
                with _tracing.span("duetime.start", **{"duetime.runs": len(batch)}):
                    started = await self.store.runs_start(
                        RunsStartParams(runs, lease_ttl=self.lease_ttl)
                    )
                break
            except self.store.transient_errors as exc:
                for request in batch:
                    request.unsure = True
                log.warning(
                    "starting %d runs failed (database unreachable? %s); retrying in %.2fs",
                    len(batch),
                    exc,
                    delay,
                )
            if await wait_or_stop(stop, delay):
                raise Stopped
            delay = min(delay * 2, 5.0)
        # a failed try may have been written after all: then its runs are ours to run
        unsure = [r for r in batch if r.unsure and r.run_id not in started]
        if not unsure:
            return [(r, r.run_id in started) for r in batch]
        verdicts = await asyncio.gather(
            *(self._started_before(r, stop) for r in unsure), return_exceptions=True
        )
        answers = [(r, r.run_id in started) for r in batch if r not in unsure]
        for request, verdict in zip(unsure, verdicts, strict=True):
            if isinstance(verdict, Stopped):
                continue
            if isinstance(verdict, BaseException):
                _fail(request.answer, verdict)
            else:
                answers.append((request, verdict))
        return answers

    async def _started_before(self, request: _Request, stop: asyncio.Event) -> bool:
        current = await retrying(
            self.store,
            lambda: self.store.run_get(request.tenant, request.run_id),
            f"reading run {request.run_id}",
            stop,
        )
        return (
            current.state is RunState.RUNNING
            and current.token == request.token
            and current.started_at is not None
        )


async def retrying(
    store: Store, op: Callable[[], Awaitable[T]], what: str, stop: asyncio.Event
) -> T:
    """``op()`` until it succeeds, pausing with backoff while the database is unreachable
    (``store.transient_errors``); raises :class:`Stopped` if ``stop`` is set first. Other
    errors propagate. The worker's start-up waits for the database with it too."""
    delay = 0.05
    while True:
        try:
            return await op()
        except store.transient_errors as exc:
            log.warning("%s failed (database unreachable? %s); retrying in %.2fs", what, exc, delay)
        if await wait_or_stop(stop, delay):
            raise Stopped
        delay = min(delay * 2, 5.0)


def _answer(answer: asyncio.Future[bool], started: bool) -> None:
    if not answer.done():
        answer.set_result(started)


def _fail(answer: asyncio.Future[bool], exc: BaseException) -> None:
    if not answer.done():
        answer.set_exception(exc)
