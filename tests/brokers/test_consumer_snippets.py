"""The consumer dedupe snippets of docs/brokers.md, taken from the page and run against the
real brokers: a message the relay published twice (its relay crashed before marking it sent)
is handled once by each."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from duetime._config import Settings
from duetime._outbox import OutboxClaimParams
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.brokers.publish import open_publisher
from duetime.testing import FrozenApp, FrozenClock
from duetime.worker.relay import BACKOFF_CAP
from tests.brokers.brokerkit import CLOSED, Consumer, brokers_setting, relay_all, relay_for
from tests.brokers.test_relay import run_feed

PAGE = Path(__file__).resolve().parents[2] / "docs" / "brokers.md"


def snippet(kind: str) -> dict[str, Any]:
    """The namespace the page's ``consumer snippet: <kind>`` block defines."""
    lines = PAGE.read_text().splitlines()
    start = lines.index(f"<!-- consumer snippet: {kind} -->") + 2
    end = lines.index("```", start)
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines[start:end]), f"{PAGE}:{start}", "exec"), namespace)
    return namespace


async def published_twice(store_url: str, clock: FrozenClock, broker: Consumer) -> None:
    """Two messages in ``broker``, each published twice with the same id."""
    down = brokers_setting(broker.kind, CLOSED[broker.kind])
    up = brokers_setting(broker.kind)
    async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=down)) as app:
        await run_feed(app, broker.target, 2)
        clock.advance(seconds=BACKOFF_CAP + 1)
        rows = await app.store.outbox_claim(OutboxClaimParams(connections=["b"], lease=10))
        crashed = open_publisher(parse_brokers(up)["b"], lambda value: value)
        await crashed.publish(rows)
        await crashed.close()
        clock.advance(seconds=11)
        assert (await relay_all(relay_for(app.store, up))).sent == 2


@pytest.mark.parametrize("broker", ["redis"], indirect=True)
async def test_the_redis_snippet_handles_each_message_once(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    await published_twice(store_url, clock, broker)
    handle_once = snippet("redis")["handle_once"]
    handled: list[bytes] = []

    async def handle(fields: dict[bytes, bytes]) -> None:
        handled.append(fields[b"duetime-message-id"])

    client = broker.client  # type: ignore[attr-defined]
    entries = await client.xrange(broker.stream)  # type: ignore[attr-defined]
    assert len(entries) == 4
    try:
        answers = [await handle_once(client, fields, handle) for _, fields in entries]
    finally:
        await client.delete(*(b"seen:" + f[b"duetime-message-id"] for _, f in entries))
    assert sorted(answers) == [False, False, True, True]
    assert len(handled) == len(set(handled)) == 2


@pytest.mark.parametrize("broker", ["rabbitmq"], indirect=True)
async def test_the_rabbitmq_snippet_handles_each_message_once(
    store_url: str, clock: FrozenClock, broker: Consumer, tmp_path: Path
) -> None:
    await published_twice(store_url, clock, broker)
    handle_once = snippet("rabbitmq")["handle_once"]
    db = sqlite3.connect(tmp_path / "consumer.db")
    db.execute("CREATE TABLE effects (n INTEGER)")
    queue = broker.queue  # type: ignore[attr-defined]
    answers = []
    while (message := await queue.get(no_ack=False, fail=False)) is not None:
        answers.append(
            handle_once(
                db, message.message_id, lambda d: d.execute("INSERT INTO effects VALUES (1)")
            )
        )
        await message.ack()
    assert sorted(answers) == [False, False, True, True]
    assert db.execute("SELECT count(*) FROM effects").fetchone() == (2,)
