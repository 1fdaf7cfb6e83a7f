"""The worker: claim due runs, fire each at its instant, heartbeat, complete with fencing.

Loops (all supervised: if one dies, the worker stops and re-raises):
- producer: claims up to the free concurrency in one atomic statement, woken by news of new
  runs (NOTIFY on PostgreSQL) or a jittered poll;
- one task per claimed run: waits for the run's instant (database clock), starts it (fenced,
  re-checking the job), calls the target with a timeout, submits the outcome;
- heartbeat: extends the leases of runs in flight every ``heartbeat_interval``; a run whose
  lease was lost is cancelled locally (its late outcome would be refused anyway);
- completer: batched fenced completions.

Shutdown is two-phase: stop claiming, let running work finish within ``shutdown_grace``, then
hand back what is left (back to ``scheduled``; an at-most-once run that started goes ``dead``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from duetime._aio import first_of
from duetime._clock import Clock, SystemClock
from duetime._config import Settings
from duetime._types import AttemptOutcome, DeliveryMode, RunState, RunTrigger, WorkerInfo
from duetime.store.base import (
    ClaimedRun,
    RunCompletion,
    RunsClaimParams,
    RunsHeartbeatParams,
    RunStartParams,
    Store,
)
from duetime.targets.context import RunContext
from duetime.targets.python import TaskRegistry, invoke
from duetime.worker.completer import Completer, CompletionListener
from duetime.worker.retry import Decision, after_failure, after_success

log = logging.getLogger("duetime.worker")

StartListener = Callable[[ClaimedRun], None]


@dataclass(slots=True)
class _InFlight:
    claimed: ClaimedRun
    task: asyncio.Task[None] | None = None
    started_at: datetime | None = None
    lease_lost: bool = False
    handed_back: bool = False
    done: bool = field(default=False)


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        store: Store,
        registry: TaskRegistry,
        settings: Settings,
        *,
        tasks: Sequence[str] | None = None,
        worker_id: str | None = None,
        clock: Clock | None = None,
        on_start: StartListener | None = None,
        on_complete: CompletionListener | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.tasks = list(tasks) if tasks is not None else registry.names()
        unknown = [t for t in self.tasks if t not in registry]
        if unknown:
            raise ValueError(f"worker asked to serve unregistered tasks: {unknown}")
        self.id = worker_id or new_worker_id()
        self.clock = clock or SystemClock()
        self.on_start = on_start
        self.completer = Completer(store, batch=settings.worker_batch * 5, listener=on_complete)
        self._inflight: dict[uuid.UUID, _InFlight] = {}
        self._slot_freed = asyncio.Event()
        self._claiming = True
        self._offset = timedelta(0)
        self._executor = ThreadPoolExecutor(
            max_workers=settings.worker_concurrency, thread_name_prefix="duetime-task"
        )
        self._rng = random.Random()

    # --- lifecycle ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then shut down gracefully. Re-raises if a loop dies."""
        await self._register()
        await self._measure_clock_offset()
        completer_stop = asyncio.Event()
        loops = [
            asyncio.create_task(self._produce(stop), name="duetime-producer"),
            asyncio.create_task(self._heartbeat(stop), name="duetime-heartbeat"),
        ]
        completer = asyncio.create_task(
            self.completer.run(completer_stop), name="duetime-completer"
        )
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                [*loops, completer, stopper], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is not stopper and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            await self._drain()
        finally:
            self._claiming = False
            for task in loops:
                task.cancel()
            stopper.cancel()
            completer_stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(completer, self.settings.shutdown_grace)
            with contextlib.suppress(Exception):
                await self.store.worker_unregister(self.id)
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _register(self) -> None:
        now = await self.store.db_now()
        await self.store.worker_register(
            WorkerInfo(
                id=self.id,
                host=socket.gethostname(),
                pid=os.getpid(),
                tasks=tuple(self.tasks),
                queues=("default",),
                started_at=now,
                heartbeat_at=now,
            )
        )

    async def _measure_clock_offset(self) -> None:
        """Offset of the database clock to ours, so runs fire at their instant by the DB clock."""
        before = time.time()
        db_now = await self.store.db_now()
        after = time.time()
        local_mid = self.clock.now() - timedelta(seconds=(after - before) / 2)
        self._offset = db_now - local_mid
        if abs(self._offset) > timedelta(milliseconds=50):
            log.info("database clock is %+.3fs from this host", self._offset.total_seconds())

    def _db_now(self) -> datetime:
        return self.clock.now() + self._offset

    async def _drain(self) -> None:
        """Phase two of shutdown: wait for running work, then hand back the rest."""
        self._claiming = False
        for item in list(self._inflight.values()):
            if item.started_at is None and item.task is not None:
                item.handed_back = True
                item.task.cancel()
        deadline = time.monotonic() + self.settings.shutdown_grace
        while self._inflight and time.monotonic() < deadline:
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), deadline - time.monotonic())
        for item in list(self._inflight.values()):
            if item.task is not None:
                item.handed_back = True
                item.task.cancel()
        while self._inflight:
            self._slot_freed.clear()
            await self._slot_freed.wait()

    # --- producer -------------------------------------------------------------------------

    async def _produce(self, stop: asyncio.Event) -> None:
        while self._claiming and not stop.is_set():
            free = self.settings.worker_concurrency - len(self._inflight)
            if free <= 0:
                self._slot_freed.clear()
                await first_of(stop.wait(), self._slot_freed.wait())
                continue
            limit = min(free, self.settings.worker_batch)
            try:
                claimed = await self.store.runs_claim(
                    RunsClaimParams(
                        worker_id=self.id,
                        tasks=self.tasks,
                        limit=limit,
                        lease_ttl=self.settings.lease_ttl,
                        lookahead=self.settings.worker_lookahead,
                    )
                )
            except Exception:
                log.exception("claiming runs failed; retrying")
                claimed = []
                await first_of(stop.wait(), asyncio.sleep(self._poll_delay()))
            for item in claimed:
                self._spawn(item)
            if len(claimed) < limit:
                await first_of(stop.wait(), self.store.wait_for_runs(self._poll_delay()))

    def _poll_delay(self) -> float:
        base = min(self.settings.worker_poll_interval, self.settings.worker_lookahead)
        return base * self._rng.uniform(0.8, 1.0)

    def _spawn(self, claimed: ClaimedRun) -> None:
        item = _InFlight(claimed, started_at=claimed.run.started_at)
        self._inflight[claimed.run.id] = item
        item.task = asyncio.create_task(self._execute(item), name=f"duetime-run-{claimed.run.id}")

    # --- one run --------------------------------------------------------------------------

    async def _execute(self, item: _InFlight) -> None:
        claimed = item.claimed
        run = claimed.run
        try:
            try:
                if item.started_at is None and not await self._start_at_instant(item):
                    return
                decision = await self._call(item)
            except asyncio.CancelledError:
                decision = self._interrupted(item)
            self._submit(item, decision)
        finally:
            item.done = True
            self._inflight.pop(run.id, None)
            self._slot_freed.set()

    async def _start_at_instant(self, item: _InFlight) -> bool:
        run = item.claimed.run
        delay = (run.available_at - self._db_now()).total_seconds()
        if delay > 0:
            await asyncio.sleep(delay)
        if not await self.store.run_start(RunStartParams(run_id=run.id, token=run.token)):
            log.info(
                "run %s of %s will not start: its job was paused, cancelled or changed",
                run.id,
                run.job_name,
            )
            return False
        item.started_at = self._db_now()
        return True

    async def _call(self, item: _InFlight) -> Decision:
        claimed = item.claimed
        run = claimed.run
        task = self.registry.get(run.task)
        ctx = RunContext(
            run_id=run.id,
            job_id=run.job_id,
            job_name=run.job_name,
            tenant=run.tenant,
            task=run.task,
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            max_attempts=run.max_attempts,
            token=run.token,
            worker_id=self.id,
            payload=run.payload,
        )
        if self.on_start is not None:
            self.on_start(claimed)
        if task is None:  # pragma: no cover - claims only ask for registered tasks
            return self._failed(
                item,
                LookupError(f"task {run.task!r} is not registered here"),
                AttemptOutcome.FAILED,
            )
        try:
            if claimed.timeout is not None:
                await asyncio.wait_for(invoke(task, ctx, self._executor), claimed.timeout)
            else:
                await invoke(task, ctx, self._executor)
        except TimeoutError:
            return self._failed(
                item, TimeoutError(f"timed out after {claimed.timeout}s"), AttemptOutcome.TIMED_OUT
            )
        except Exception as exc:
            return self._failed(item, exc, AttemptOutcome.FAILED)
        return after_success()

    def _failed(self, item: _InFlight, exc: BaseException, outcome: AttemptOutcome) -> Decision:
        run = item.claimed.run
        return after_failure(
            exc=exc,
            outcome=outcome,
            attempt=run.attempt,
            max_attempts=run.max_attempts,
            policy=item.claimed.retry,
            delivery=item.claimed.delivery,
            now=self._db_now(),
            rng=self._rng,
        )

    def _interrupted(self, item: _InFlight) -> Decision:
        """The run's task was cancelled: its lease was lost, or the worker is shutting down."""
        if item.lease_lost:
            return Decision(
                AttemptOutcome.CANCELLED, RunState.SCHEDULED, None, "lease_lost", None, "lease lost"
            )
        started = item.started_at is not None
        if started and item.claimed.delivery is DeliveryMode.AT_MOST_ONCE:
            return Decision(
                AttemptOutcome.CANCELLED,
                RunState.DEAD,
                None,
                "shutdown_interrupted",
                None,
                "worker shut down while the run was executing",
            )
        return Decision(
            AttemptOutcome.CANCELLED,
            RunState.SCHEDULED,
            self._db_now(),
            "handed_back",
            None,
            "worker shut down; run handed back",
        )

    def _submit(self, item: _InFlight, decision: Decision) -> None:
        run = item.claimed.run
        claimed_at = run.claimed_at or self._db_now()
        self.completer.submit(
            RunCompletion(
                run_id=run.id,
                token=run.token,
                worker_id=self.id,
                attempt=run.attempt,
                claimed_at=claimed_at,
                started_at=item.started_at,
                outcome=decision.outcome,
                next_state=decision.next_state,
                available_at=decision.available_at,
                reason=decision.reason,
                error_class=decision.error_class,
                error_message=decision.error_message,
                completes_job=item.claimed.one_shot and run.trigger is RunTrigger.SCHEDULE,
                refund_attempt=item.started_at is None,
            )
        )

    # --- heartbeat ------------------------------------------------------------------------

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await first_of(stop.wait(), asyncio.sleep(self.settings.heartbeat_interval))
            if stop.is_set():
                return
            try:
                await self.heartbeat_once()
            except Exception:
                log.exception("heartbeat failed; leases may lapse if this persists")

    async def heartbeat_once(self) -> None:
        """Extend the leases of runs in flight; cancel locally those whose lease was lost."""
        await self.store.worker_heartbeat(self.id)
        items = [i for i in self._inflight.values() if not i.done]
        if not items:
            return
        kept = await self.store.runs_heartbeat(
            RunsHeartbeatParams(
                worker_id=self.id,
                runs=[(i.claimed.run.id, i.claimed.run.token) for i in items],
                lease_ttl=self.settings.lease_ttl,
            )
        )
        for item in items:
            if item.claimed.run.id not in kept and not item.done and item.task is not None:
                log.warning(
                    "run %s: lease lost (token %d); stopping it here",
                    item.claimed.run.id,
                    item.claimed.run.token,
                )
                item.lease_lost = True
                item.task.cancel()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)
