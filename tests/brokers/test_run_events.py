"""Run events (docs/brokers.md, "Run events"; decision 0031), on each store and each real
broker: with ``DUETIME_RUN_EVENTS`` set, a run's start, success, retry, death and skips are
written to the outbox in the transactions that change the run, a relay publishes them, and a
consumer reads back exactly the events the database's runs and skips account for — each with a
message id of its own. With the setting absent, no event is written."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest

from duetime import _json
from duetime._config import Settings
from duetime._outbox import RUN_EVENT_KINDS
from duetime._types import RetryPolicy, RunState
from duetime.errors import ValidationError
from duetime.store.base import LeasesReapParams, RunsClaimParams
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.brokers.events import parse_run_events
from duetime.testing import FrozenApp, FrozenClock, drain
from tests.brokers.brokerkit import Consumer, brokers_setting, consumer, relay_all, relay_for


def _events_setting(target: dict[str, Any], **more: Any) -> str:
    return _json.dumps({"target": target, **more})


async def test_run_events_match_the_runs(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    setting = brokers_setting(broker.kind)
    settings = Settings(
        database_url=store_url, brokers=setting, run_events=_events_setting(broker.target)
    )
    async with FrozenApp(store_url, clock=clock, settings=settings) as app:
        tries = {"flaky": 0}

        @app.task("ev.ok")
        async def ok(ctx: Any) -> None:
            return None

        @app.task("ev.flaky")
        async def flaky(ctx: Any) -> None:
            tries["flaky"] += 1
            if tries["flaky"] == 1:
                raise RuntimeError("first try fails")

        @app.task("ev.doomed")
        async def doomed(ctx: Any) -> None:
            raise RuntimeError("always fails")

        t0 = clock.now()
        await app.schedule("ok", task="ev.ok", now=True)
        await app.schedule(
            "flaky", task="ev.flaky", now=True, retry=RetryPolicy(max_attempts=2, backoff_cap=1)
        )
        await app.schedule("doomed", task="ev.doomed", now=True, retry=RetryPolicy(max_attempts=1))
        skipper = await app.schedule("skipper", task="duetime.noop", every=60, misfire="skip")
        first = await drain(app)
        clock.advance(10 * 60)  # the flaky run's retry is due; skipper's occurrences missed
        later = await drain(app)
        await relay_all(relay_for(app.store, setting))
        assert (await app.outbox.depth()).pending == 0
        runs = {r.id: r for r in [*first, *later]}
        runs = {i: await app.store.run_get(r.tenant, i) for i, r in runs.items()}
        skips = await app.store.skips_list(app.tenant, skipper.id)
        received = await broker.read()
        skipped_runs = [  # skipped at claim time (overlap, misfire): events with a run
            (m.body, await app.store.run_get(app.tenant, uuid.UUID(m.body["run_id"])))
            for m in received
            if m.body["event"] == "skipped" and m.body["run_id"] is not None
        ]

    ids = [m.headers["duetime-message-id"] for m in received]
    assert len(ids) == len(set(ids)), "one message id per event"
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for m in received:
        assert m.body["message_id"] == m.headers["duetime-message-id"]
        assert m.headers["duetime-event"] == m.body["event"]
        got.setdefault((m.body["job"], m.body["event"]), []).append(m.body)
    by_job = {r.job_name: r for r in runs.values() if r.job_name != "skipper"}
    assert by_job["ok"].state is RunState.SUCCEEDED
    assert by_job["flaky"].state is RunState.SUCCEEDED
    assert by_job["doomed"].state is RunState.DEAD
    skipper_runs = [r for r in runs.values() if r.job_name == "skipper"]
    expected = {
        ("ok", "started"): 1,
        ("ok", "succeeded"): 1,
        ("flaky", "started"): 2,
        ("flaky", "retrying"): 1,
        ("flaky", "succeeded"): 1,
        ("doomed", "started"): 1,
        ("doomed", "dead"): 1,
        ("skipper", "started"): len(skipper_runs),
        ("skipper", "succeeded"): len(skipper_runs),
        ("skipper", "skipped"): len(skips) + len(skipped_runs),
    }
    assert skips, "the scheduler skipped skipper's missed occurrences"
    assert {k: len(v) for k, v in got.items()} == {k: n for k, n in expected.items() if n}

    for job, run in by_job.items():
        (end,) = got[(job, "dead" if job == "doomed" else "succeeded")]
        assert end["run_id"] == str(run.id)
        assert end["tenant"] == run.tenant
        assert end["state"] == run.state.value
        assert end["attempt"] == run.attempt
        assert end["message_id"] == f"{run.id}:{run.token}:{end['event']}"
        assert datetime.fromisoformat(end["scheduled_for"]) == run.scheduled_for
        assert datetime.fromisoformat(end["finished_at"]) == run.finished_at
    assert [e["attempt"] for e in got[("flaky", "started")]] in ([1, 2], [2, 1])
    assert got[("flaky", "retrying")][0]["error_class"] == "RuntimeError"
    recorded = sorted((s.first, s.last, s.count, s.reason) for s in skips)
    published = sorted(
        (
            datetime.fromisoformat(e["scheduled_for"]),
            datetime.fromisoformat(e["last"]),
            e["count"],
            e["reason"],
        )
        for e in got[("skipper", "skipped")]
        if e["run_id"] is None
    )
    assert published == recorded
    for body, run in skipped_runs:
        assert (run.job_name, run.state) == ("skipper", RunState.SKIPPED)
        assert body["reason"] == run.reason
    assert t0 <= min(datetime.fromisoformat(e["at"]) for es in got.values() for e in es)


async def test_run_events_only_of_the_kinds_and_tenants_asked(
    store_url: str, clock: FrozenClock
) -> None:
    broker = await consumer("redis")
    setting = brokers_setting("redis")
    events = _events_setting(broker.target, events=["dead"], tenants=["other"])
    settings = Settings(database_url=store_url, brokers=setting, run_events=events)
    try:
        async with FrozenApp(store_url, clock=clock, settings=settings) as app:

            @app.task("ev.doomed")
            async def doomed(ctx: Any) -> None:
                raise RuntimeError("always fails")

            for tenant in ("default", "other"):
                view = app.for_tenant(tenant)
                one = RetryPolicy(max_attempts=1)
                await view.schedule("doomed", task="ev.doomed", now=True, retry=one)
                await view.schedule("ok", task="duetime.noop", now=True)
            runs = await drain(app)
            await relay_all(relay_for(app.store, setting))
            received = await broker.read()
    finally:
        await broker.close()
    assert len(runs) == 4
    (dead,) = [r for r in runs if r.state is RunState.DEAD and r.tenant == "other"]
    assert [(m.body["event"], m.body["run_id"]) for m in received] == [("dead", str(dead.id))]


async def test_no_event_without_the_setting(store_url: str, clock: FrozenClock) -> None:
    async with FrozenApp(store_url, clock=clock) as app:
        assert app.store.run_events is None
        await app.schedule("ok", task="duetime.noop", now=True)
        (run,) = await drain(app)
        assert run.state is RunState.SUCCEEDED
        assert (await app.outbox.depth()).pending == 0


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("[1]", "DUETIME_RUN_EVENTS"),
        ("{", "DUETIME_RUN_EVENTS"),
        ('{"target": {"type": "redis", "connection": "b", "stream": "s"}, "x": 1}',
         "DUETIME_RUN_EVENTS.x"),
        ('{"target": {"type": "http", "url": "http://x"}}', "DUETIME_RUN_EVENTS.target"),
        ('{"target": {"type": "redis", "connection": "b"}}', "DUETIME_RUN_EVENTS.target.stream"),
        ('{"target": {"type": "nats", "connection": "b", "subject": "s"}}',
         "DUETIME_RUN_EVENTS.target.type"),
        ('{"target": {"type": "redis", "connection": "b", "stream": "s"}, "events": ["fired"]}',
         "DUETIME_RUN_EVENTS.events[0]"),
        ('{"target": {"type": "redis", "connection": "b", "stream": "s"}, "events": []}',
         "DUETIME_RUN_EVENTS.events"),
        ('{"target": {"type": "redis", "connection": "b", "stream": "s"}, "tenants": [""]}',
         "DUETIME_RUN_EVENTS.tenants[0]"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_field(raw: str, field: str) -> None:
    brokers = parse_brokers(brokers_setting("redis", "redis://127.0.0.1:6379/0"))
    with pytest.raises(ValidationError) as caught:
        parse_run_events(raw, brokers)
    assert caught.value.field == field


def test_settings_default_to_every_event_and_tenant() -> None:
    events = parse_run_events('{"target": {"type": "nats", "connection": "a", "subject": "e"}}')
    assert events is not None
    assert events.kinds == frozenset(RUN_EVENT_KINDS)
    assert events.tenants is None
    assert events.target == {"type": "nats", "connection": "a", "subject": "e"}
    assert parse_run_events("  ") is None


async def test_operator_cancels_and_the_reaper_reach_the_broker(
    store_url: str, clock: FrozenClock, broker: Consumer
) -> None:
    """Runs ended outside a completion — a run cancelled by an operator, a job's pending run
    cancelled with its job, a run whose lease the reaper found expired (sent back, then dead)
    — each reach the broker as one event per change, read back and matched with the runs."""
    setting = brokers_setting(broker.kind)
    settings = Settings(
        database_url=store_url, brokers=setting, run_events=_events_setting(broker.target)
    )
    async with FrozenApp(store_url, clock=clock, settings=settings) as app:
        for name in ("cancelled", "with-job", "lost"):
            retry = RetryPolicy(max_attempts=2, backoff_cap=1)
            await app.schedule(name, task="ev.lost", cron="0 0 1 1 *", retry=retry,
                               allow_unregistered=True)  # fmt: skip
        cancelled = await app.cancel_run((await app.trigger("cancelled")).id)
        with_job = await app.trigger("with-job")
        await app.cancel("with-job")
        lost = await app.trigger("lost")
        for _ in range(2):  # claimed, its worker gone: sent back once, then dead
            claim = RunsClaimParams(worker_id="w", tasks=["ev.lost"], limit=1, lease_ttl=30.0,
                                    lookahead=0.0)  # fmt: skip
            assert [c.run.id for c in await app.store.runs_claim(claim)] == [lost.id]
            clock.advance(31)
            await app.store.leases_reap(LeasesReapParams())
        await relay_all(relay_for(app.store, setting))
        received = await broker.read()
        runs = {r.id: await app.store.run_get(r.tenant, r.id) for r in (cancelled, with_job, lost)}

    got = sorted((m.body["job"], m.body["event"], m.body["reason"]) for m in received)
    assert got == [
        ("cancelled", "cancelled", "cancelled"),
        ("lost", "dead", "attempts_exhausted"),
        ("lost", "retrying", None),
        ("lost", "started", None),
        ("lost", "started", None),
        ("with-job", "cancelled", "job_cancelled"),
    ]
    ids = [m.headers["duetime-message-id"] for m in received]
    assert len(ids) == len(set(ids))
    for m in received:
        run = runs[uuid.UUID(m.body["run_id"])]
        if m.body["event"] in ("cancelled", "dead"):
            assert m.body["message_id"] == f"{run.id}:{run.token}:{m.body['event']}"
            assert run.state.value == m.body["event"]
