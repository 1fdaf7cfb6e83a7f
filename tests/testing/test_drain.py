"""``drain``: what is due at the frozen instant is materialized and executed through the real
scheduler pass and worker, one run at a time in due order; retries wait for the clock. On
both stores."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from duetime import Retry, RunContext, RunState
from duetime.testing import (
    FrozenApp,
    FrozenClock,
    assert_scheduled_sync,
    assert_triggered_sync,
    drain,
    drain_sync,
    runs_of,
    runs_of_sync,
)
from duetime.testing.app import FrozenSyncApp

PARIS = ZoneInfo("Europe/Paris")


async def test_a_cron_job_in_a_zone_fires_at_its_instants_across_a_dst_change(
    app: FrozenApp, clock: FrozenClock
) -> None:
    fired: list[tuple[datetime, datetime]] = []  # (its instant, the clock when it ran)

    @app.task("reports.morning")
    async def morning(ctx: RunContext) -> None:
        fired.append((ctx.scheduled_for, clock.now()))

    clock.set(datetime(2027, 3, 26, 0, 0, tzinfo=PARIS))  # two days before the spring change
    await app.schedule("morning", task="reports.morning", cron="30 9 * * *", tz="Europe/Paris")
    for _ in range(4 * 24 * 4):  # four days in quarter hours
        clock.advance(minutes=15)
        await drain(app)
    expected = [datetime(2027, 3, d, 9, 30, tzinfo=PARIS) for d in (26, 27, 28, 29)]
    assert fired == [(at, at) for at in expected]  # each exactly at its instant, once
    offsets = [at.astimezone(PARIS).utcoffset() for at, _ in fired]
    assert offsets == [timedelta(hours=1)] * 2 + [timedelta(hours=2)] * 2


async def test_drain_runs_due_runs_in_order_and_leaves_future_retries(
    app: FrozenApp, clock: FrozenClock
) -> None:
    order: list[str] = []

    @app.task("shop.step")
    async def step(ctx: RunContext, payload: Any) -> str:
        order.append(payload["name"])
        if payload["name"] == "flaky" and ctx.attempt == 1:
            ctx.checkpoint({"done": 2})
            raise RuntimeError("card network down")
        return f"{payload['name']}@{ctx.attempt}"

    t0 = clock.now()
    retry = Retry(max_attempts=3, backoff_base=60.0, backoff_factor=2.0, backoff_cap=60.0)
    for offset, name in ((3, "third"), (1, "first"), (2, "flaky"), (600, "later")):
        await app.schedule(
            name,
            task="shop.step",
            at=t0 + timedelta(seconds=offset),
            payload={"name": name},
            retry=retry,
        )
    clock.advance(seconds=10)
    ran = await drain(app)
    assert order == ["first", "flaky", "third"]  # due order; "later" is not due yet
    assert [(r.job_name, r.state, r.attempt) for r in ran] == [
        ("first", RunState.SUCCEEDED, 1),
        ("flaky", RunState.SCHEDULED, 1),
        ("third", RunState.SUCCEEDED, 1),
    ]
    flaky = ran[1]
    assert flaky.available_at > clock.now()
    assert flaky.last_error_message == "card network down"
    assert await drain(app) == []  # nothing more at this instant: the retry waits

    clock.advance(minutes=1)  # past the backoff ceiling (60 s, full jitter)
    ran = await drain(app)
    assert [(r.job_name, r.state, r.attempt) for r in ran] == [("flaky", RunState.SUCCEEDED, 2)]
    assert ran[0].checkpoint == {"done": 2}  # the failed attempt's checkpoint, stored
    assert order == ["first", "flaky", "third", "flaky"]  # "later" waits for its instant


async def test_runs_a_task_makes_due_run_in_the_same_drain(
    app: FrozenApp, clock: FrozenClock
) -> None:
    @app.task("orders.place")
    async def place(ctx: RunContext) -> None:
        await app.trigger("invoice", payload={"order": 7})

    seen: list[Any] = []

    @app.task("orders.invoice")
    def invoice(ctx: RunContext, payload: Any) -> None:  # a sync task: in the worker's thread
        seen.append(payload)

    far = clock.now() + timedelta(days=365)
    await app.schedule("invoice", task="orders.invoice", at=far)
    await app.schedule("place", task="orders.place", at=clock.now() + timedelta(seconds=1))
    clock.advance(seconds=1)
    ran = await drain(app)
    assert [(r.job_name, r.state) for r in ran] == [
        ("place", RunState.SUCCEEDED),
        ("invoice", RunState.SUCCEEDED),
    ]
    assert seen == [{"order": 7}]
    assert [r.state for r in await runs_of(app, "invoice")] == [RunState.SUCCEEDED]


async def test_drain_refuses_an_app_whose_store_does_not_read_its_frozen_clock(
    store_url: str,
) -> None:
    from duetime import AsyncApp

    async with AsyncApp(store_url, migrate=True) as plain:
        with pytest.raises(TypeError, match="FrozenClock"):
            await drain(plain)


def test_drain_sync_on_a_blocking_app(store_url: str, clock: FrozenClock) -> None:
    calls: list[int] = []
    with FrozenSyncApp(store_url, clock=clock) as app:

        @app.task("sync.tick")
        def tick(ctx: RunContext) -> None:
            calls.append(ctx.attempt)

        app.schedule("tick", task="sync.tick", every=60)
        first = drain_sync(app)  # an interval fires at its anchor: now
        assert [r.scheduled_for for r in first] == [clock.now()]
        clock.advance(seconds=59)
        assert drain_sync(app) == []
        clock.advance(seconds=1)
        ran = drain_sync(app)
        assert [(r.scheduled_for, r.state) for r in ran] == [(clock.now(), RunState.SUCCEEDED)]
        assert calls == [1, 1]
        assert [r.id for r in assert_triggered_sync(app, "tick", count=2)] == [
            r.id for r in runs_of_sync(app, "tick")
        ]
        assert_scheduled_sync(app, "tick", at=clock.now() + timedelta(minutes=1))
        with pytest.raises(AssertionError, match="expected job 'tick' to have 3 runs, found 2"):
            assert_triggered_sync(app, "tick", count=3)


async def test_a_run_written_ahead_waits_for_its_instant_to_the_microsecond(
    app: FrozenApp, clock: FrozenClock
) -> None:
    at = clock.now() + timedelta(seconds=5)
    await app.schedule("soon", task="duetime.noop", at=at)
    await app.materializer().run_once()  # a scheduler with its horizon wrote the run ahead
    assert [r.scheduled_for for r in await runs_of(app, "soon")] == [at]
    clock.set(at - timedelta(microseconds=1))
    assert await drain(app) == []
    clock.set(at)
    assert [(r.job_name, r.state) for r in await drain(app)] == [("soon", RunState.SUCCEEDED)]
