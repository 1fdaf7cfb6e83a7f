"""``duetime jobs …`` in-process: happy paths, JSON shapes and error paths."""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from clikit import Invoke, assert_usage_error

from duetime._types import Job

INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")
JOB_KEYS = {f.name for f in dataclasses.fields(Job)} - {"created"}
"""Every field of the Job value type but ``created`` (what one call did, not the job's state):
the JSON output mirrors it."""
SCHEDULE_KEYS = {"kind", "cron", "tz", "at", "every_seconds", "every_calendar", "anchor"}


def add(invoke: Invoke, name: str, *args: str) -> dict:
    result = invoke("jobs", "add", name, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def instant(text: str) -> datetime:
    assert INSTANT.match(text), text
    return datetime.fromisoformat(text)


# --- add --------------------------------------------------------------------------------------


def test_add_cron_prints_the_job_as_json(invoke: Invoke) -> None:
    job = add(
        invoke,
        "nightly",
        "--task",
        "duetime.noop",
        "--cron",
        "30 2 * * *",
        "--tz",
        "America/New_York",
    )
    assert set(job) == JOB_KEYS
    uuid.UUID(job["id"])
    assert job["name"] == "nightly"
    assert job["tenant"] == "default"
    assert job["status"] == "active"
    assert set(job["schedule"]) == SCHEDULE_KEYS
    assert job["schedule"] == {
        "kind": "cron",
        "cron": "30 2 * * *",
        "tz": "America/New_York",
        "at": None,
        "every_seconds": None,
        "every_calendar": None,
        "anchor": None,
    }
    assert instant(job["next_fire_at"]) > datetime.now(UTC)
    assert job["retry"] == {
        "max_attempts": 3,
        "backoff_base": 1.0,
        "backoff_factor": 2.0,
        "backoff_cap": 600.0,
        "within": None,
        "permanent_on": [],
        "retry_on": [],
        "permanent_on_status": [],
        "retry_on_status": [],
    }


def test_add_prints_a_summary_and_says_created_then_updated(invoke: Invoke) -> None:
    first = invoke("jobs", "add", "report", "--task", "duetime.noop", "--cron", "0 3 * * *")
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("created job 'report'\n")
    for field in ("id", "name", "status", "next fire"):
        assert re.search(rf"^{field}\s+\S", first.stdout, re.M), (field, first.stdout)
    assert re.search(r"^status\s+active$", first.stdout, re.M)
    second = invoke("jobs", "add", "report", "--task", "duetime.noop", "--cron", "0 4 * * *")
    assert second.exit_code == 0, second.output
    assert second.stdout.startswith("updated job 'report'\n")
    assert "cron 0 4 * * * (UTC)" in second.stdout


def test_add_at_an_instant(invoke: Invoke) -> None:
    job = add(invoke, "once", "--task", "duetime.noop", "--at", "2030-12-01T10:00:00+01:00")
    assert job["schedule"]["kind"] == "at"
    assert job["schedule"]["at"] == "2030-12-01T09:00:00Z"
    assert job["next_fire_at"] == "2030-12-01T09:00:00Z"


@pytest.mark.parametrize(
    ("text", "delay"),
    [
        ("PT3H", timedelta(hours=3)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(minutes=90)),
        ("P1DT2H", timedelta(days=1, hours=2)),
    ],
)
def test_add_at_a_delay(invoke: Invoke, text: str, delay: timedelta) -> None:
    before = datetime.now(UTC)
    job = add(invoke, "later", "--task", "duetime.noop", "--at", text)
    after = datetime.now(UTC)
    assert before + delay <= instant(job["next_fire_at"]) <= after + delay


def test_add_every_and_now(invoke: Invoke) -> None:
    before = datetime.now(UTC)
    every = add(invoke, "tick", "--task", "duetime.noop", "--every", "90")
    assert every["schedule"]["kind"] == "every"
    assert every["schedule"]["every_seconds"] == 90.0
    assert instant(every["schedule"]["anchor"]) >= before.replace(microsecond=0)
    now = add(invoke, "asap", "--task", "duetime.noop", "--now")
    assert now["schedule"]["kind"] == "now"
    assert instant(now["next_fire_at"]) >= before.replace(microsecond=0)


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90.0), ("1h30m", 5400.0), ("PT15M", 900.0)])
def test_add_every_takes_a_duration(invoke: Invoke, text: str, seconds: float) -> None:
    job = add(invoke, "tick", "--task", "duetime.noop", "--every", text)
    assert job["schedule"]["every_seconds"] == seconds


