"""``duetime runs …`` and ``duetime dlq …`` in-process."""

from __future__ import annotations

import dataclasses
import json
import re
import uuid

import pytest
from clikit import DeadRuns, Invoke, assert_usage_error, ok

from duetime._types import Run

RUN_KEYS = {f.name for f in dataclasses.fields(Run)}
"""Every field of the Run value type: the JSON output mirrors it."""
ATTEMPT_KEYS = {
    "run_id",
    "job_id",
    "tenant",
    "number",
    "token",
    "worker_id",
    "claimed_at",
    "started_at",
    "finished_at",
    "outcome",
    "error_class",
    "error_message",
    "traceback",
    "duration_seconds",
}


def add_job(invoke: Invoke, name: str) -> None:
    ok(invoke("jobs", "add", name, "--task", "duetime.noop", "--cron", "0 3 * * *"))


def trigger(invoke: Invoke, job: str) -> str:
    return ok(invoke("jobs", "trigger", job)).stdout.strip()


# --- runs -------------------------------------------------------------------------------------


def test_runs_list_json_filters_and_pages(invoke: Invoke, dead_runs: DeadRuns) -> None:
    add_job(invoke, "a")
    add_job(invoke, "b")
    a_runs = [trigger(invoke, "a") for _ in range(3)]
    b_run = trigger(invoke, "b")
    dead = dead_runs.make("doomed")

    page = json.loads(ok(invoke("runs", "list", "--json")).stdout)
    assert set(page) == {"items", "next_cursor"}
    assert page["next_cursor"] is None
    assert len(page["items"]) == 5
    assert all(set(r) == RUN_KEYS for r in page["items"])

    def ids(*args: str) -> list[str]:
        return [
            r["id"] for r in json.loads(ok(invoke("runs", "list", "--json", *args)).stdout)["items"]
        ]

    assert set(ids("--job", "a")) == set(a_runs)
    assert ids("--job", "b") == [b_run]
    assert ids("--state", "dead") == [str(dead[0])]
    assert set(ids("--job", "a", "--state", "scheduled")) == set(a_runs)

    first = json.loads(ok(invoke("runs", "list", "--json", "--job", "a", "--limit", "2")).stdout)
    assert len(first["items"]) == 2
    assert first["next_cursor"]
    rest = ids("--job", "a", "--limit", "2", "--cursor", first["next_cursor"])
    assert {r["id"] for r in first["items"]} | set(rest) == set(a_runs)
    assert len(rest) == 1


def test_runs_list_text(invoke: Invoke) -> None:
    empty = ok(invoke("runs", "list"))
    assert empty.stdout == ""
    assert "no runs" in empty.stderr
    add_job(invoke, "a")
    run_id = trigger(invoke, "a")
    lines = ok(invoke("runs", "list")).stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "id", "job"]
    assert re.match(rf"^{run_id}\s+a\s+scheduled\s+\S+Z\s+0/3\s+manual", lines[1])


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--state", "sleeping"], ["--state", "sleeping"]),
        (["--limit", "5000"], ["--limit"]),
        (["--job", "ghost"], ["ghost", "not found"]),
        (["--cursor", "nonsense"], ["cursor"]),
    ],
)
def test_runs_list_rejects_invalid_input(
    invoke: Invoke, args: list[str], needles: list[str]
) -> None:
    assert_usage_error(invoke("runs", "list", *args), *needles)


def test_runs_show_json_with_attempts(invoke: Invoke, dead_runs: DeadRuns) -> None:
    [run_id] = dead_runs.make("doomed", error="disk full")
    shown = json.loads(ok(invoke("runs", "show", str(run_id), "--json")).stdout)
    assert set(shown) == {"run", "attempts"}
    run = shown["run"]
    assert set(run) == RUN_KEYS
    assert run["id"] == str(run_id)
    assert run["state"] == "dead"
    assert run["reason"] == "attempts_exhausted"
    assert run["last_error_message"] == "disk full"
    [attempt] = shown["attempts"]
    assert set(attempt) == ATTEMPT_KEYS
    assert attempt["worker_id"] == "worker-test"
    assert attempt["outcome"] == "failed"
    assert attempt["error_class"] == "DemoFailure"
    assert attempt["error_message"] == "disk full"
    assert attempt["traceback"].startswith("Traceback (most recent call last):")
    assert "in doomed_task" in attempt["traceback"]
    assert attempt["traceback"].rstrip().endswith("DemoFailure: disk full")
    assert attempt["number"] == 1
    assert isinstance(attempt["duration_seconds"], float)
    assert attempt["duration_seconds"] >= 0


def test_runs_show_text(invoke: Invoke, dead_runs: DeadRuns) -> None:
    [run_id] = dead_runs.make("doomed", error="disk full")
    out = ok(invoke("runs", "show", str(run_id))).stdout
    assert re.search(rf"^id\s+{run_id}$", out, re.M)
    assert re.search(r"^state\s+dead$", out, re.M)
    assert "attempts:" in out
    assert re.search(
        r"^1\s+worker-test\s+\S+Z\s+\S+Z\s+\S+s\s+failed\s+DemoFailure: disk full$", out, re.M
    )
    # the attempt's traceback, as Python printed it (issue 17)
    shown = out.split("attempt 1 traceback:\n", 1)[1]
    assert shown.startswith("Traceback (most recent call last):\n")
    assert "in doomed_task" in shown
    assert shown.rstrip().endswith("DemoFailure: disk full")


