"""``drain``: everything due at the frozen clock's instant, materialized and executed — by the
scheduler's own materializer pass and a real :class:`~duetime.worker.worker.Worker` serving one
run at a time, so tasks get the ``ctx``, retries, checkpoints and outcomes of production."""

from __future__ import annotations

import asyncio
import uuid

from duetime._types import Run
from duetime.app import App, AsyncApp
from duetime.scheduler.materializer import Materializer
from duetime.store.base import ClaimedRun, RunCompletion
from duetime.testing.app import frozen_clock_of
from duetime.worker.worker import ClaimTaken, Worker

NO_LOOKAHEAD = 1e-9
"""The drain worker's lookahead: settings refuse 0, and a nanosecond is below both databases'
microsecond resolution, so a claim takes exactly the runs due at the clock's instant."""

ROUNDS_LIMIT = 1000
"""Materialize-and-work rounds one drain may take (a task that triggers itself at once, forever,
would otherwise never let it end)."""


async def drain(app: AsyncApp) -> list[Run]:
    """Materialize every occurrence due at the clock's instant (the scheduler's pass with no
    horizon: nothing ahead of now) and execute every run due then, one at a time in the
    worker's claim order, until nothing is due (a run a task triggers meanwhile included);
    again while a round executed anything (a task may have scheduled a job due now). Returns
    each run that had an attempt here, in the order its first attempt ended, read back in its
    final state. A failed attempt's retry lands at its backoff, after the instant: it waits
    for the clock to be advanced. The clock never moves here. ``app`` must be on a
    :class:`FrozenClock` its store reads (:class:`~duetime.testing.FrozenApp`, the
    ``duetime_app`` fixture)."""
    frozen_clock_of(app)
    materializer = Materializer(app.store, app.settings.with_(scheduler_horizon=0.0))
    order: dict[uuid.UUID, str] = {}  # run id → tenant, in the order attempts ended
    for _ in range(ROUNDS_LIMIT):
        await materializer.run_once()
        ended = await _work_until_idle(app)
        for run_id, tenant in ended:
            order.setdefault(run_id, tenant)
        if not ended:
            return [await app.store.run_get(tenant, run_id) for run_id, tenant in order.items()]
    raise RuntimeError(f"drain: runs kept coming due after {ROUNDS_LIMIT} rounds")


def drain_sync(app: App) -> list[Run]:
    """:func:`drain` for the blocking :class:`App` (on its event-loop thread)."""
    # the store's connections belong to App's private loop: run there, as App's mirrors do
    return app._call(lambda: drain(app.aio))


async def _work_until_idle(app: AsyncApp) -> list[tuple[uuid.UUID, str]]:
    """Serve every task of ``app``'s registry with one runner until a claim made while nothing
    was in flight and no outcome waited to be written takes nothing; the runs whose attempts
    ended (with their tenants), in order."""
    tenants: dict[uuid.UUID, str] = {}
    ended: list[tuple[uuid.UUID, str]] = []

    def started(claimed: ClaimedRun) -> None:
        tenants[claimed.run.id] = claimed.run.tenant

    def heard(completion: RunCompletion, applied: bool) -> None:
        if applied:
            ended.append((completion.run_id, tenants.get(completion.run_id, app.tenant)))

    worker = Worker(
        app.store,
        app.registry,
        app.settings.with_(
            worker_concurrency=1, worker_claim_ahead=0.0, worker_lookahead=NO_LOOKAHEAD
        ),
        clock=app.clock,
        on_start=started,
        on_complete=heard,
    )
    stop = asyncio.Event()
    quiet = [True]  # the next claim is made with nothing in flight or waiting to be written

    def claimed(taken: ClaimTaken) -> None:
        if taken.got == 0 and quiet[0]:
            stop.set()
            return
        quiet[0] = taken.got == 0 and worker.in_flight == 0 and not worker.completer.pending_runs()

    worker.signals.claimed.on(claimed)
    await worker.run(stop)
    return ended
