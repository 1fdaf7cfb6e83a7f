"""Broker targets end to end (docs/brokers.md), on each store and each real broker: jobs with
a broker target run through the worker, their messages commit with their completions, a relay
publishes them, and a consumer reads back exactly one message per succeeded run, carrying the
run's payload, id, scheduled instant, attempt, token and message id."""

from __future__ import annotations

from datetime import datetime

import pytest

from duetime._config import Settings
from duetime._outbox import broker_task
from duetime._types import RunState, WorkerInfo
from duetime.errors import ValidationError
from duetime.testing import FrozenApp, FrozenClock, drain
from tests.brokers.brokerkit import Consumer, brokers_setting, relay_all, relay_for


async def test_published_messages_match_the_runs(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    setting = brokers_setting(broker.kind)
    settings = Settings(database_url=store_url, brokers=setting)
    async with FrozenApp(store_url, clock=clock, settings=settings) as app:
        for i in range(3):
            await app.schedule(
                f"feed-{i}",
                target=broker.target,
                now=True,
                payload={"n": i, "text": "a b;$()"},
                allow_unregistered=True,
            )
        runs = await drain(app)
        assert [r.state for r in runs] == [RunState.SUCCEEDED] * 3
        assert {r.task for r in runs} == {broker_task("b")}
        await relay_all(relay_for(app.store, setting))
        assert (await app.outbox.depth()).pending == 0

        received = await broker.read()
    by_id = {m.headers["duetime-message-id"]: m for m in received}
    assert len(received) == len(by_id) == 3
    for run in runs:
        message = by_id[f"{run.id}:{run.attempt}"]
        assert message.body == run.payload
        assert message.headers["duetime-run-id"] == str(run.id)
        assert message.headers["duetime-attempt"] == str(run.attempt)
        assert message.headers["duetime-token"] == str(run.token)
        assert message.headers["duetime-job"] == run.job_name
        assert message.headers["duetime-tenant"] == run.tenant
        assert datetime.fromisoformat(message.headers["duetime-scheduled-for"]) == run.scheduled_for
        if broker.kind == "rabbitmq":
            assert message.headers["message_id"] == f"{run.id}:{run.attempt}"
        if broker.kind == "nats":
            assert message.headers["Nats-Msg-Id"] == f"{run.id}:{run.attempt}"


async def test_registration_refuses_a_connection_no_worker_serves(
    store_url: str, clock: FrozenClock
) -> None:
    target = {"type": "redis", "connection": "events", "stream": "s"}
    async with FrozenApp(store_url, clock=clock) as app:
        with pytest.raises(ValidationError, match=r"duetime\.broker:events"):
            await app.schedule("feed", target=target, now=True)
        now = clock.now()
        await app.store.worker_register(
            WorkerInfo("w", "h", 1, (broker_task("events"),), ("*",), now, now)
        )
        job = await app.schedule("feed", target=target, now=True)
        assert job.task == broker_task("events")
        assert job.target == target


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "redis", "connection": "b"}, "target.stream"),
        ({"type": "redis", "connection": "b", "stream": ""}, "target.stream"),
        ({"type": "redis", "connection": "b", "stream": "s", "url": "redis://x"}, "target.url"),
        ({"type": "rabbitmq", "stream": "s"}, "target.stream"),
        ({"type": "rabbitmq", "exchange": "e"}, "target.connection"),
        ({"type": "rabbitmq", "connection": "b c", "exchange": "e"}, "target.connection"),
        ({"type": "nats", "connection": "b", "subject": "a.*"}, "target.subject"),
        ({"type": "nats", "connection": "b", "subject": 5}, "target.subject"),
    ],
)
async def test_bad_broker_targets_name_the_field(
    store_url: str, clock: FrozenClock, target: dict[str, object], field: str
) -> None:
    async with FrozenApp(store_url, clock=clock) as app:
        with pytest.raises(ValidationError) as caught:
            await app.schedule("feed", target=target, now=True, allow_unregistered=True)
    assert caught.value.field == field
