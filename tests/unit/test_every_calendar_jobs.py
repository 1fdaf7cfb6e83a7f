"""Jobs ``every`` calendar units end to end (issue 16, item 7), on both stores: declared through
the Python API, bulk registration and REST, stored and read back, planned by the scheduler
across a DST change at the same local time, previewed and explained. A frozen clock drives
the scheduler's materialize directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from tests.api.apikit import problem

from duetime import AsyncApp, ValidationError
from duetime._clock import FrozenClock
from duetime._types import CalendarInterval, CalendarUnit, Job
from duetime.api import create_api
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from duetime.store.base import RunListParams

PARIS = ZoneInfo("Europe/Paris")
NINE = datetime(2027, 3, 25, 9, tzinfo=PARIS)
"""A Thursday at 09:00 in Paris, three days before the spring change (28 March 2027)."""
DAY = CalendarInterval(1, CalendarUnit.DAY)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NINE - timedelta(hours=1))


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, clock=clock, migrate=True) as opened:
        yield opened


async def daily(app: AsyncApp, **more: Any) -> Job:
    return await app.schedule(
        "daily", task="duetime.noop", every="1 day", tz="Europe/Paris", anchor=NINE, **more
    )


async def scheduled_locals(app: AsyncApp, job: Job) -> list[str]:
    page = await app.store.runs_list(RunListParams(tenant=app.tenant, job_id=job.id, limit=100))
    instants = sorted(r.scheduled_for for r in page.items)
    return [i.astimezone(PARIS).isoformat() for i in instants]


async def test_stored_and_read_back_as_declared(app: AsyncApp, store_url: str) -> None:
    job = await daily(app)
    assert (job.schedule.every_calendar, job.schedule.every) == (DAY, None)
    assert job.next_fire_at == NINE
    async with AsyncApp(store_url) as reopened:
        read = await reopened.get("daily")
    assert read.schedule == job.schedule
    fixed = await app.schedule("hourly", task="duetime.noop", every=3600)
    assert (fixed.schedule.every, fixed.schedule.every_calendar) == (timedelta(hours=1), None)


async def test_planned_at_nine_local_across_the_spring_change(
    app: AsyncApp, clock: FrozenClock
) -> None:
    job = await daily(app)
    fixed = await app.schedule(
        "every-24h", task="duetime.noop", every="24 hours", tz="Europe/Paris", anchor=NINE
    )
    for _ in range(7):  # a moment before the next occurrence of either job, each time
        dues = [(await app.get(name)).next_fire_at for name in ("daily", "every-24h")]
        due = min(d for d in dues if d is not None)
        clock.set(due - timedelta(seconds=5))
        await materialize(app.store, plan_job, horizon=10.0, now=clock.now())
    assert (await scheduled_locals(app, job))[:5] == [
        "2027-03-25T09:00:00+01:00",
        "2027-03-26T09:00:00+01:00",
        "2027-03-27T09:00:00+01:00",
        "2027-03-28T09:00:00+02:00",
        "2027-03-29T09:00:00+02:00",
    ]
    assert (await scheduled_locals(app, fixed))[2:4] == [
        "2027-03-27T09:00:00+01:00",
        "2027-03-28T10:00:00+02:00",  # 24 hours later: the wall time moved
    ]


async def test_preview_and_explain_show_the_local_times(app: AsyncApp) -> None:
    await daily(app)
    fires = await app.next_fires("daily", 5)
    assert [o.local.hour for o in fires] == [9] * 5
    assert fires[3].instant - fires[2].instant == timedelta(hours=23)
    explained = await app.monitoring.explain("daily")
    assert explained.schedule.startswith("every 1 day in Europe/Paris from ")
    assert [n.local.hour for n in explained.next] == [9] * 5


async def test_bulk_registration_stores_calendar_units(app: AsyncApp) -> None:
    specs = [
        {"name": f"bulk-{i}", "task": "duetime.noop", "every": every, "tz": "Europe/Paris"}
        for i, every in enumerate(["1 day", "2 weeks", "1 month", "90 seconds"])
    ]
    assert await app.schedule_many(specs, allow_unregistered=True) == 4
    stored = [(await app.get(f"bulk-{i}")).schedule for i in range(4)]
    assert [s.every_calendar for s in stored] == [
        DAY,
        CalendarInterval(2, CalendarUnit.WEEK),
        CalendarInterval(1, CalendarUnit.MONTH),
        None,
    ]
    assert stored[3].every == timedelta(seconds=90)


@pytest.mark.parametrize("every", ["1 fortnight", "0 days", "-1 month", "1.5 months"])
async def test_bad_calendar_units_are_a_field_error(app: AsyncApp, every: str) -> None:
    with pytest.raises(ValidationError) as caught:
        await app.schedule("bad", task="duetime.noop", every=every)
    assert caught.value.field == "every"
    await daily(app)
    with pytest.raises(ValidationError) as caught:
        await app.update_job("daily", every=every)
    assert caught.value.field == "every"


# --- REST ---------------------------------------------------------------------------------------


@pytest.fixture
async def client(app: AsyncApp) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_api(app, auth_required=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost/api/v1") as opened:
        yield opened


async def test_rest_declares_changes_and_previews_calendar_units(
    client: httpx.AsyncClient, clock: FrozenClock
) -> None:
    body = {"name": "daily", "task": "duetime.noop", "every": "1 day", "tz": "Europe/Paris"}
    created = await client.post("/jobs", json={**body, "anchor": NINE.isoformat()})
    assert created.status_code == 201, created.text
    schedule = created.json()["schedule"]
    assert (schedule["every_calendar"], schedule["every_seconds"]) == ("1 day", None)
    assert created.json()["next_fire_at"] == "2027-03-25T08:00:00Z"

    clock.set(NINE + timedelta(hours=1))  # after its first run
    changed = await client.patch("/jobs/daily", json={"every": "2 weeks"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["schedule"]["every_calendar"] == "2 weeks"
    assert changed.json()["next_fire_at"] == "2027-04-08T07:00:00Z"  # kept anchor, 09:00 CEST

    preview = await client.post(
        "/schedules/preview",
        json={"every": "1 day", "tz": "Europe/Paris", "anchor": NINE.isoformat(), "count": 4},
    )
    assert preview.status_code == 200, preview.text
    assert [o["local"][11:16] for o in preview.json()["items"]] == ["09:00"] * 4
    assert preview.json()["items"][2]["utc"] == "2027-03-28T07:00:00Z"


@pytest.mark.parametrize("every", ["1 fortnight", "0 days", "-1 month", "1.5 days"])
async def test_rest_refuses_bad_units_naming_the_field(
    client: httpx.AsyncClient, every: str
) -> None:
    for response in (
        await client.post("/jobs", json={"name": "bad", "task": "duetime.noop", "every": every}),
        await client.post("/schedules/preview", json={"every": every}),
    ):
        problem(response, 422, "every")


async def test_openapi_documents_both_kinds_side_by_side(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    assert "every_calendar" in schemas["ScheduleOut"]["properties"]
    every = schemas["JobCreate"]["properties"]["every"]["description"]
    assert '"1 day"' in every
    assert "fixed" in every


def test_instants_are_utc() -> None:
    assert NINE.astimezone(UTC) == datetime(2027, 3, 25, 8, tzinfo=UTC)


# --- review fixes -------------------------------------------------------------------------------

YEAR_ONE = {"anchor": "0001-01-01T00:00:00Z", "tz": "America/New_York"}
"""An anchor whose local time in New York (UTC-4:56) is before year 1."""


async def test_an_anchor_before_year_one_locally_is_a_field_error(
    app: AsyncApp, client: httpx.AsyncClient
) -> None:
    """It was created active with no next fire (read as "past year 9999") and never fired."""
    anchor = datetime(1, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError) as caught:
        await app.schedule(
            "old", task="duetime.noop", every="1 day", tz="America/New_York", anchor=anchor
        )
    assert caught.value.field == "anchor"
    body = {"name": "old", "task": "duetime.noop", "every": "1 day", **YEAR_ONE}
    created = await client.post("/jobs", json=body)
    assert "before year 1" in problem(created, 422, "anchor")["detail"]
    preview = {"every": "1 day", **YEAR_ONE, "count": 3}
    problem(await client.post("/schedules/preview", json=preview), 422, "anchor")
    # a fixed interval counts in UTC: the same anchor is fine
    fixed = await client.post("/jobs", json={**body, "every": "24 hours"})
    assert fixed.status_code == 201, fixed.text


async def test_seven_days_and_one_week_are_the_same_declaration(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """Declaring "1 week" again over "7 days" keeps the runs written ahead, the next instant
    and the declared spelling."""
    weekly = await app.schedule(
        "weekly", task="duetime.noop", every="7 days", tz="Europe/Paris", anchor=NINE
    )
    clock.set(NINE - timedelta(seconds=5))
    await materialize(app.store, plan_job, horizon=10.0, limit=100, now=clock.now())
    again = await app.schedule(
        "weekly", task="duetime.noop", every="1 week", tz="Europe/Paris", anchor=NINE
    )
    assert (again.next_fire_at, str(again.schedule.every_calendar)) == (
        NINE + timedelta(days=7),
        "7 days",
    )
    page = await app.store.runs_list(RunListParams(tenant=app.tenant, job_id=weekly.id, limit=10))
    assert [(r.scheduled_for, r.state.value) for r in page.items] == [(NINE, "scheduled")]
    no_anchor = await app.schedule(
        "weekly", task="duetime.noop", every=CalendarInterval(1, CalendarUnit.WEEK),
        tz="Europe/Paris",
    )  # fmt: skip
    assert no_anchor.next_fire_at == again.next_fire_at


async def test_rest_every_errors_say_what_is_accepted(client: httpx.AsyncClient) -> None:
    for every in ("1 fortnight", True, "soon"):
        body = {"name": "bad", "task": "duetime.noop", "every": every}
        detail = problem(await client.post("/jobs", json=body), 422, "every")["detail"]
        assert all(word in detail for word in ("ISO 8601", "PT15M", "days", "weeks", "months"))
        assert "'1 day'" in detail


async def test_a_plain_string_unit_is_taken(app: AsyncApp) -> None:
    job = await app.schedule(
        "daily", task="duetime.noop", every=CalendarInterval(1, "day"),  # type: ignore[arg-type]
        tz="Europe/Paris", anchor=NINE,
    )  # fmt: skip
    assert job.schedule.every_calendar == DAY
    with pytest.raises(ValidationError) as caught:
        await app.schedule(
            "fortnightly", task="duetime.noop",
            every=CalendarInterval(1, "fortnight"),  # type: ignore[arg-type]
        )  # fmt: skip
    assert caught.value.field == "every"
    assert "day, week or month" in str(caught.value)