def test_add_with_every_option(invoke: Invoke) -> None:
    job = add(
        invoke,
        "full",
        "--task",
        "duetime.fail",
        "--every",
        "60",
        "--payload",
        '{"times": 2, "tags": ["x"]}',
        "--max-attempts",
        "5",
        "--backoff-base",
        "0.5",
        "--priority",
        "7",
        "--timeout",
        "12.5",
        "--misfire",
        "backfill",
        "--queue",
        "reports",
        "--tag",
        "a",
        "--tag",
        "b",
    )
    assert job["payload"] == {"times": 2, "tags": ["x"]}
    assert job["retry"]["max_attempts"] == 5
    assert job["retry"]["backoff_base"] == 0.5
    assert job["priority"] == 7
    assert job["timeout"] == 12.5
    assert job["misfire_policy"] == "backfill"
    assert job["queue"] == "reports"
    assert job["tags"] == ["a", "b"]


def test_add_unregistered_task_needs_the_flag(invoke: Invoke) -> None:
    refused = invoke("jobs", "add", "j", "--task", "billing.settle", "--now")
    assert_usage_error(refused, "task", "billing.settle", "--allow-unregistered")
    job = add(invoke, "j", "--task", "billing.settle", "--now", "--allow-unregistered")
    assert job["task"] == "billing.settle"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--cron", "61 * * * *"], ["cron", "minute", "61"]),
        (["--cron", "0 0 * * *", "--tz", "Mars/Base"], ["tz", "Mars/Base"]),
        (["--cron", "0 0 30 2 *"], ["cron", "never fires"]),
        (["--cron", "0 0 1 1 * * 2030"], ["cron", "7 fields"]),
        (["--now", "--payload", "{not json"], ["payload", "JSON"]),
        ([], ["schedule", "exactly one"]),
        (["--now", "--every", "5"], ["schedule", "exactly one"]),
        (["--at", "2030-01-01T00:00:00"], ["--at", "offset"]),
        (["--at", "next tuesday"], ["--at", "ISO 8601"]),
        (["--every", "0.5"], ["every", "at least 1 second"]),
        (["--every", "often"], ["--every", "duration"]),
        (["--now", "--misfire", "sometimes"], ["misfire", "sometimes"]),
        (["--now", "--max-attempts", "0"], ["--max-attempts"]),
        (["--now", "--timeout", "-1"], ["timeout"]),
    ],
)
def test_add_rejects_invalid_input(invoke: Invoke, args: list[str], needles: list[str]) -> None:
    result = invoke("jobs", "add", "bad", "--task", "duetime.noop", *args)
    assert_usage_error(result, *needles)
    listed = invoke("jobs", "list", "--json")
    assert json.loads(listed.stdout)["items"] == []


# --- list -------------------------------------------------------------------------------------


