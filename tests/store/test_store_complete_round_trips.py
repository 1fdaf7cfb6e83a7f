"""Round trips of a completion on PostgreSQL, counted on the wire (wirekit.py): a broker run's
fenced completion and its outbox row are one statement, its clock read included — one round
trip, autocommitted (decision 0040); with run events on, the same statement in a transaction,
then the events, without a clock read or an outbox statement of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from storekit import completion, get_run, running_run
from test_store_outbox import claim, message
from test_store_run_events import events_on
from wirekit import Wire, counted_store

from duetime._outbox import message_id
from duetime._types import AttemptOutcome, RunState
from duetime.store import Store
from duetime.store.base import RunsCompleteParams

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


@pytest.fixture
async def wired(store_url: str) -> AsyncIterator[tuple[Store, Wire]]:
    """A store on the database clock (a completion without ``now`` reads the database's)
    whose every round trip passes through a counting relay."""
    async with counted_store(store_url) as wired:
        yield wired


def outbox_statements(statements: list[str]) -> list[str]:
    return [s for s in statements if "INSERT INTO outbox" in s]


async def test_a_broker_run_completes_in_one_round_trip(
    wired: tuple[Store, Wire], t0: datetime
) -> None:
    store, wire = wired
    broker = await running_run(store, t0, "broker")
    plain = await running_run(store, t0, "plain")
    stale = await running_run(store, t0, "stale")
    batch = [
        completion(broker, outbox=message(broker)),
        completion(plain, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD),
        completion(stale, token=stale.run.token - 1, outbox=message(stale)),
    ]
    wire.rounds.clear()

    assert await store.runs_complete(RunsCompleteParams(batch)) == [True, True, False]

    (statement,) = wire.statements()  # no clock read, no BEGIN/COMMIT, no insert of its own
    assert outbox_statements([statement]) == [statement]
    # the same rows as ever: the run ended, its message at the completion's instant; the
    # fence refused the stale attempt and wrote no message for it
    ended = await get_run(store, broker.run.id)
    assert ended.state is RunState.SUCCEEDED
    assert ended.finished_at is not None
    (row,) = await claim(store, ended.finished_at)
    assert row.message_id == message_id(broker.run.id, broker.run.attempt)
    assert row.created_at == ended.finished_at
    assert (await get_run(store, plain.run.id)).state is RunState.DEAD
    assert (await get_run(store, stale.run.id)).state is RunState.RUNNING


async def test_a_completion_sent_again_writes_its_message_once(
    wired: tuple[Store, Wire], t0: datetime
) -> None:
    """A batch written again (its first answer lost on the way back): the fence refuses the
    second write, and the outbox keeps the one message."""
    store, wire = wired
    broker = await running_run(store, t0, "broker")
    done = completion(broker, outbox=message(broker))
    assert await store.runs_complete(RunsCompleteParams([done])) == [True]
    wire.rounds.clear()
    assert await store.runs_complete(RunsCompleteParams([done])) == [False]
    assert len(wire.statements()) == 1
    ended = (await get_run(store, broker.run.id)).finished_at
    assert ended is not None
    assert [r.run_id for r in await claim(store, ended)] == [broker.run.id]


async def test_with_run_events_the_completion_reads_no_clock_and_inserts_in_its_statement(
    wired: tuple[Store, Wire], t0: datetime
) -> None:
    store, wire = wired
    events_on(store, "succeeded")
    broker = await running_run(store, t0, "broker")
    wire.rounds.clear()

    assert await store.runs_complete(
        RunsCompleteParams([completion(broker, outbox=message(broker))])
    ) == [True]

    begin, complete, events, commit = wire.statements()
    assert (begin, commit) == ("BEGIN", "COMMIT")
    assert outbox_statements([complete, events]) == [complete, events]  # the message, the event
    assert "clock_timestamp() AS now" not in complete + events
    # the message and the event, at the one instant of the transaction
    ended = (await get_run(store, broker.run.id)).finished_at
    assert ended is not None
    rows = sorted(await claim(store, ended), key=lambda r: r.message_id)
    assert [r.message_id for r in rows] == [
        message_id(broker.run.id, broker.run.attempt),
        f"{broker.run.id}:{broker.run.token}:succeeded",
    ]
    assert rows[0].created_at == rows[1].created_at == ended
