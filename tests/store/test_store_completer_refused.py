"""A completion the database refuses for what it holds does not hold up the others: the
completer splits the batch until the one at fault is alone, writes the rest, and drops that
one after a few tries (its lease then runs out and the reaper decides)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime

import pytest
from storekit import completion, get_run, running_run, s

from duetime._types import RunState
from duetime.store import Store
from duetime.worker import completer as completer_module
from duetime.worker.completer import Completer


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_a_refused_completion_is_dropped_and_the_rest_are_written(
    store: Store, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(completer_module, "REFUSED_TRIES", 2)
    runs = [await running_run(store, t0 + s(i), f"job{i}") for i in range(4)]
    done = [completion(r) for r in runs]
    # not JSON: PostgreSQL refuses the batch's result cast (a data error, not an outage)
    done[2] = dataclasses.replace(done[2], result="{not json")
    answers: dict[str, bool] = {}
    writer = Completer(store, listener=lambda c, ok: answers.__setitem__(str(c.run_id), ok))
    for c in done:
        writer.submit(c)
    stop = asyncio.Event()
    stop.set()  # write what was submitted, then return
    await asyncio.wait_for(writer.run(stop), 30)
    assert answers == {str(r.run.id): i != 2 for i, r in enumerate(runs)}
    states = [(await get_run(store, r.run.id)).state for r in runs]
    assert states == [RunState.SUCCEEDED, RunState.SUCCEEDED, RunState.RUNNING, RunState.SUCCEEDED]
