"""A schedule's bounds from the CLI (issue 16, item 5): ``jobs add --start-at/--end-at/
--max-runs``, ``jobs show`` with "runs left: 3 of 10", ``jobs update --max-runs``, ``duetime
preview --job`` within the bounds, and field errors as usage errors naming the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clikit import Invoke, assert_usage_error, ok

START = datetime.now(UTC).replace(microsecond=0) + timedelta(days=30)


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_bounds_are_added_shown_and_updated(invoke: Invoke) -> None:
    end = START + timedelta(hours=5)
    args = ("--task", "duetime.noop", "--every", "1h", "--start-at", iso(START))
    added = ok(invoke("jobs", "add", "hourly", *args, "--end-at", iso(end), "--max-runs", "10"))
    assert "runs left" in added.stdout
    shown = ok(invoke("jobs", "show", "hourly")).stdout
    lines = {line.split(maxsplit=2)[-1] for line in shown.splitlines() if line.strip()}
    assert {iso(START), iso(end), "10 of 10"} <= lines  # start at, end at, runs left
    updated = ok(invoke("jobs", "update", "hourly", "--max-runs", "3", "--json"))
    job = json.loads(updated.stdout)
    assert (job["max_runs"], job["runs_created"]) == (3, 0)
    assert "3 of 3" in ok(invoke("jobs", "show", "hourly")).stdout
    fires = json.loads(ok(invoke("jobs", "show", "hourly", "--json")).stdout)["next_fires"]
    assert [f["utc"] for f in fires] == [iso(START + timedelta(hours=k)) for k in range(3)]
    previewed = json.loads(ok(invoke("preview", "--job", "hourly", "--json")).stdout)
    assert [f["utc"] for f in previewed] == [iso(START + timedelta(hours=k)) for k in range(3)]
    cleared = json.loads(
        ok(
            invoke("jobs", "update", "hourly", "--max-runs", "none", "--end-at", "none", "--json")
        ).stdout
    )
    assert (cleared["max_runs"], cleared["end_at"]) == (None, None)
    assert "runs left" not in ok(invoke("jobs", "show", "hourly")).stdout


def test_bad_bounds_are_usage_errors_naming_the_field(invoke: Invoke) -> None:
    every = ("--task", "duetime.noop", "--every", "60")
    start = ("--start-at", iso(START))
    assert_usage_error(
        invoke("jobs", "add", "j", *every, *start, "--end-at", iso(START)), "--end-at: ", "after"
    )
    assert_usage_error(invoke("jobs", "add", "j", *every, "--max-runs", "0"), "--max-runs: ")
    assert_usage_error(invoke("jobs", "add", "j", *every, "--start-at", "tomorrow"), "--start-at")
    assert_usage_error(
        invoke("jobs", "add", "j", "--task", "duetime.noop", "--now", "--max-runs", "2"),
        "--max-runs: ",
        "recurring",
    )
    ok(invoke("jobs", "add", "j", *every))
    assert_usage_error(invoke("jobs", "update", "j", "--max-runs", "-1"), "--max-runs: ")
    assert_usage_error(invoke("jobs", "update", "j", "--max-runs", "many"), "--max-runs")


def test_import_takes_the_bounds(invoke: Invoke, tmp_path: Path) -> None:
    file = tmp_path / "jobs.jsonl"
    line = {
        "name": "imported",
        "task": "duetime.noop",
        "every": "1h",
        "start_at": iso(START),
        "max_runs": 4,
    }
    bad = {"name": "bad", "task": "duetime.noop", "every": 60, "start_at": "someday"}
    file.write_text(json.dumps(line) + "\n")
    ok(invoke("jobs", "import", str(file), "--allow-unregistered"))
    job = json.loads(ok(invoke("jobs", "show", "imported", "--json")).stdout)["job"]
    assert (job["start_at"], job["max_runs"], job["next_fire_at"]) == (iso(START), 4, iso(START))
    file.write_text(json.dumps(bad) + "\n")
    assert_usage_error(
        invoke("jobs", "import", str(file), "--allow-unregistered"), "line 1", "start_at"
    )