def test_runs_cancel(invoke: Invoke) -> None:
    add_job(invoke, "a")
    run_id = trigger(invoke, "a")
    assert ok(invoke("runs", "cancel", run_id)).stdout == f"run {run_id} is cancelled\n"
    run = json.loads(ok(invoke("runs", "show", run_id, "--json")).stdout)["run"]
    assert run["state"] == "cancelled"
    assert_usage_error(invoke("runs", "cancel", run_id), "cancelled")


@pytest.mark.parametrize("command", ["show", "cancel"])
@pytest.mark.parametrize("run_id", ["not-a-uuid", str(uuid.uuid4())])
def test_unknown_run_is_not_found(invoke: Invoke, command: str, run_id: str) -> None:
    assert_usage_error(invoke("runs", command, run_id), "not found")


# --- dlq --------------------------------------------------------------------------------------


def test_dlq_list(invoke: Invoke, dead_runs: DeadRuns) -> None:
    empty = ok(invoke("dlq", "list"))
    assert empty.stdout == ""
    assert "empty" in empty.stderr
    add_job(invoke, "fine")
    trigger(invoke, "fine")
    dead = dead_runs.make("doomed", 2, error="no route to host")

    page = json.loads(ok(invoke("dlq", "list", "--json")).stdout)
    assert set(page) == {"items", "next_cursor"}
    assert {r["id"] for r in page["items"]} == {str(i) for i in dead}
    for run in page["items"]:
        assert set(run) == RUN_KEYS
        assert run["job_name"] == "doomed"
        assert run["state"] == "dead"
        assert run["attempt"] == 1
        assert run["reason"] == "attempts_exhausted"
        assert run["last_error_message"] == "no route to host"

    limited = json.loads(ok(invoke("dlq", "list", "--json", "--limit", "1")).stdout)
    assert len(limited["items"]) == 1
    assert limited["next_cursor"]

    lines = ok(invoke("dlq", "list")).stdout.splitlines()
    assert lines[0].split() == [
        "run",
        "id",
        "job",
        "scheduled",
        "for",
        "attempts",
        "reason",
        "last",
        "error",
    ]
    assert len(lines) == 3
    assert all(
        re.search(r"doomed .* 1 +attempts_exhausted +DemoFailure: no route to host$", line)
        for line in lines[1:]
    )


def dead_ids(invoke: Invoke) -> set[str]:
    return {r["id"] for r in json.loads(ok(invoke("dlq", "list", "--json")).stdout)["items"]}


def test_dlq_replay_given_runs(invoke: Invoke, dead_runs: DeadRuns) -> None:
    first, second, third = dead_runs.make("doomed", 3)
    result = ok(invoke("dlq", "replay", str(first), str(second)))
    assert result.stdout == "replayed 2 runs\n"
    assert dead_ids(invoke) == {str(third)}
    run = json.loads(ok(invoke("runs", "show", str(first), "--json")).stdout)["run"]
    assert run["state"] == "scheduled"
    assert run["replays"] == 1
    # Not dead any more: nothing to do, and said so.
    again = ok(invoke("dlq", "replay", str(first), "--json"))
    assert json.loads(again.stdout) == {"replayed": 0, "run_ids": []}


def test_dlq_replay_a_job(invoke: Invoke, dead_runs: DeadRuns) -> None:
    doomed = dead_runs.make("doomed", 2)
    other = dead_runs.make("other", 1)
    result = ok(invoke("dlq", "replay", "--job", "doomed", "--json"))
    replayed = json.loads(result.stdout)
    assert replayed["replayed"] == 2
    assert set(replayed["run_ids"]) == {str(i) for i in doomed}
    assert dead_ids(invoke) == {str(other[0])}


def test_dlq_replay_all(invoke: Invoke, dead_runs: DeadRuns) -> None:
    dead_runs.make("doomed", 2)
    dead_runs.make("other", 1)
    assert ok(invoke("dlq", "replay", "--all")).stdout == "replayed 3 runs\n"
    assert dead_ids(invoke) == set()
    assert ok(invoke("dlq", "replay", "--all")).stdout == "replayed 0 runs\n"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        ([], ["nothing selected", "--job", "--all"]),
        (["--job", "doomed", "--all"], ["only one"]),
        ([str(uuid.uuid4()), "--all"], ["only one"]),
        (["--job", "ghost"], ["ghost", "not found"]),
        (["not-a-uuid"], ["not-a-uuid", "not found"]),
    ],
)
def test_dlq_replay_rejects_invalid_input(
    invoke: Invoke, dead_runs: DeadRuns, args: list[str], needles: list[str]
) -> None:
    dead_runs.make("doomed")
    assert_usage_error(invoke("dlq", "replay", *args), *needles)
    assert len(dead_ids(invoke)) == 1
