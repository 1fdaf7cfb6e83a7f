"""The worker: claim due runs, fire each at its instant, heartbeat, complete with fencing.

Loops (all supervised: if one dies, the worker stops and re-raises):
- producer: claims its free slots, plus what they finish while the next claim travels
  (worker/claim_ahead.py), in one atomic statement, woken by news of new runs (NOTIFY on
  PostgreSQL) or a jittered poll;
- runners: a pool of at most ``worker_concurrency`` tasks, each executing one run at a time
  (a runner is a slot): it waits for the run's instant (database clock), starts it (fenced,
  re-checking the job), calls the target with a timeout, submits the outcome, and takes the
  next run waiting, with no task made per run. A run waits for a runner in claim order, at
  most :data:`~duetime.worker.claim_ahead.HELD_WAIT_LIMIT` (then it is handed back). A runner
  is made when a run waits and none is idle (so runners grow toward the ceiling only while
  runs wait);
- heartbeat: extends the leases of runs in flight every ``heartbeat_interval``; a run whose
  lease was lost is cancelled locally (its late outcome would be refused anyway);
- starter: batched fenced starts of runs claimed ahead (one ``runs_start`` for every run whose
  instant came while the previous batch was written);
- completer: batched fenced completions.

Shutdown is two-phase: stop claiming, let running work finish within ``shutdown_grace``, then
hand back what is left (back to ``scheduled``; an at-most-once run that started goes ``dead``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import socket
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from duetime import _tracing
from duetime._aio import first_of, uncancellable
from duetime._clock import Clock, SystemClock, offset_to
from duetime._config import Settings
from duetime._logs import bind_run, run_fields, set_run
from duetime._outbox import OutboxMessage, broker_task
from duetime._records import positional_builder
from duetime._testsignals import Signal
from duetime._types import AttemptOutcome, DeliveryMode, RunState, RunTrigger, WorkerInfo
from duetime.metrics import metrics
from duetime.store.base import (
    ClaimedRun,
    RunCompletion,
    RunsClaimParams,
    RunsHeartbeatParams,
    RunsMisfireParams,
    Store,
)
from duetime.targets.breaker import STATE_VALUES, Breakers, Ticket, breaker_key
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.brokers.message import build_message
from duetime.targets.brokers.validate import is_broker_target
from duetime.targets.command import CommandExecutor, load_commands
from duetime.targets.context import RunContext
from duetime.targets.http import HostPolicy, HttpExecutor
from duetime.targets.python import TaskRegistry, TaskThread, start
from duetime.worker.claim_ahead import HELD_WAIT_LIMIT, ClaimAhead, held_too_long
from duetime.worker.completer import Completer, CompletionListener
from duetime.worker.relay import Relay
from duetime.worker.results import encode_result
from duetime.worker.retry import Decision, after_failure, after_success
from duetime.worker.run_metrics import RunObserver
from duetime.worker.run_session import RunSession
from duetime.worker.starter import Starter, Stopped, retrying
from duetime.workflows.definition import WorkflowRole, workflow_role

log = logging.getLogger("duetime.worker")

StartListener = Callable[[ClaimedRun], None]

SPAWN_SLICE = 50
"""Runs of a claim handed to the runners before the loop gets a turn, and runs a runner
executes back to back before it gives the loop a turn: a claim of hundreds, run at once,
delays the instants of runs already waiting (and every timer) by milliseconds."""

_COMPLETION_FIELDS = (
    "run_id", "token", "worker_id", "attempt", "claimed_at", "started_at", "outcome",
    "next_state", "available_at", "reason", "error_class", "error_message", "traceback",
    "completes_job", "refund_attempt", "result", "workflow", "outbox",
)  # fmt: skip
"""The order :meth:`Worker._completion` passes :class:`RunCompletion`'s fields in (checked at
import)."""

_CONTEXT_FIELDS = (
    "run_id", "job_id", "job_name", "tenant", "task", "scheduled_for", "attempt",
    "max_attempts", "token", "worker_id", "payload", "last_checkpoint", "hooks", "workflow",
)  # fmt: skip
"""Likewise for :class:`RunContext` in :meth:`Worker._call`."""

for _cls, _order in ((RunCompletion, _COMPLETION_FIELDS), (RunContext, _CONTEXT_FIELDS)):
    if tuple(f.name for f in dataclasses.fields(_cls)) != _order:
        raise ImportError(f"duetime.worker.worker: {_cls.__name__}'s fields changed; update it")

_new_completion = positional_builder(RunCompletion)
_new_context = positional_builder(RunContext)

SUMMARY_INTERVAL = 10.0
"""Seconds between the worker's INFO summary lines ("12 succeeded, 3 failed, 1 dead in the last
10 s"): successes are logged one by one at DEBUG only."""

COMPLETION_LINGER = 0.01
"""Seconds a completion batch waits for more outcomes when few are queued (worker/completer.py):
at most 100 completion commits a second per worker however the runs trickle in."""