def test_list_json_filters_and_pages(invoke: Invoke) -> None:
    add(invoke, "app.a", "--task", "duetime.noop", "--cron", "0 * * * *", "--tag", "hourly")
    add(invoke, "app.b", "--task", "duetime.noop", "--every", "30")
    add(invoke, "other", "--task", "duetime.noop", "--cron", "0 0 * * *", "--tag", "hourly")
    assert invoke("jobs", "pause", "app.b").exit_code == 0

    everything = json.loads(invoke("jobs", "list", "--json").stdout)
    assert set(everything) == {"items", "next_cursor"}
    assert [j["name"] for j in everything["items"]] == ["app.a", "app.b", "other"]
    assert everything["next_cursor"] is None
    assert set(everything["items"][0]) == JOB_KEYS

    def names(*args: str) -> list[str]:
        result = invoke("jobs", "list", "--json", *args)
        assert result.exit_code == 0, result.output
        return [j["name"] for j in json.loads(result.stdout)["items"]]

    assert names("--status", "paused") == ["app.b"]
    assert names("--prefix", "app.") == ["app.a", "app.b"]
    assert names("--tag", "hourly") == ["app.a", "other"]

    first = json.loads(invoke("jobs", "list", "--json", "--limit", "2").stdout)
    assert [j["name"] for j in first["items"]] == ["app.a", "app.b"]
    assert first["next_cursor"]
    assert names("--limit", "2", "--cursor", first["next_cursor"]) == ["other"]


def test_list_text(invoke: Invoke) -> None:
    empty = invoke("jobs", "list")
    assert empty.exit_code == 0
    assert empty.stdout == ""
    assert "no jobs" in empty.stderr
    add(invoke, "nightly", "--task", "duetime.noop", "--cron", "0 3 * * *", "--tz", "Europe/Paris")
    result = invoke("jobs", "list", "--limit", "1")
    assert result.exit_code == 0, result.output
    header, row = result.stdout.splitlines()
    assert header.split()[:3] == ["name", "status", "schedule"]
    assert row.startswith("nightly  active  cron 0 3 * * * (Europe/Paris)")


@pytest.mark.parametrize(
    ("args", "needles"),
    [(["--status", "sleeping"], ["--status", "sleeping"]), (["--limit", "0"], ["--limit"])],
)
def test_list_rejects_invalid_input(invoke: Invoke, args: list[str], needles: list[str]) -> None:
    assert_usage_error(invoke("jobs", "list", *args), *needles)


# --- show -------------------------------------------------------------------------------------


