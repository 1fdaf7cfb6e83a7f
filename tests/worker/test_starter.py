"""The starter's batching, retries and shutdown, against a scripted store: starts that queue up
during a write go together in the next; a failed try that was written after all counts; a
cancelled run is left out; another error is isolated to its run; stopping answers everyone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from duetime._types import RunState
from duetime.store.base import RunsStartParams
from duetime.worker.starter import ASK_TICK, LEAD_MEMORY, MIN_LEAD, Starter

TENANT = "acme"


class ScriptedStore:
    """``runs_start`` answers with ``script(call_number, params)``; it waits for ``release``
    while ``hold`` is set. ``rows`` is what ``run_get`` reads."""

    transient_errors = (ConnectionError,)

    def __init__(self, script: Callable[[int, RunsStartParams], set[uuid.UUID]]) -> None:
        self.script = script
        self.calls: list[list[tuple[uuid.UUID, int]]] = []
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.hold = False
        self.rows: dict[uuid.UUID, Any] = {}

    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        self.calls.append(list(params.runs))
        self.writing.set()
        if self.hold:
            await self.release.wait()
        return self.script(len(self.calls), params)

    async def run_get(self, tenant: str, run_id: uuid.UUID) -> Any:
        assert tenant == TENANT
        return self.rows[run_id]


def all_start(call: int, params: RunsStartParams) -> set[uuid.UUID]:
    return {run_id for run_id, _ in params.runs}


def ids(count: int) -> list[uuid.UUID]:
    return [uuid.uuid4() for _ in range(count)]


async def started(starter: Starter, run_id: uuid.UUID, token: int = 1) -> bool:
    return await starter.start(run_id, token, TENANT)


async def queued(starter: Starter, count: int) -> None:
    """Let the tasks just created run up to their start request (one turn of the loop), then
    check that ``count`` requests wait for the next batch."""
    await asyncio.sleep(0)
    assert starter.pending == count


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR", logger="duetime.worker")


async def test_starts_queued_during_a_write_go_together_in_the_next() -> None:
    store = ScriptedStore(all_start)
    store.hold = True
    starter = Starter(store, lease_ttl=30.0)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(starter.run(stop))
    first, *rest = ids(4)
    answers = [asyncio.create_task(started(starter, first))]
    await store.writing.wait()
    answers += [asyncio.create_task(started(starter, r)) for r in rest]
    await queued(starter, len(rest))
    store.release.set()
    assert await asyncio.wait_for(asyncio.gather(*answers), 5) == [True] * 4
    assert store.calls == [[(first, 1)], [(r, 1) for r in rest]]
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_a_failed_try_that_was_written_counts_as_started() -> None:
    written, lost = ids(2)

    def script(call: int, params: RunsStartParams) -> set[uuid.UUID]:
        if call == 1:  # committed, but the answer is lost with the connection
            raise ConnectionError("server closed the connection")
        return set()  # the retry: already started, so not started again

    store = ScriptedStore(script)
    when = datetime.now(UTC)
    store.rows = {
        written: SimpleNamespace(state=RunState.RUNNING, token=1, started_at=when),
        lost: SimpleNamespace(state=RunState.RUNNING, token=1, started_at=None),
    }
    starter = Starter(store)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(starter.run(stop))
    answers = asyncio.gather(started(starter, written), started(starter, lost))
    assert await asyncio.wait_for(answers, 5) == [True, False]
    assert len(store.calls) == 2
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_a_cancelled_start_is_left_out_of_the_batch() -> None:
    store = ScriptedStore(all_start)
    store.hold = True
    starter = Starter(store)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(starter.run(stop))
    first, gone, kept = ids(3)
    head = asyncio.create_task(started(starter, first))
    await store.writing.wait()
    cancelled = asyncio.create_task(started(starter, gone))
    other = asyncio.create_task(started(starter, kept))
    await queued(starter, 2)
    cancelled.cancel()
    store.release.set()
    assert await asyncio.wait_for(asyncio.gather(head, other), 5) == [True, True]
    assert cancelled.cancelled()
    assert store.calls == [[(first, 1)], [(kept, 1)]]
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_another_error_is_tried_run_by_run_and_raised_to_its_run() -> None:
    good, bad = ids(2)

    def script(call: int, params: RunsStartParams) -> set[uuid.UUID]:
        if any(run_id == bad for run_id, _ in params.runs):
            raise ValueError("bad run")
        return all_start(call, params)

    store = ScriptedStore(script)
    starter = Starter(store)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(starter.run(stop))
    answers = asyncio.gather(started(starter, good), started(starter, bad), return_exceptions=True)
    got = await asyncio.wait_for(answers, 5)
    assert got[0] is True
    assert isinstance(got[1], ValueError)
    stop.set()
    await asyncio.wait_for(loop, 5)


async def test_stopping_answers_every_start_and_finishes_the_write() -> None:
    store = ScriptedStore(all_start)
    store.hold = True
    starter = Starter(store)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(starter.run(stop))
    first, *queued_ids = ids(3)
    writing = asyncio.create_task(started(starter, first))
    await store.writing.wait()
    waiting = [asyncio.create_task(started(starter, r)) for r in queued_ids]
    await queued(starter, len(queued_ids))
    stop.set()
    store.release.set()
    assert await asyncio.wait_for(writing, 5) is True
    assert await asyncio.wait_for(asyncio.gather(*waiting), 5) == [False, False]
    await asyncio.wait_for(loop, 5)
    assert len(store.calls) == 1
    assert await started(starter, uuid.uuid4()) is False  # after the end: at once


async def test_stopping_ends_the_retries_of_an_unreachable_database() -> None:
    def script(call: int, params: RunsStartParams) -> set[uuid.UUID]:
        raise ConnectionError("connection refused")

    store = ScriptedStore(script)
    starter = Starter(store)  # type: ignore[arg-type]
    stop = asyncio.Event()
    loop = asyncio.create_task(starter.run(stop))
    answer = asyncio.create_task(started(starter, uuid.uuid4()))
    await store.writing.wait()
    stop.set()
    assert await asyncio.wait_for(answer, 5) is False
    await asyncio.wait_for(loop, 5)


async def test_asks_for_close_instants_share_one_tick_at_least_the_lead_ahead() -> None:
    starter = Starter(ScriptedStore(all_start), max_lead=0.25)  # type: ignore[arg-type]
    now = asyncio.get_running_loop().time()
    asks = []
    for until in (1.0, 1.0 + ASK_TICK / 4, 1.0 + ASK_TICK / 2, 0.7):
        delay = starter.ask_delay(until, now)
        ask_at, instant = now + delay, now + until
        ticks = ask_at / ASK_TICK
        assert abs(ticks - round(ticks)) < 1e-6  # on the grid
        # at least the lead ahead of the instant, less than a tick more
        assert instant - starter.lead() - ASK_TICK - 1e-6 < ask_at <= instant - starter.lead()
        asks.append(round(ticks))
    assert starter.lead() == MIN_LEAD  # nothing measured yet: the floor
    assert max(asks[:3]) - min(asks[:3]) <= 1  # instants within half a tick: one or two asks
    assert asks[3] < asks[0]
    # a run whose instant is nearer than the lead asks at once
    assert starter.ask_delay(MIN_LEAD / 2) <= 0
    # the lead never exceeds max_lead, even below the floor
    assert Starter(ScriptedStore(all_start), max_lead=0.01).lead() == 0.01  # type: ignore[arg-type]


def test_the_lead_remembers_a_slow_start_and_forgets_it_gradually() -> None:
    starter = Starter(ScriptedStore(all_start), max_lead=1.0)  # type: ignore[arg-type]
    starter._observe(0.004, now=100.0)
    assert starter.lead() == MIN_LEAD  # fast answers: the floor
    starter._observe(0.2, now=101.0)  # a spike
    assert starter.lead() == pytest.approx(0.4)
    starter._observe(0.004, now=101.0 + LEAD_MEMORY)  # fast again: the spike's memory halved
    assert starter.lead() == pytest.approx(0.2)
    starter._observe(0.004, now=101.0 + 4 * LEAD_MEMORY)
    assert starter.lead() == MIN_LEAD
    starter._observe(5.0, now=200.0)
    assert starter.lead() == 1.0  # never beyond max_lead