@dataclass(slots=True)
class _InFlight:
    claimed: ClaimedRun
    role: WorkflowRole | None
    """The run's part in a workflow (``workflow_role``), read at the claim: the call and the
    completion both need it."""
    started_at: datetime | None = None
    waiting_since: float = 0.0
    """When it began waiting for a runner (``perf_counter``)."""
    began: float | None = None
    """When its attempt began here, on the monotonic clock (``RunObserver.started``)."""
    runner: asyncio.Task[None] | None = None
    """The runner executing it; None while it waits for one, and once it is done."""
    lease_lost: bool = False
    cancel_requested: bool = False
    cancel_reason: str = "cancelled"
    """Why a stop was requested: ``cancelled`` (an operator) or ``replaced`` (overlap
    ``replace``: the run's successor waits for this attempt to end)."""
    thread: TaskThread | None = None
    """A sync task's call (a replaced run waits for its thread to return)."""
    handed_back: bool = False
    slotted: bool = False
    """A runner took it (a run claimed ahead waits for one: until then it has not begun here,
    whatever the claim stamped, and a shutdown hands it back at once)."""

    @property
    def started_here(self) -> datetime | None:
        """When the run started, if it began on this worker: the start a run held ahead of a
        free slot got from its claim does not count (it is handed back, attempt refunded)."""
        return self.started_at if self.slotted else None

    stopped: bool = False
    """Cancelled (shutdown, lease lost or cancel requested), perhaps before its task began."""
    done: bool = field(default=False)
    session: RunSession | None = None
    """The attempt's side of ``ctx`` (progress, checkpoints, cancel flag, transaction)."""
    result: str | None = None
    """The handler's return value as JSON text (kept with the run when it succeeds)."""
    outbox: OutboxMessage | None = None
    """A broker run's message (written with its completion)."""


@dataclass(slots=True)
class _Tally:
    """Attempts ended since the last summary line (plain counters: the hot path adds one)."""

    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    since: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class ClaimTaken:
    """One claim: how many runs it asked for, how many it got, and the slots the worker
    claimed for (:attr:`ClaimAhead.concurrency`) once it had judged the claim."""

    asked: int
    got: int
    concurrency: int


