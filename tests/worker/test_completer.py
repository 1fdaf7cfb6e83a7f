"""The completer's batching against a scripted store: with a linger, outcomes that arrive
while the first waits go in one write; a full batch does not wait; stopping cuts the linger
short and writes everything submitted."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime

from tests.store import storekit
from tests.store.storekit import running_run

from duetime._outbox import OutboxMessage
from duetime._types import AttemptOutcome, RunState
from duetime.store import Store
from duetime.store.base import RunCompletion, RunsCompleteParams
from duetime.worker.completer import Completer

LONG = 3600.0
"""A linger no test waits out: only a full batch or a stop ends it."""


class ScriptedStore:
    """Records each ``runs_complete`` batch; every completion applies."""

    def __init__(self) -> None:
        self.calls: list[list[uuid.UUID]] = []
        self.written = asyncio.Event()

    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]:
        self.calls.append([c.run_id for c in params.completions])
        self.written.set()
        return [True] * len(params.completions)


def completion() -> RunCompletion:
    return RunCompletion(
        run_id=uuid.uuid4(),
        token=1,
        worker_id="w",
        attempt=1,
        claimed_at=datetime(2026, 1, 1, tzinfo=UTC),
        started_at=None,
        outcome=AttemptOutcome.SUCCEEDED,
        next_state=RunState.SUCCEEDED,
    )


async def turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_outcomes_arriving_while_the_first_lingers_go_in_one_write() -> None:
    store = ScriptedStore()
    completer = Completer(store, batch=10, linger=LONG)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(completer.run(stop))
    first, second = completion(), completion()
    completer.submit(first)
    await turns()
    assert store.calls == []  # lingering
    completer.submit(second)
    await turns()
    assert store.calls == []
    stop.set()  # no more lingering: everything submitted is written, in one batch
    await asyncio.wait_for(loop, 5)
    assert store.calls == [[first.run_id, second.run_id]]
    assert completer.pending == 0


async def test_a_full_batch_does_not_linger() -> None:
    store = ScriptedStore()
    completer = Completer(store, batch=2, linger=LONG)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(completer.run(stop))
    batch = [completion(), completion()]
    for c in batch:
        completer.submit(c)
    await asyncio.wait_for(store.written.wait(), 5)
    assert store.calls == [[c.run_id for c in batch]]
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_without_a_linger_each_write_takes_what_is_queued() -> None:
    store = ScriptedStore()
    completer = Completer(store, batch=10)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(completer.run(stop))
    first = completion()
    completer.submit(first)
    await asyncio.wait_for(store.written.wait(), 5)
    assert store.calls == [[first.run_id]]
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_pending_runs_count_each_outcome_until_its_batch_is_written() -> None:
    """Per-run bookkeeping kept per batch (issue 15): a run with two outcomes queued (a retry
    that ended before the first was written) stays pending until both are; batches are cut at
    ``batch`` and every submitted outcome is written exactly once, in order."""
    store = ScriptedStore()
    completer = Completer(store, batch=2)  # type: ignore[arg-type]
    first = completion()
    again = dataclasses.replace(first, token=2, attempt=2)
    other = completion()
    for c in (first, again, other):
        completer.submit(c)
    assert completer.pending == 3
    assert completer.pending_runs() == {first.run_id, other.run_id}
    heard: list[uuid.UUID] = []
    completer.listener = lambda c, ok: heard.append(c.run_id)
    completer.after_batch = lambda batch, applied: heard.append(uuid.UUID(int=0))  # its end
    stop = asyncio.Event()
    stop.set()  # write everything submitted, then end
    await asyncio.wait_for(completer.run(stop), 5)
    assert store.calls == [[first.run_id, first.run_id], [other.run_id]]
    assert heard == [first.run_id, first.run_id, uuid.UUID(int=0), other.run_id, uuid.UUID(int=0)]
    assert (completer.pending, completer.pending_runs()) == (0, set())


async def test_a_broker_run_s_outcome_does_not_linger(store: Store, t0: datetime) -> None:
    """A broker run's message is published after its completion's write: that write does not
    wait out the linger for company (decision 0040), as a workflow step's does not; a real
    store writes it."""
    claimed = await running_run(store, t0, "broker")
    run = claimed.run
    message = OutboxMessage(
        run.tenant, run.id, run.attempt, "events", {"type": "redis", "stream": "s"}, "{}", {}
    )
    heard: asyncio.Queue[tuple[uuid.UUID, bool]] = asyncio.Queue()
    completer = Completer(
        store, batch=10, linger=LONG, listener=lambda c, ok: heard.put_nowait((c.run_id, ok))
    )
    stop = asyncio.Event()
    loop = asyncio.create_task(completer.run(stop))
    try:
        completer.submit(storekit.completion(claimed, outbox=message))
        # a bound on a failure, not a measurement: lingering would take an hour
        assert await asyncio.wait_for(heard.get(), 60) == (run.id, True)
    finally:
        stop.set()
        await asyncio.wait_for(loop, 60)
    assert (await store.outbox_depth()).pending == 1
