"""The transactional outbox (docs/brokers.md): a broker run's message is inserted with its
fenced completion and only then; claims, sent marks, retries, dead messages, replay, depth
and pruning — on both stores."""

from __future__ import annotations

from datetime import datetime

from storekit import TENANT, complete, completion, get_run, running_run, s

from duetime._outbox import OutboxClaimParams, OutboxMessage, OutboxRetry, message_id
from duetime._types import AttemptOutcome, RunState
from duetime.store import Store
from duetime.store.base import ClaimedRun


def message(claimed: ClaimedRun, connection: str = "events") -> OutboxMessage:
    run = claimed.run
    return OutboxMessage(
        tenant=run.tenant,
        run_id=run.id,
        attempt=run.attempt,
        connection=connection,
        target={"type": "redis", "connection": connection, "stream": "s"},
        body='{"n": 1}',
        headers={"duetime-run-id": str(run.id), "duetime-attempt": str(run.attempt)},
    )


async def claim(store: Store, now: datetime, *connections: str, lease: float = 30.0) -> list:  # type: ignore[type-arg]
    return await store.outbox_claim(
        OutboxClaimParams(connections=connections or ("events",), now=now, lease=lease)
    )


async def test_message_commits_with_the_completion(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    done = completion(claimed, outbox=message(claimed))

    assert await complete(store, t0 + s(1), done) == [True]

    assert (await get_run(store, claimed.run.id)).state is RunState.SUCCEEDED
    (row,) = await claim(store, t0 + s(1))
    assert row.message_id == message_id(claimed.run.id, claimed.run.attempt)
    assert row.run_id == claimed.run.id
    assert row.tenant == TENANT
    assert row.connection == "events"
    assert row.target == {"type": "redis", "connection": "events", "stream": "s"}
    assert row.body == '{"n": 1}'
    assert row.headers["duetime-run-id"] == str(claimed.run.id)
    assert row.created_at == t0 + s(1)
    assert row.tries == 1


async def test_a_stale_completion_writes_no_message(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    stale = completion(claimed, token=claimed.run.token - 1, outbox=message(claimed))

    assert await complete(store, t0 + s(1), stale) == [False]

    assert await claim(store, t0 + s(1)) == []
    assert (await store.outbox_depth()).pending == 0


async def test_plain_runs_in_the_same_batch_are_unaffected(store: Store, t0: datetime) -> None:
    broker = await running_run(store, t0, "a")
    plain = await running_run(store, t0, "b")
    applied = await complete(
        store,
        t0 + s(1),
        completion(broker, outbox=message(broker)),
        completion(plain, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD),
    )
    assert applied == [True, True]
    assert [r.run_id for r in await claim(store, t0 + s(1))] == [broker.run.id]
    assert (await get_run(store, plain.run.id)).state is RunState.DEAD


async def test_claim_hides_rows_for_the_lease_and_filters_connections(
    store: Store, t0: datetime
) -> None:
    one = await running_run(store, t0, "a")
    two = await running_run(store, t0, "b")
    await complete(
        store,
        t0 + s(1),
        completion(one, outbox=message(one, "events")),
        completion(two, outbox=message(two, "other")),
    )
    assert [r.run_id for r in await claim(store, t0 + s(1), "events", lease=10)] == [one.run.id]
    assert await claim(store, t0 + s(5), "events") == []  # held by the first claim's lease
    (again,) = await claim(store, t0 + s(12), "events")  # the claimer died: claimed again
    assert again.run_id == one.run.id
    assert again.tries == 2
    assert [r.run_id for r in await claim(store, t0 + s(1), "other")] == [two.run.id]


async def test_sent_retry_dead_replay_and_depth(store: Store, t0: datetime) -> None:
    runs = [await running_run(store, t0, name) for name in ("a", "b", "c")]
    await complete(store, t0 + s(1), *(completion(c, outbox=message(c)) for c in runs))
    depth = await store.outbox_depth()
    assert (depth.pending, depth.dead, depth.oldest) == (3, 0, t0 + s(1))
    assert depth.by_connection == {"events": 3}

    a, b, c = await claim(store, t0 + s(1))
    assert await store.outbox_sent([a.id], now=t0 + s(2)) == 1
    assert await store.outbox_sent([a.id], now=t0 + s(3)) == 0  # idempotent
    assert await store.outbox_retry([OutboxRetry(b.id, 5.0, "connection refused")], t0 + s(2))
    assert await store.outbox_dead([(c.id, "NOT_FOUND: no exchange 'x'")], now=t0 + s(2)) == 1

    depth = await store.outbox_depth()
    assert (depth.pending, depth.dead) == (1, 1)
    assert await claim(store, t0 + s(6)) == []
    (retried,) = await claim(store, t0 + s(7))
    assert retried.id == b.id
    assert retried.last_error == "connection refused"

    (dead,) = await store.outbox_dead_list(TENANT)
    assert (dead.id, dead.last_error, dead.dead_at) == (
        c.id,
        "NOT_FOUND: no exchange 'x'",
        t0 + s(2),
    )
    assert await store.outbox_dead_list("someone-else") == []
    assert await store.outbox_replay("someone-else", None, now=t0 + s(8)) == 0
    assert await store.outbox_replay(TENANT, [c.id], now=t0 + s(8)) == 1
    assert await store.outbox_dead_list(TENANT) == []
    (replayed,) = await claim(store, t0 + s(8))
    assert (replayed.id, replayed.tries) == (c.id, 1)


async def test_prune_deletes_sent_rows_in_batches(store: Store, t0: datetime) -> None:
    runs = [await running_run(store, t0, f"j{i}") for i in range(5)]
    await complete(store, t0 + s(1), *(completion(c, outbox=message(c)) for c in runs))
    rows = await claim(store, t0 + s(1))
    await store.outbox_sent([r.id for r in rows[:4]], now=t0 + s(2))
    await store.outbox_dead([(rows[4].id, "refused")], now=t0 + s(2))

    assert await store.outbox_prune(t0 + s(2), limit=10) == 0  # strictly before the cut
    assert await store.outbox_prune(t0 + s(3), limit=3) == 3
    assert await store.outbox_prune(t0 + s(3), limit=3) == 1
    assert await store.outbox_prune(t0 + s(3), limit=3) == 0
    assert len(await store.outbox_dead_list(None)) == 1  # a dead message is never pruned
