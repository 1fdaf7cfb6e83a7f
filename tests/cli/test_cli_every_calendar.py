"""The CLI's ``--every`` (issue 16, items 2 and 7), on both stores: calendar units in ``--tz``
declared, shown as declared and previewed; a bad interval is a usage error naming the option;
``jobs add`` declared again unchanged keeps the job's instant and anchor; ``jobs update
--every`` keeps the anchor and does not fire at the change."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import pytest
from clikit import Invoke, assert_usage_error, ok

from duetime import AsyncApp


@pytest.fixture
def db(store_url: str) -> str:
    """The CLI on each store (the package's fixture is a SQLite file), migrated."""

    async def migrate() -> None:
        async with AsyncApp(store_url, migrate=True):
            pass

    asyncio.run(migrate())
    return store_url


def add(invoke: Invoke, name: str, *args: str) -> dict:
    return json.loads(
        ok(invoke("jobs", "add", name, "--task", "duetime.noop", *args, "--json")).stdout
    )


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_calendar_interval_is_declared_and_shown_as_declared(invoke: Invoke) -> None:
    job = add(invoke, "daily", "--every", "1 day", "--tz", "Europe/Paris")
    assert job["schedule"]["every_calendar"] == "1 day"
    assert job["schedule"]["every_seconds"] is None
    shown = ok(invoke("jobs", "show", "daily")).stdout
    assert "every 1 day (Europe/Paris)" in shown
    listed = ok(invoke("jobs", "list")).stdout
    assert "every 1 day (Europe/Paris)" in listed
    fixed = add(invoke, "hourly", "--every", "2 hours")
    assert (fixed["schedule"]["every_seconds"], fixed["schedule"]["every_calendar"]) == (
        7200.0,
        None,
    )


@pytest.mark.parametrize(
    ("every", "needle"),
    [
        ("1 fortnight", "is not an interval"),
        ("0 days", "must be positive"),
        ("-1 month", "must be positive"),
        ("1.5 months", "counted whole"),
    ],
)
def test_a_bad_interval_is_a_usage_error(invoke: Invoke, every: str, needle: str) -> None:
    assert_usage_error(
        invoke("jobs", "add", "bad", "--task", "duetime.noop", "--every", every), "--every", needle
    )
    add(invoke, "j", "--every", "60")
    assert_usage_error(invoke("jobs", "update", "j", "--every", every), "--every", needle)
    assert_usage_error(invoke("preview", "--every", every, use_db=False), "--every", needle)


def test_jobs_add_again_unchanged_keeps_instant_and_anchor(invoke: Invoke) -> None:
    first = add(invoke, "poll", "--every", "60")
    again = add(invoke, "poll", "--every", "1 minute")
    assert (again["schedule"], again["next_fire_at"]) == (first["schedule"], first["next_fire_at"])
    daily = add(invoke, "daily", "--every", "1 day", "--tz", "Europe/Paris")
    assert (
        add(invoke, "daily", "--every", "1 days", "--tz", "Europe/Paris")["schedule"]
        == (daily["schedule"])
    )


def test_jobs_update_every_keeps_the_anchor_and_does_not_fire_now(invoke: Invoke) -> None:
    first = add(invoke, "poll", "--every", "60")
    anchor = instant(first["schedule"]["anchor"])
    changed = json.loads(ok(invoke("jobs", "update", "poll", "--every", "120", "--json")).stdout)
    assert instant(changed["schedule"]["anchor"]) == anchor
    # the first instant after the change (made well within two minutes of the anchor)
    assert instant(changed["next_fire_at"]) == anchor + timedelta(seconds=120)


def test_preview_every_shows_the_same_local_time_across_dst(invoke: Invoke) -> None:
    result = ok(
        invoke(
            "preview",
            "--every",
            "1 day",
            "--tz",
            "Europe/Paris",
            "--anchor",
            "2027-03-26T09:00:00+01:00",
            "--from",
            "2027-03-26T00:00:00Z",
            "--count",
            "3",
            "--json",
            use_db=False,
        )
    )
    fires = json.loads(result.stdout)
    assert [f["local"] for f in fires] == [
        "2027-03-26T09:00:00+01:00",
        "2027-03-27T09:00:00+01:00",
        "2027-03-28T09:00:00+02:00",
    ]


def test_preview_of_a_calendar_job(invoke: Invoke) -> None:
    add(invoke, "daily", "--every", "1 day", "--tz", "Europe/Paris")
    fires = json.loads(ok(invoke("preview", "--job", "daily", "--count", "3", "--json")).stdout)
    locals_ = [datetime.fromisoformat(f["local"]) for f in fires]
    assert len({(t.hour, t.minute, t.second) for t in locals_}) == 1