@dataclass(slots=True)
class WorkerSignals:
    """Test signals (``duetime._testsignals``), inert unless a test listens."""

    spawned: Signal[ClaimedRun] = field(default_factory=lambda: Signal("worker.spawned"))
    """A claimed run was handed to the runners (emitted right after, before the loop gets a
    turn)."""
    claimed: Signal[ClaimTaken] = field(default_factory=lambda: Signal("worker.claimed"))
    """A claim returned (emitted before its runs are handed to the runners)."""


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
        queues: Sequence[str] | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.settings = settings
        self.tasks = list(tasks) if tasks is not None else registry.names()
        self.queues = None if queues is None else list(dict.fromkeys(queues))
        """The queues this worker serves (a worker pool); None: every queue."""
        unknown = [t for t in self.tasks if t not in registry]
        if unknown:
            raise ValueError(f"worker asked to serve unregistered tasks: {unknown}")
        self.commands = CommandExecutor(load_commands(settings.commands))
        self.tasks += [t for t in self.commands.task_names() if t not in self.tasks]
        self.breakers = Breakers(  # per process; reported with the heartbeat (decision 0027)
            threshold=settings.breaker_threshold,
            cooldown=settings.breaker_cooldown,
            on_change=lambda key, state: metrics().breaker_changed(key, STATE_VALUES[state]),
        )
        self._breakers_reported = 0
        self.brokers = parse_brokers(settings.brokers)  # broker targets (docs/brokers.md)
        self.tasks += [t for t in map(broker_task, self.brokers) if t not in self.tasks]
        self.relay = (
            Relay(store, self.brokers, lease=settings.outbox_lease) if self.brokers else None
        )
        self.id = worker_id or new_worker_id()
        self.clock = clock or SystemClock()
        self.on_start = on_start
        self.signals = WorkerSignals()
        self.observer = RunObserver()  # metrics: starts, outcomes, durations
        self.completer = Completer(
            store,
            batch=settings.worker_batch * 5,
            linger=COMPLETION_LINGER,
            listener=on_complete,  # called per completion only when someone listens
            after_batch=self._written,
        )
        self.starter = Starter(
            store,
            batch=settings.worker_batch * 5,
            lease_ttl=settings.lease_ttl,
            max_lead=settings.worker_lookahead / 4,
        )
        self._inflight: dict[int, _InFlight] = {}
        """Every run held: executing, or claimed and waiting for its instant or a runner; by
        the run id's integer (``UUID.int``: a UUID hashes in Python code, and every run goes in
        and out of this and :attr:`_slot_holders`)."""
        self._waiting: deque[_InFlight] = deque()
        """Runs waiting for a runner, in claim order (done ones are skipped)."""
        self._runners: set[asyncio.Task[None]] = set()
        """At most ``worker_concurrency``: the ceiling on runs executing at once (from the
        instant wait to the outcome)."""
        self._idle: deque[asyncio.Future[bool]] = deque()
        """Idle runners' wake-ups (True: work is waiting; False: end)."""
        self._coming = 0
        """Runners woken or made that have not yet looked for work: each takes a waiting run,
        and before executing it makes sure another runner is coming if runs still wait."""
        self._held_timer: asyncio.TimerHandle | None = None
        self._runners_closed = False
        self._ahead = ClaimAhead(
            slots=settings.worker_concurrency,
            most=settings.worker_batch,
            rounds=settings.worker_claim_ahead,
        )
        self._slot_holders: dict[int, float] = {}
        """Runs holding a slot, since when (``perf_counter``), oldest first."""
        self._slot_freed = asyncio.Event()
        self._replaced_ended = asyncio.Event()
        """A replaced run's outcome was written: its successor may start now (claim again)."""
        self._beat_now = asyncio.Event()
        self._claiming = True
        self._offset = timedelta(0)
        self._executor = ThreadPoolExecutor(
            max_workers=settings.worker_concurrency, thread_name_prefix="duetime-task"
        )
        self.http = HttpExecutor(  # runs with an HTTP target; one connection pool per worker
            secret_for=store.tenant_signing_secrets,  # two during a rotation
            policy=HostPolicy.parse(settings.http_allow_hosts),
            concurrency=settings.worker_concurrency,
        )
        self._rng = random.Random()
        self._traced = False
        """Whether runs are traced (``_tracing.enabled()``), asked once per claim, not per
        run; likewise :attr:`_debug`."""
        self._debug = log.isEnabledFor(logging.DEBUG)
        """Whether each success is logged (at DEBUG)."""
        self._next_misfire_check = 0.0
        self._claim_failures = 0
        self._tally = _Tally()
        self._next_summary = time.monotonic() + SUMMARY_INTERVAL

    # --- lifecycle ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then shut down gracefully. Re-raises if a loop dies."""
        try:  # the database may not be up yet: wait for it
            await retrying(self.store, self._register, "registering the worker", stop)
            await retrying(self.store, self._measure_clock_offset, "reading the DB clock", stop)
        except Stopped:
            return
        completer_stop = asyncio.Event()
        starter_stop = asyncio.Event()
        loops = [
            asyncio.create_task(self._produce(stop), name="duetime-producer"),
            asyncio.create_task(self._heartbeat(stop), name="duetime-heartbeat"),
            asyncio.create_task(self._watch_cancels(stop), name="duetime-cancels"),
        ]
        relay = []  # not cancelled at a stop: its pass ends (its claims published and marked)
        if self.relay is not None:
            relay.append(asyncio.create_task(self.relay.run(stop), name="duetime-relay"))
        starter = asyncio.create_task(self.starter.run(starter_stop), name="duetime-starter")
        completer = asyncio.create_task(
            self.completer.run(completer_stop), name="duetime-completer"
        )
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                [*loops, *relay, starter, completer, stopper], return_when=asyncio.FIRST_COMPLETED
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
            # after the drain, which cancelled the runs waiting to start: a request left (a loop
            # died) is answered False
            starter_stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(starter, self.settings.shutdown_grace)
            completer_stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(completer, self.settings.shutdown_grace)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*relay), self.settings.shutdown_grace)
            with contextlib.suppress(Exception):
                await self.store.worker_unregister(self.id)
            self._stop_runners()
            if self._runners:  # told to end (idle) or cancelled (stuck): a turn or two
                await asyncio.wait(list(self._runners), timeout=1.0)
            self.observer.flush()
            self.log_summary(force=True)
            self._executor.shutdown(wait=False, cancel_futures=True)
            with contextlib.suppress(Exception):
                await self.http.close()

    async def _register(self) -> None:
        now = await self.store.db_now()
        await self.store.worker_register(
            WorkerInfo(
                id=self.id,
                host=socket.gethostname(),
                pid=os.getpid(),
                tasks=tuple(self.tasks),
                queues=tuple(self.queues) if self.queues is not None else ("*",),
                started_at=now,
                heartbeat_at=now,
            )
        )

    async def _measure_clock_offset(self) -> None:
        """Offset of the database clock to ours, so runs fire at their instant by the DB clock."""
        self._offset, _ = await offset_to(self.store.db_now, self.clock)
        if abs(self._offset) > timedelta(milliseconds=50):
            log.info("database clock is %+.3fs from this host", self._offset.total_seconds())

    def _db_now(self) -> datetime:
        return self.clock.now() + self._offset

    async def _drain(self) -> None:
        """Phase two of shutdown: wait for running work, then hand back the rest."""
        self._claiming = False
        self._hand_back_unstarted(list(self._inflight.values()))
        deadline = time.monotonic() + self.settings.shutdown_grace
        while self._inflight and time.monotonic() < deadline:
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), deadline - time.monotonic())
        for item in list(self._inflight.values()):
            item.handed_back = True
            self._cancel(item)
        # cancelled tasks hand their runs back promptly; one stuck past this is left to the
        # reaper (its lease lapses) rather than blocking the process from exiting
        deadline = time.monotonic() + 10.0
        while self._inflight and time.monotonic() < deadline:
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), deadline - time.monotonic())
        if self._inflight:
            log.error(
                "%d runs did not hand back in time; their leases will lapse", len(self._inflight)
            )

    def _hand_back_unstarted(self, items: list[_InFlight]) -> None:
        """Hand back the runs that have not begun: claimed ahead of their instant, or held
        ahead of a free slot (worker/claim_ahead.py)."""
        for item in items:
            if item.started_here is None and not item.done:
                item.handed_back = True
                self._cancel(item)

    def _cancel(self, item: _InFlight) -> None:
        """Stop a run: its runner is cancelled (the run's attempt ends as interrupted, and the
        runner goes on); a run still waiting for a runner ends here and now, its outcome
        submitted as if it had been cancelled."""
        item.stopped = True
        if item.runner is not None:
            item.runner.cancel()
        elif not item.done:
            self._end_waiting(item, self._interrupted(item))

    def _end_waiting(self, item: _InFlight, decision: Decision) -> None:
        """End a run that never got a runner (it never began here): submit ``decision``."""
        item.done = True
        self._inflight.pop(item.claimed.run.id.int, None)
        self.observer.ending(item.claimed.run, item.began)
        self._submit(item, decision)
        self._slot_freed.set()

    # --- producer -------------------------------------------------------------------------

    async def _judge_misfires(self) -> None:
        """At most once a second, before claiming: runs that waited past their job's misfire
        grace while no worker was up are skipped as the job's misfire policy says."""
        now = time.monotonic()
        if now < self._next_misfire_check:
            return
        self._next_misfire_check = now + 1.0
        try:
            skipped = await self.store.runs_misfire(RunsMisfireParams())
        except Exception as exc:
            log.warning("judging misfires failed (%s); retrying later", exc)
            return
        if skipped:
            self.observer.misfired(len(skipped))
            log.warning(
                "skipped %d runs that missed their misfire grace: %s",
                len(skipped),
                misfired_jobs(skipped),
            )

    async def _produce(self, stop: asyncio.Event) -> None:
        while self._claiming and not stop.is_set():
            room = self._ahead.concurrency + self._claim_allowance() - len(self._inflight)
            if room <= 0:
                self._slot_freed.clear()
                await first_of(stop.wait(), self._slot_freed.wait())
                continue
            await self._judge_misfires()
            limit = min(room, self._ahead.cap)
            try:
                if self._claim_failures:
                    await self._adopt_orphans()
                asked = time.perf_counter()
                self._traced = _tracing.enabled()
                self._debug = log.isEnabledFor(logging.DEBUG)
                with _tracing.span("duetime.claim", worker_id=self.id, limit=limit):
                    claimed = await self.store.runs_claim(
                        RunsClaimParams(
                            worker_id=self.id,
                            tasks=self.tasks,
                            limit=limit,
                            lease_ttl=self.settings.lease_ttl,
                            lookahead=self.settings.worker_lookahead,
                            queues=self.queues,
                            priority_aging=self.settings.priority_aging,
                            priority_aging_cap=self.settings.priority_aging_cap,
                        )
                    )
            except Exception as exc:
                if isinstance(exc, self.store.transient_errors):
                    log.warning("claiming runs failed (database unreachable? %s); retrying", exc)
                else:
                    log.exception("claiming runs failed; retrying")
                claimed = []
                self._claim_failures += 1
                pause = min(self._poll_delay() * 2 ** (self._claim_failures - 1), 5.0)
                await first_of(stop.wait(), asyncio.sleep(pause))
                continue
            self._ahead.claimed(time.perf_counter() - asked)
            self._ahead.returned(limit, len(claimed), len(self._inflight) + len(claimed))
            self.signals.claimed.emit(ClaimTaken(limit, len(claimed), self._ahead.concurrency))
            self._claim_failures = 0
            await self._spawn_all(claimed)
            if len(claimed) < limit:
                await first_of(
                    stop.wait(),
                    self.store.wait_for_runs(self._poll_delay()),
                    self._replaced_ended.wait(),
                )
                self._replaced_ended.clear()

    async def _spawn_all(self, claimed: list[ClaimedRun]) -> None:
        """Hand a claim's runs to the runners :data:`SPAWN_SLICE` at a time, the loop getting
        a turn between (due timers — other runs' instants — fire meanwhile). Every claimed run
        is spawned, whatever happens during a turn: cancelled (a loop died), the rest are
        spawned before the cancellation goes on; shutdown begun (its drain has handed back the
        unstarted runs), the rest are spawned and handed back at once."""
        for index, item in enumerate(claimed, 1):
            self._spawn(item)
            if index % SPAWN_SLICE or index == len(claimed):
                continue
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                for rest in claimed[index:]:
                    self._spawn(rest)
                raise
            if not self._claiming:
                remaining = claimed[index:]
                for late in remaining:
                    self._spawn(late)
                self._hand_back_unstarted([self._inflight[c.run.id.int] for c in remaining])
                return

    async def _adopt_orphans(self) -> None:
        """A claim that failed on a lost connection may have been committed: its runs are ours
        (our lease) but we never heard of them. Run them now rather than after their lease
        expires. Known runs — executing, or with an outcome waiting to be written — are taken
        before asking, so a run finishing meanwhile is never taken for an orphan."""
        known = set(self._inflight) | {run_id.int for run_id in self.completer.pending_runs()}
        for claimed in await self.store.runs_held(self.id):
            key = claimed.run.id.int
            if key not in known and key not in self._inflight:
                log.warning(
                    "run %s: claimed by a claim whose answer was lost; running it", claimed.run.id
                )
                self._spawn(claimed)

    def _written(self, batch: list[RunCompletion], applied: list[bool]) -> None:
        """Outcomes were written (``applied[i]``: the i-th was; False: stale): the metrics
        count them (and are flushed); a replaced run's recorded attempt lets its successor
        be claimed at once; a broker run's message wakes the relay."""
        self.observer.completed(batch, applied)
        self.observer.flush()
        for completion, ok in zip(batch, applied, strict=True):
            if ok and (completion.reason == "replaced" or completion.outbox is not None):
                if completion.reason == "replaced":
                    self._replaced_ended.set()
                if completion.outbox is not None and self.relay is not None:
                    self.relay.wake()

    def _poll_delay(self) -> float:
        """Jittered; at most half the lookahead, so every run is claimed at least half a
        lookahead before its instant (a poll as long as the lookahead claims some just in
        time, and the claim's own duration makes them late)."""
        base = min(self.settings.worker_poll_interval, self.settings.worker_lookahead / 2)
        return base * self._rng.uniform(0.8, 1.0)

    def _spawn(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        # positionally: claimed, role, started_at, waiting_since
        item = _InFlight(claimed, workflow_role(run), run.started_at, time.perf_counter())
        self._inflight[run.id.int] = item
        self._waiting.append(item)
        self._dispatch()
        self.signals.spawned.emit(claimed)

    # --- runners --------------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Make sure a runner is coming for the runs waiting: an idle one woken, or a new one
        while below the ceiling (``worker_concurrency``); when neither can be, the runs wait
        for a busy runner (at most ``HELD_WAIT_LIMIT``). One runner at a time: a runner that
        takes a run calls this again before executing it, so runs that finish at once are
        executed back to back by one runner, and runs that wait get a runner each."""
        if self._coming or self._runners_closed:
            return
        while self._idle:
            wake = self._idle.popleft()
            if not wake.done():
                wake.set_result(True)
                self._coming += 1
                return
        if len(self._runners) < self.settings.worker_concurrency:
            self._runners.add(asyncio.create_task(self._runner(), name="duetime-runner"))
            self._coming += 1
            return
        self._arm_held_timer()

    async def _runner(self) -> None:
        """Execute waiting runs one at a time until the worker stops (:meth:`_stop_runners`).
        A cancel aimed at the run being executed ends that run's attempt, not the runner."""
        me = asyncio.current_task()
        assert me is not None
        loop = asyncio.get_running_loop()
        streak = 0
        try:
            while True:
                self._coming -= 1
                while (item := self._next_waiting()) is not None:
                    if self._waiting:
                        self._dispatch()
                    item.runner = me
                    try:
                        await self._execute(item)
                    except Exception:  # a bug: the run's bookkeeping is done; the runner goes on
                        log.exception("run %s: executing it failed", item.claimed.run.id)
                    finally:
                        item.runner = None
                    if self._runners_closed:
                        return
                    while me.cancelling():  # the cancel was the run's, handled by its attempt
                        me.uncancel()
                    streak += 1
                    if streak % SPAWN_SLICE == 0:
                        await asyncio.sleep(0)
                wake: asyncio.Future[bool] = loop.create_future()
                self._idle.append(wake)
                if not await wake:
                    return
        finally:
            self._runners.discard(me)

    def _next_waiting(self) -> _InFlight | None:
        """The next run waiting for a runner; one that waited longer than a held run may is
        handed back on the way (another worker may start it sooner)."""
        while self._waiting:
            item = self._waiting.popleft()
            if item.done:
                continue
            waited = time.perf_counter() - item.waiting_since
            if waited > HELD_WAIT_LIMIT:
                self._end_waiting(item, held_too_long(self._db_now()))
                continue
            self._ahead.held(waited)
            return item
        return None

    def _arm_held_timer(self) -> None:
        """Make sure runs waiting for a busy runner are handed back once they waited
        ``HELD_WAIT_LIMIT``, even if no runner frees meanwhile (one timer for all of them)."""
        if self._held_timer is not None or not self._waiting:
            return
        due = self._waiting[0].waiting_since + HELD_WAIT_LIMIT - time.perf_counter()
        loop = asyncio.get_running_loop()
        self._held_timer = loop.call_later(max(0.0, due) + 0.001, self._expire_held)

    def _expire_held(self) -> None:
        self._held_timer = None
        limit = time.perf_counter() - HELD_WAIT_LIMIT
        while self._waiting and (self._waiting[0].done or self._waiting[0].waiting_since < limit):
            item = self._waiting.popleft()
            if not item.done:
                self._end_waiting(item, held_too_long(self._db_now()))
        if self._waiting and not self._idle:
            self._arm_held_timer()

    def _stop_runners(self) -> None:
        """End the runners: idle ones are told to end, busy ones (a run stuck past the drain)
        are cancelled."""
        self._runners_closed = True
        while self._idle:
            wake = self._idle.popleft()
            if not wake.done():
                wake.set_result(False)
        for runner in list(self._runners):
            if not runner.done() and runner is not asyncio.current_task():
                runner.cancel()
        if self._held_timer is not None:
            self._held_timer.cancel()
            self._held_timer = None

    # --- one run --------------------------------------------------------------------------

    async def _execute(self, item: _InFlight) -> None:
        """Execute one run on the current runner, which holds the run's slot until its
        outcome is submitted."""
        claimed = item.claimed
        run = claimed.run
        item.slotted = True
        key = run.id.int
        self._slot_holders[key] = time.perf_counter()
        set_run(run)  # every line logged by this runner until its next run is about this run
        session = item.session = RunSession(
            self.store,
            run,
            delivery=claimed.delivery,
            loop=asyncio.get_running_loop(),
            lease_ttl=self.settings.lease_ttl,
            request_heartbeat=self._beat_now.set,
        )
        try:
            decision: Decision | None = None
            try:
                if item.stopped:  # cancelled before it began (Worker._cancel)
                    raise asyncio.CancelledError
                if item.started_at is not None or await self._start_at_instant(item):
                    if self._traced:
                        fields = {**run_fields(run), "task": run.task}
                        attributes = {f"duetime.{k}": v for k, v in fields.items()}
                        with _tracing.span("duetime.execute", **attributes):
                            decision = await self._call(item)
                    else:
                        decision = await self._call(item)
            except asyncio.CancelledError:
                session.signal_cancel()
                # a replaced sync task still running when this wait is cancelled (shutdown,
                # lost lease): nothing is recorded, so its successor cannot start beside it;
                # the run's lease runs out (decision 0016)
                decision = (
                    self._interrupted(item) if await self._await_replaced_thread(item) else None
                )
            if session.idle:
                self._finish_now(item, decision)
            else:
                # the outcome must be written even if a cancel arrives meanwhile
                await uncancellable(self._finish(item, decision))
        finally:
            slot_since = self._slot_holders.pop(key, None)
            if slot_since is not None:
                self._ahead.served(time.perf_counter() - slot_since)
            item.done = True
            self._inflight.pop(key, None)
            self._slot_freed.set()

    def _claim_allowance(self) -> int:
        """Runs to claim beyond the free slots: none while a slot has been held longer than a
        held run may wait (a long run, or one waiting for its instant), else what the slots
        finish while the next claim travels (worker/claim_ahead.py)."""
        oldest = next(iter(self._slot_holders.values()), None)
        if oldest is not None and time.perf_counter() - oldest > HELD_WAIT_LIMIT:
            return 0
        return self._ahead.allowance()

    async def _start_at_instant(self, item: _InFlight) -> bool:
        """Write the run's start shortly before its instant (the starter's lead), then wait for
        the instant (database clock): the task is called at the instant, not a write later."""
        run = item.claimed.run
        until = (run.available_at - self._db_now()).total_seconds()
        delay = self.starter.ask_delay(until)
        if delay > 0:
            await asyncio.sleep(delay)
        # started with every run whose instant came meanwhile (worker/starter.py); a run whose
        # start cannot be written does not run; the database being down only pauses it (a lost
        # lease cancels this task meanwhile)
        try:
            started = await self.starter.start(run.id, run.token, run.tenant)
        except Exception:
            log.exception("run %s: writing its start failed; it does not run here", run.id)
            return False
        if not started:
            self.observer.not_started(item.claimed)
            log.info(
                "run %s of %s will not start: its job was paused, cancelled or changed, its "
                "lease lapsed, or its overlap policy held it back",
                run.id,
                run.job_name,
            )
            return False
        remaining = (run.available_at - self._db_now()).total_seconds()
        if remaining > 0:
            await asyncio.sleep(remaining)
        item.started_at = self._db_now()
        return True

    async def _call(self, item: _InFlight) -> Decision:
        claimed = item.claimed
        run = claimed.run
        task = self.registry.get(run.task)
        role = item.role
        # a Python task (no target) has no breaker: no call per run to say so
        key = breaker_key(run.target) if run.target and role != "start" else None
        ticket = self.breakers.admit(key) if key is not None else None
        if ticket is not None and ticket.wait is not None:  # not started: not in the metrics
            return self._circuit_open(ticket)
        inputs = None
        if role == "step":  # its parents' results (none if its instance is gone)
            inputs = await self.store.workflow_step_inputs(
                run.id, key=run.idempotency_key, tenant=run.tenant
            )
        ctx = _new_context(  # every field, in _CONTEXT_FIELDS order (one per run)
            run.id,
            run.job_id,
            run.job_name,
            run.tenant,
            run.task,
            run.scheduled_for,
            run.attempt,
            run.max_attempts,
            run.token,
            self.id,
            run.payload,
            run.checkpoint,
            item.session,
            inputs,
        )
        item.began = self.observer.started(claimed, item.started_at, role)
        if self.on_start is not None:
            self.on_start(claimed)
        target = run.target
        call: Awaitable[Any]
        if target is None and task is not None:  # a Python task (the common case first)
            call, item.thread = start(task, ctx, self._executor)
        elif target is not None and is_broker_target(target):
            # its effect is its message, committed with its completion (the outbox)
            item.outbox = build_message(ctx, target)
            self._tally.succeeded += 1
            return after_success()
        elif target is not None and target.get("type") == "command":
            call = self.commands.execute(ctx, target)
        elif target is not None and role != "start":  # a workflow's start has no request
            call = self.http.execute(ctx, target)
        elif task is not None:  # a sync task's thread is kept: a replaced run waits for it
            call, item.thread = start(task, ctx, self._executor)
        else:  # pragma: no cover - claims only ask for registered tasks
            return self._failed(
                item,
                LookupError(f"task {run.task!r} is not registered here"),
                AttemptOutcome.FAILED,
            )
        if ticket is not None:
            call = self.breakers.guard(ticket, call)
        try:
            if claimed.timeout is not None:
                # inline on this runner, not a task per run as ``wait_for`` makes: the timeout
                # cancels the runner's await, and only its own expiry becomes the TimeoutError
                # (a stop aimed at the run meanwhile stays a cancellation)
                async with asyncio.timeout(claimed.timeout):
                    value = await call
            else:
                value = await call
            if value is not None:
                item.result = encode_result(
                    value,
                    limit=self.settings.result_max_bytes,
                    required=role == "step",
                    run=str(run.id),
                )
        except TimeoutError as exc:
            if item.session is not None:  # a sync task's thread keeps running: tell it to stop
                item.session.signal_cancel()
            message = str(exc) or f"timed out after {claimed.timeout}s"
            timeout = TimeoutError(message)
            timeout.__cause__ = exc.__cause__  # its traceback: where the task was stopped
            for note in getattr(exc, "__notes__", ()):  # a command's output tails
                timeout.add_note(note)
            return self._failed(item, timeout, AttemptOutcome.TIMED_OUT)
        except Exception as exc:
            return self._failed(item, exc, AttemptOutcome.FAILED)
        self._tally.succeeded += 1
        if self._debug:
            log.debug(
                "run %s of job %s (task %s, attempt %d) succeeded",
                run.id,
                run.job_name,
                run.task,
                run.attempt,
            )
        return after_success()

    def _circuit_open(self, ticket: Ticket) -> Decision:
        """The run's target breaker is open: back to ``scheduled`` when it half-opens, its
        attempt refunded (:meth:`_completion`): waiting burns no attempt."""
        wait = ticket.wait or 0.0
        return Decision(
            AttemptOutcome.CANCELLED,
            RunState.SCHEDULED,
            self._db_now() + timedelta(seconds=wait * (1 + 0.1 * self._rng.random())),
            "circuit_open",
            "duetime.CircuitOpen",
            f"circuit breaker {ticket.key} is open; retried in {wait:.1f}s (no attempt used)",
        )

    def _failed(self, item: _InFlight, exc: BaseException, outcome: AttemptOutcome) -> Decision:
        """What becomes of the run after its attempt failed or timed out: its retry policy
        decides, except for a run replaced by a newer one (decision 0016), which ends
        ``cancelled`` / ``replaced`` however it ended (a task that turns the cancel into its
        own error, or fails as its successor comes due): its successor takes its place, never
        its retry."""
        run = item.claimed.run
        decision = after_failure(
            exc=exc,
            outcome=outcome,
            attempt=run.attempt,
            max_attempts=run.max_attempts,
            policy=item.claimed.retry,
            delivery=item.claimed.delivery,
            now=self._db_now(),
            window_from=item.claimed.window_from,
            rng=self._rng,
        )
        if self._replaced(item):
            decision = dataclasses.replace(
                decision,
                outcome=AttemptOutcome.CANCELLED,
                next_state=RunState.CANCELLED,
                available_at=None,
                reason="replaced",
            )
        self._log_failure(item, exc, decision)
        return decision

    @staticmethod
    def _replaced(item: _InFlight) -> bool:
        """The run was asked to stop for a newer run (overlap ``replace``) and still holds its
        lease: its attempt's outcome, if not a success, ends it ``replaced``."""
        return item.cancel_requested and item.cancel_reason == "replaced" and not item.lease_lost

    def _log_failure(self, item: _InFlight, exc: BaseException, decision: Decision) -> None:
        """One WARNING line per failed attempt, with its traceback (as Celery's "Task …
        raised unexpected"), then an INFO line saying what becomes of the run."""
        run = item.claimed.run
        self._tally.failed += 1
        log.warning(
            "run %s of job %s (task %s, attempt %d of %d) %s: %s: %s",
            run.id,
            run.job_name,
            run.task,
            run.attempt,
            run.max_attempts,
            "timed out" if decision.outcome is AttemptOutcome.TIMED_OUT else "raised unexpected",
            decision.error_class,
            decision.error_message,
            exc_info=exc,
        )
        if decision.next_state is RunState.DEAD:
            self._tally.dead += 1
            log.info(
                "run %s of job %s is dead after attempt %d (%s)",
                run.id,
                run.job_name,
                run.attempt,
                decision.reason,
            )
        elif decision.reason == "replaced":
            log.info("run %s of job %s ends replaced by a newer run", run.id, run.job_name)
        elif decision.next_state is RunState.SCHEDULED:
            log.info(
                "run %s of job %s will be retried at %s (attempt %d of %d failed)",
                run.id,
                run.job_name,
                decision.available_at.isoformat() if decision.available_at else "once due",
                run.attempt,
                run.max_attempts,
            )

    def log_summary(self, *, force: bool = False) -> None:
        """The INFO line counting attempts ended since the last one, every
        :data:`SUMMARY_INTERVAL` (or now, with ``force``); nothing when none ended."""
        now = time.monotonic()
        if not force and now < self._next_summary:
            return
        self._next_summary = now + SUMMARY_INTERVAL
        tally, self._tally = self._tally, _Tally(since=now)
        if tally.succeeded or tally.failed or tally.dead:
            log.info(
                "%s succeeded, %s failed, %s dead in the last %.0f s",
                f"{tally.succeeded:,}",
                f"{tally.failed:,}",
                f"{tally.dead:,}",
                now - tally.since,
            )

    def _interrupted(self, item: _InFlight) -> Decision:
        """The run's task was cancelled: its lease was lost, a cancel was requested, or the
        worker is shutting down."""
        if item.cancel_requested and not item.lease_lost:
            reason = item.cancel_reason
            message = "replaced by a newer run" if reason == "replaced" else "cancelled"
            return Decision(
                AttemptOutcome.CANCELLED, RunState.CANCELLED, None, reason, None, message
            )
        if item.lease_lost:
            return Decision(
                AttemptOutcome.CANCELLED, RunState.SCHEDULED, None, "lease_lost", None, "lease lost"
            )
        started = item.started_here is not None
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

    def _finish_now(self, item: _InFlight, decision: Decision | None) -> None:
        """:meth:`_finish` of an attempt that reported nothing and opened no transaction: no
        I/O, so no cancel can come between the outcome and its submission."""
        assert item.session is not None
        item.session.close_writers()
        if decision is not None:
            self.observer.ending(item.claimed.run, item.began)
            self._submit(item, decision)

    async def _finish(self, item: _InFlight, decision: Decision | None) -> None:
        """Write the attempt's outcome (``None``: it never started, nothing to write). Its
        checkpoints are stored first; an exactly-once attempt that opened a transaction
        commits it with the outcome, or rolls it back."""
        session = item.session
        assert session is not None
        try:
            if decision is None:
                return
            self.observer.ending(item.claimed.run, item.began)
            await session.flush()
            if session.in_transaction and decision.outcome is AttemptOutcome.SUCCEEDED:
                completion = self._completion(item, decision)
                try:
                    applied = await session.commit(completion)
                except Exception as exc:
                    # unknown whether it committed: submit a failure; it is refused (stale)
                    # if the commit did happen, else the run is retried
                    log.warning("run %s: exactly-once commit failed: %s", item.claimed.run.id, exc)
                    self._submit(item, self._failed(item, exc, AttemptOutcome.FAILED))
                    return
                if not applied:
                    log.warning(
                        "run %s: attempt %d was stale; its transaction was rolled back",
                        item.claimed.run.id,
                        item.claimed.run.attempt,
                    )
                self._written([completion], [applied])
                if self.completer.listener is not None:
                    self.completer.listener(completion, applied)
                return
            await session.close()  # roll back an exactly-once attempt that did not succeed
            self._submit(item, decision)
        finally:
            await session.close()

    def _submit(self, item: _InFlight, decision: Decision) -> None:
        self.completer.submit(self._completion(item, decision))

    def _completion(self, item: _InFlight, decision: Decision) -> RunCompletion:
        run = item.claimed.run
        started = item.started_here
        succeeded = decision.next_state is RunState.SUCCEEDED
        return _new_completion(  # every field, in _COMPLETION_FIELDS order (one per run)
            run.id,
            run.token,
            self.id,
            run.attempt,
            run.claimed_at or self._db_now(),
            started,
            decision.outcome,
            decision.next_state,
            decision.available_at,
            decision.reason,
            decision.error_class,
            decision.error_message,
            decision.traceback,
            item.claimed.one_shot and run.trigger is RunTrigger.SCHEDULE,
            started is None or decision.reason == "circuit_open",  # refund_attempt
            item.result if succeeded else None,
            item.role,
            item.outbox if succeeded else None,
        )

    # --- heartbeat ------------------------------------------------------------------------

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        interval = self.settings.heartbeat_interval
        delay = interval
        while not stop.is_set():
            await first_of(stop.wait(), asyncio.sleep(delay), self._beat_now.wait())
            if stop.is_set():
                return
            self._beat_now.clear()
            self.log_summary()
            try:
                await self.heartbeat_once()
                await self.report_breakers()
                delay = interval
            except Exception as exc:
                # retry sooner than the interval, so a short outage does not cost the leases
                delay = min(interval, 0.2 if delay >= interval else delay * 2)
                if isinstance(exc, self.store.transient_errors):
                    log.warning("heartbeat failed (database unreachable? %s); retrying", exc)
                else:
                    log.exception("heartbeat failed; leases may lapse if this persists")

    async def report_breakers(self) -> None:
        """Write this worker's breakers that are not closed, if any changed since the last
        report (the API, the dashboard and the ``breaker_open`` alert read them)."""
        version = self.breakers.version
        if version == self._breakers_reported:
            return
        await self.store.breakers_report(self.id, self.breakers.snapshot(self.id))
        self._breakers_reported = version

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
            if item.claimed.run.id not in kept and not item.done:
                with bind_run(item.claimed.run):
                    log.warning(
                        "run %s: lease lost (token %d); stopping it here",
                        item.claimed.run.id,
                        item.claimed.run.token,
                    )
                item.lease_lost = True
                self._stop_run(item)
        await self._stop_requested([i for i in items if i.claimed.run.id in kept and not i.done])

    async def _stop_requested(self, items: list[_InFlight]) -> None:
        """Stop those of ``items`` a cancel or a replace asks to stop."""
        if not items:
            return
        stops = await self.store.runs_stop_requested(
            [(i.claimed.run.id, i.claimed.run.token) for i in items]
        )
        for item in items:
            reason = stops.get(item.claimed.run.id)
            if reason is not None and not item.done and not item.cancel_requested:
                with bind_run(item.claimed.run):
                    if reason == "replaced":
                        log.info(
                            "run %s: replaced by a newer run; stopping it", item.claimed.run.id
                        )
                    else:
                        log.info("run %s: cancel requested; stopping it", item.claimed.run.id)
                item.cancel_requested = True
                item.cancel_reason = reason
                self._stop_run(item)

    async def _watch_cancels(self, stop: asyncio.Event) -> None:
        """Stop a run as soon as the store announces it must stop (a ``replace``: PostgreSQL
        NOTIFY, SQLite this process's writes) rather than at the next heartbeat."""
        epoch = 0
        while not stop.is_set():
            try:
                epoch, ids = await self.store.wait_for_cancels(epoch, SUMMARY_INTERVAL)
                items = [
                    i
                    for i in self._inflight.values()
                    if not i.done and (ids is None or i.claimed.run.id in ids)
                ]
                await self._stop_requested(items)
            except Exception as exc:  # the heartbeat still checks; try again shortly
                log.warning("checking for runs to stop failed: %s", exc)
                await first_of(stop.wait(), asyncio.sleep(1.0))

    async def _await_replaced_thread(self, item: _InFlight) -> bool:
        """A replaced run's sync task keeps its thread: the attempt ends (and the successor
        starts) when it returns, or when the store cancels the run past its replace_timeout
        (this worker then loses the lease, which cancels this wait). False if this wait was
        cancelled (the worker shuts down, or the lease was lost) while the thread still runs:
        then the attempt must not be recorded; True otherwise."""
        thread = item.thread
        if thread is None or item.cancel_reason != "replaced" or not thread.abandon():
            return True
        log.info(
            "run %s: replaced; waiting for its sync task to return (it should check ctx.cancelled)",
            item.claimed.run.id,
        )
        try:
            await thread.exited()
        except asyncio.CancelledError:
            log.warning(
                "run %s: replaced, and its sync task has not returned; its outcome is not "
                "recorded here, the run's lease will lapse",
                item.claimed.run.id,
            )
            return False
        return True

    def _stop_run(self, item: _InFlight) -> None:
        """Raise ``ctx.cancelled`` and cancel the run (a sync task's thread cannot be
        interrupted: it is abandoned, and should poll ``ctx.cancelled``)."""
        if item.session is not None:
            item.session.signal_cancel()
        self._cancel(item)

    @property
    def in_flight(self) -> int:
        return len(self._inflight)


def misfired_jobs(names: list[str], shown: int = 5) -> str:
    """``nightly (3 runs), reports`` — the jobs whose runs were skipped as misfired, most
    runs first, at most ``shown`` of them named."""
    counts = Counter(names).most_common()
    named = [f"{n} ({c} runs)" if c > 1 else n for n, c in counts[:shown]]
    more = f" and {len(counts) - shown} more jobs" if len(counts) > shown else ""
    return ", ".join(named) + more