def test_show_json_has_next_fires_and_last_runs(invoke: Invoke) -> None:
    job = add(
        invoke, "dst", "--task", "duetime.noop", "--cron", "30 2 * * *", "--tz", "America/New_York"
    )
    run_ids = [invoke("jobs", "trigger", "dst").stdout.strip() for _ in range(12)]
    result = invoke("jobs", "show", "dst", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert set(shown) == {"job", "next_fires", "runs"}
    assert shown["job"] == {**job, "updated_at": shown["job"]["updated_at"]}
    fires = shown["next_fires"]
    assert len(fires) == 5
    assert all(set(f) == {"utc", "local", "dst_note"} for f in fires)
    assert fires[0]["utc"] == job["next_fire_at"]
    assert [instant(f["utc"]) for f in fires] == sorted(instant(f["utc"]) for f in fires)
    assert all(re.search(r"T02:30:00-0[45]:00$|T03:00:00-04:00$", f["local"]) for f in fires)
    runs = shown["runs"]
    assert len(runs) == 10
    assert {r["id"] for r in runs} <= set(run_ids)
    assert all(r["job_name"] == "dst" and r["trigger"] == "manual" for r in runs)


def test_show_by_id_and_text(invoke: Invoke) -> None:
    job = add(invoke, "tick", "--task", "duetime.noop", "--every", "60", "--payload", '{"a": 1}')
    run_id = invoke("jobs", "trigger", "tick").stdout.strip()
    result = invoke("jobs", "show", job["id"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert re.search(rf"^id\s+{job['id']}$", out, re.M)
    assert re.search(r"^payload\s+\{\"a\":1\}$", out, re.M)
    assert "next fires:" in out
    assert "last 10 runs:" in out
    assert run_id in out


def test_show_a_job_without_a_next_fire(invoke: Invoke) -> None:
    add(invoke, "paused", "--task", "duetime.noop", "--cron", "0 3 * * *")
    invoke("jobs", "pause", "paused")
    shown = json.loads(invoke("jobs", "show", "paused", "--json").stdout)
    assert shown["job"]["status"] == "paused"
    assert shown["next_fires"] == []
    assert shown["runs"] == []


# --- status changes, delete, trigger ----------------------------------------------------------


def test_pause_resume_cancel_delete(invoke: Invoke) -> None:
    add(invoke, "j", "--task", "duetime.noop", "--cron", "0 3 * * *")
    paused = invoke("jobs", "pause", "j")
    assert paused.exit_code == 0, paused.output
    assert paused.stdout == "job 'j' is paused\n"
    resumed = invoke("jobs", "resume", "j", "--json")
    assert resumed.exit_code == 0, resumed.output
    job = json.loads(resumed.stdout)
    assert job["status"] == "active"
    assert instant(job["next_fire_at"]) > datetime.now(UTC)
    cancelled = invoke("jobs", "cancel", "j")
    assert cancelled.stdout == "job 'j' is cancelled\n"
    assert_usage_error(invoke("jobs", "resume", "j"), "cancelled")
    deleted = invoke("jobs", "delete", "j", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert "deleted" in deleted.stdout
    assert json.loads(invoke("jobs", "list", "--json").stdout)["items"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["show", "ghost"],
        ["pause", "ghost"],
        ["resume", "ghost"],
        ["cancel", "ghost"],
        ["delete", "ghost", "--yes"],
        ["trigger", "ghost"],
        ["show", str(uuid.uuid4())],
    ],
)
def test_unknown_job_is_not_found(invoke: Invoke, args: list[str]) -> None:
    assert_usage_error(invoke("jobs", *args), "not found")


def test_trigger_prints_the_run_id_and_honours_idempotency(invoke: Invoke) -> None:
    add(invoke, "j", "--task", "duetime.noop", "--cron", "0 3 * * *", "--payload", '{"n": 0}')
    plain = invoke("jobs", "trigger", "j")
    assert plain.exit_code == 0, plain.output
    uuid.UUID(plain.stdout.strip())

    first = invoke(
        "jobs", "trigger", "j", "--idempotency-key", "k1", "--payload", '{"n": 1}', "--json"
    )
    assert first.exit_code == 0, first.output
    run = json.loads(first.stdout)
    assert run["payload"] == {"n": 1}
    assert run["state"] == "scheduled"
    assert run["trigger"] == "manual"
    assert run["idempotency_key"] == "k1"
    assert INSTANT.match(run["scheduled_for"])
    again = invoke("jobs", "trigger", "j", "--idempotency-key", "k1", "--payload", '{"n": 1}')
    assert again.stdout.strip() == run["id"]
    assert_usage_error(
        invoke("jobs", "trigger", "j", "--idempotency-key", "k1", "--payload", '{"n": 2}'), "k1"
    )
    assert_usage_error(invoke("jobs", "trigger", "j", "--payload", "nope"), "payload")


def test_tenants_are_separate(invoke: Invoke) -> None:
    add(invoke, "mine", "--task", "duetime.noop", "--now", "--tenant", "acme")
    theirs = json.loads(invoke("jobs", "list", "--json", "--tenant", "globex").stdout)
    assert theirs["items"] == []
    ours = json.loads(invoke("jobs", "list", "--json", "--tenant", "acme").stdout)
    assert [j["tenant"] for j in ours["items"]] == ["acme"]
    assert_usage_error(invoke("jobs", "show", "mine"), "not found")


def test_rich_table_in_a_terminal(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    add(invoke, "nightly", "--task", "duetime.noop", "--cron", "0 3 * * *")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "200")
    result = invoke("jobs", "list")
    assert result.exit_code == 0, result.output
    assert "┃" in result.stdout or "│" in result.stdout
    assert "nightly" in result.stdout
