"""``duetime jobs pause --note --until --by``, ``jobs history``, ``jobs pause-on-failure`` and
``tenants set --max-jobs`` (decision 0023), in process on a SQLite file."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clikit import DeadRuns, Invoke, assert_usage_error, ok

from duetime.app import AsyncApp
from duetime.app.lifecycle import LifecyclePass


def add(invoke: Invoke, name: str) -> None:
    ok(invoke("jobs", "add", name, "--task", "duetime.noop", "--cron", "0 3 * * *"))


def test_pause_with_a_note_shows_on_the_job_and_in_its_history(invoke: Invoke) -> None:
    add(invoke, "nightly")
    until = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    paused = ok(
        invoke(
            "jobs",
            "pause",
            "nightly",
            "--note",
            "db migration",
            "--by",
            "ana",
            "--until",
            until.isoformat(),
        )
    ).stdout
    assert "job 'nightly' is paused" in paused
    assert "until" in paused
    shown = ok(invoke("jobs", "show", "nightly")).stdout
    assert "paused by" in shown
    assert "ana" in shown
    assert "db migration" in shown
    assert "paused until" in shown
    as_json = json.loads(ok(invoke("jobs", "show", "nightly", "--json")).stdout)
    assert as_json["job"]["pause"]["note"] == "db migration"
    ok(invoke("jobs", "resume", "nightly"))
    history = json.loads(ok(invoke("jobs", "history", "nightly", "--json")).stdout)
    assert [e["kind"] for e in history] == ["resumed", "paused"]
    assert history[1]["detail"]["by"] == "ana"
    assert history[1]["actor"].startswith("cli:")  # who called, as the audit trail names it
    table = ok(invoke("jobs", "history", "nightly")).stdout
    assert "paused" in table
    assert "db migration" in table


def test_pause_rejects_an_until_in_the_past_or_without_an_offset(invoke: Invoke) -> None:
    add(invoke, "nightly")
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert_usage_error(invoke("jobs", "pause", "nightly", "--until", past), "until")
    assert_usage_error(
        invoke("jobs", "pause", "nightly", "--until", "2030-01-01T00:00:00"), "--until"
    )
    assert_usage_error(invoke("jobs", "history", "nope"), "nope")


def test_pause_on_failure_pauses_the_job_after_its_dead_runs(
    invoke: Invoke, db: str, dead_runs: DeadRuns
) -> None:
    dead_runs.make("flaky", 1)  # before the option: not counted
    out = ok(invoke("jobs", "pause-on-failure", "flaky", "--after", "2")).stdout
    assert "pauses after 2 consecutive dead runs" in out
    assert_usage_error(invoke("jobs", "pause-on-failure", "flaky"), "--after")

    async def leader_pass() -> tuple[int, int]:
        async with AsyncApp(db) as app:
            return await LifecyclePass(app.store, lambda t: app.for_tenant(t).jobs).run_once()

    dead_runs.make("flaky", 1)
    assert asyncio.run(leader_pass()) == (0, 0)
    dead_runs.make("flaky", 1)
    assert asyncio.run(leader_pass()) == (0, 1)
    shown = ok(invoke("jobs", "show", "flaky")).stdout
    assert "paused after 2 consecutive dead runs" in shown
    assert "duetime" in shown
    history = json.loads(ok(invoke("jobs", "history", "flaky", "--json")).stdout)
    assert history[0]["kind"] == "paused_on_failure"
    ok(invoke("jobs", "pause-on-failure", "flaky", "--off"))


def test_max_jobs_caps_the_tenant_with_a_clear_message(invoke: Invoke) -> None:
    limits = json.loads(ok(invoke("tenants", "set", "default", "--max-jobs", "1", "--json")).stdout)
    assert limits["max_jobs"] == 1
    add(invoke, "one")
    refused = invoke("jobs", "add", "two", "--task", "duetime.noop", "--cron", "0 3 * * *")
    assert_usage_error(refused, "max_jobs", "cap of 1")
    ok(invoke("tenants", "set", "default", "--max-jobs", "0"))
    add(invoke, "two")


def test_sync_prints_the_plan_then_applies_it(invoke: Invoke, tmp_path: Path) -> None:
    add(invoke, "by-hand")
    declared = tmp_path / "jobs.jsonl"
    lines = [
        '{"name": "a", "task": "duetime.noop", "cron": "0 3 * * *"}',
        '{"name": "b", "task": "duetime.noop", "every": "1 day", "anchor": "2030-01-01T00:00:00Z"}',
    ]
    declared.write_text("\n".join(lines) + "\n")
    dry = ok(invoke("jobs", "sync", str(declared), "--source", "app")).stdout
    assert dry.startswith("dry run (give --apply to make these changes): source 'app'")
    assert "create: a, b" in dry
    assert_usage_error(invoke("jobs", "show", "a"), "a")
    ok(invoke("jobs", "sync", str(declared), "--source", "app", "--apply"))
    declared.write_text(lines[0] + "\n")
    plan = json.loads(
        ok(invoke("jobs", "sync", str(declared), "--source", "app", "--apply", "--json")).stdout
    )
    assert plan["retire"] == ["b"]
    assert plan["update"] == ["a"]
    shown = ok(invoke("jobs", "show", "b")).stdout
    assert "no longer declared by app" in shown
    assert "active" in ok(invoke("jobs", "show", "by-hand")).stdout
    declared.write_text('{"name": "c", "task": "duetime.noop", "at": "yesterday"}\n')
    assert_usage_error(invoke("jobs", "sync", str(declared)), "line 1", "at")
    assert_usage_error(invoke("jobs", "sync", str(declared), "--retire", "archive"), "--retire")
    assert_usage_error(invoke("jobs", "sync", str(tmp_path / "none.jsonl")), "no such file")
