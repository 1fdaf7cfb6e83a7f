"""Calendars and backfill from the CLI (issue 24): ``duetime calendars set/list/show/delete``,
``jobs add --calendar/--calendar-shift`` shown by ``jobs show``, ``jobs backfill`` (dry run,
idempotent, confirmation of a long range), ``tenants set --max-backfill-runs``, and bad input
as usage errors (exit 2) that name the option or rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from clikit import Invoke, assert_usage_error, ok

HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_calendars_are_set_shown_named_by_jobs_and_deleted(invoke: Invoke) -> None:
    weekend = '{"weekdays": ["sat", "sun"]}'
    saved = ok(invoke("calendars", "set", "biz", "--rule", weekend, "--rule", '{"holidays": "US"}'))
    assert "saved calendar 'biz'" in saved.stdout
    listed = json.loads(ok(invoke("calendars", "list", "--json")).stdout)
    assert [(c["name"], len(c["rules"])) for c in listed] == [("biz", 2)]
    assert '{"holidays": "US"}' in ok(invoke("calendars", "show", "biz")).stdout
    added = ok(
        invoke(
            "jobs", "add", "nightly", "--task", "t", "--cron", "0 2 * * *", "--allow-unregistered",
            "--calendar", "biz", "--calendar-shift", "next_business_day",
        )
    )  # fmt: skip
    assert "biz (next_business_day)" in added.stdout
    job = json.loads(ok(invoke("jobs", "show", "nightly", "--json")).stdout)["job"]
    assert (job["calendars"], job["calendar_shift"]) == (["biz"], "next_business_day")
    fires = json.loads(ok(invoke("preview", "--job", "nightly", "--count", "7", "--json")).stdout)
    notes = [f["calendar_note"] for f in fires if "calendar_note" in f]
    assert len(notes) >= 2  # a weekend in any seven days
    assert all("(next_business_day; calendar 'biz': " in n for n in notes)
    refused = invoke("calendars", "delete", "biz")
    assert refused.exit_code == 2
    assert "'nightly'" in refused.stderr
    ok(invoke("jobs", "update", "nightly", "--calendar", "none"))
    assert (
        json.loads(ok(invoke("jobs", "show", "nightly", "--json")).stdout)["job"]["calendars"] == []
    )
    ok(invoke("calendars", "delete", "biz"))


def test_bad_calendar_input_names_what_and_where(invoke: Invoke) -> None:
    assert_usage_error(
        invoke("calendars", "set", "x", "--rule", '{"weekdays": ["someday"]}'),
        "rules[0].weekdays",
        "someday",
    )
    assert_usage_error(invoke("calendars", "set", "x", "--rule", "{oops"), "--rule: ")
    assert_usage_error(
        invoke(
            "jobs", "add", "j", "--task", "t", "--cron", "0 2 * * *", "--allow-unregistered",
            "--calendar", "missing",
        ),
        "--calendar: ",
        "unknown calendar 'missing'",
    )  # fmt: skip


def test_a_backfill_from_the_cli(invoke: Invoke) -> None:
    ok(
        invoke(
            "jobs", "add", "hourly", "--task", "t", "--cron", "0 * * * *", "--allow-unregistered"
        )
    )
    window = ("--from", iso(HOUR - timedelta(hours=5)), "--to", iso(HOUR - timedelta(hours=1)))
    dry = ok(invoke("jobs", "backfill", "hourly", *window, "--dry-run"))
    assert "would create 5 runs" in dry.stdout
    assert iso(HOUR - timedelta(hours=5)) in dry.stdout
    assert json.loads(ok(invoke("runs", "list", "--json")).stdout)["items"] == []
    assert "created 5 runs" in ok(invoke("jobs", "backfill", "hourly", *window)).stdout
    again = json.loads(ok(invoke("jobs", "backfill", "hourly", *window, "--json")).stdout)
    assert (again["created"], again["existing"]) == (0, 5)
    century = ("--from", iso(HOUR - timedelta(days=36525)), "--to", iso(HOUR))
    assert_usage_error(invoke("jobs", "backfill", "hourly", *century), "to: ", "--yes")
    assert_usage_error(
        invoke("jobs", "backfill", "hourly", "--from", "yesterday", "--to", iso(HOUR)), "--from: "
    )
    ok(invoke("tenants", "set", "default", "--max-backfill-runs", "2"))
    assert "max backfill runs" in ok(invoke("tenants", "show", "default")).stdout
    longer = ("--from", iso(HOUR - timedelta(hours=9)), "--to", iso(HOUR - timedelta(hours=1)))
    assert_usage_error(
        invoke("jobs", "backfill", "hourly", *longer), "max_backfill_runs: ", "would create 4"
    )
