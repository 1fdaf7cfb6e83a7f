"""``duetime audit`` and the CLI's own records (issue 22, item 3): every mutating command
writes exactly one record, as ``cli:<OS user>@<database>``; the list filters, pages and prints
JSON; bad filters are exit 2."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clikit import DeadRuns, Invoke, assert_usage_error, ok

from duetime._audit import os_user
from duetime.app import AsyncApp


def audit(invoke: Invoke, *args: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(ok(invoke("audit", "--json", *args)).stdout)["items"]
    return items


def a_run(db: str) -> str:
    async def go() -> str:
        async with AsyncApp(db) as app:
            return str((await app.trigger("nightly")).id)

    return asyncio.run(go())


def a_key(db: str) -> str:
    async def go() -> str:
        async with AsyncApp(db) as app:
            return str((await app.create_key("viewer"))[0].id)

    return asyncio.run(go())


def jobs_file(tmp: Path) -> str:
    path = tmp / "jobs.jsonl"
    lines = [{"name": f"b{i}", "task": "duetime.noop", "cron": "* * * * *"} for i in range(3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


Args = Callable[[str, Path], list[str]]

# (what, the command line (given the database and a directory), the action recorded)
COMMANDS: list[tuple[str, Args, str]] = [
    (
        "jobs add",
        lambda d, t: ["jobs", "add", "new", "--task", "duetime.noop", "--cron", "* * * * *"],
        "created",
    ),
    ("jobs update", lambda d, t: ["jobs", "update", "nightly", "--priority", "3"], "updated"),
    ("jobs pause", lambda d, t: ["jobs", "pause", "nightly"], "paused"),
    ("jobs cancel", lambda d, t: ["jobs", "cancel", "nightly"], "cancelled"),
    ("jobs delete", lambda d, t: ["jobs", "delete", "nightly", "--yes"], "deleted"),
    ("jobs trigger", lambda d, t: ["jobs", "trigger", "nightly"], "triggered"),
    ("jobs import", lambda d, t: ["jobs", "import", jobs_file(t)], "created"),
    ("runs cancel", lambda d, t: ["runs", "cancel", a_run(d)], "cancelled"),
    ("dlq replay", lambda d, t: ["dlq", "replay", "--all"], "replayed"),
    ("keys create", lambda d, t: ["keys", "create", "--role", "viewer"], "created"),
    ("keys revoke", lambda d, t: ["keys", "revoke", a_key(d)], "revoked"),
    ("tenants set", lambda d, t: ["tenants", "set", "default", "--weight", "2"], "limits_set"),
    (
        "tenants alerts",
        lambda d, t: ["tenants", "alerts", "default", "--webhook", "https://example.com/h"],
        "alert_webhooks_set",
    ),
]


@pytest.fixture
def seeded(invoke: Invoke, db: str) -> str:
    ok(invoke("jobs", "add", "nightly", "--task", "duetime.noop", "--cron", "0 3 * * *"))
    DeadRuns(db).make("doomed")
    return db


@pytest.mark.parametrize(("args", "action"), [pytest.param(a, act, id=w) for w, a, act in COMMANDS])
def test_each_mutating_command_writes_one_record_as_the_cli_user(
    invoke: Invoke, seeded: str, tmp_path: Path, args: Args, action: str
) -> None:
    actor = f"cli:{os_user()}@{seeded}"
    line = args(seeded, tmp_path)  # its own setup acts as the Python app
    before = audit(invoke, "--actor", actor)
    ok(invoke(*line))
    after = audit(invoke, "--actor", actor)
    assert len(after) == len(before) + 1
    assert after[0]["action"] == action


def test_resume_writes_one_record(invoke: Invoke, seeded: str) -> None:
    ok(invoke("jobs", "pause", "nightly"))
    ok(invoke("jobs", "resume", "nightly"))
    assert [r["action"] for r in audit(invoke, "--subject", "nightly")][:2] == [
        "resumed",
        "paused",
    ]


def test_list_filters_pages_and_table(invoke: Invoke, seeded: str) -> None:
    for _ in range(3):
        ok(invoke("jobs", "trigger", "nightly"))
    assert len(audit(invoke, "--action", "triggered", "--subject", "nightly")) == 3
    first = json.loads(ok(invoke("audit", "--json", "--limit", "2")).stdout)
    assert len(first["items"]) == 2
    assert first["next_cursor"]
    every = audit(invoke, "--all", "--limit", "2")
    assert len(every) == len(audit(invoke, "--limit", "1000"))
    assert audit(invoke, "--since", "2999-01-01T00:00:00Z") == []
    table = ok(invoke("audit", "--action", "triggered")).stdout
    assert "triggered" in table
    assert "job nightly" in table
    assert "no audit records" in ok(invoke("audit", "--tenant", "elsewhere")).output


def test_bad_filters_are_usage_errors(invoke: Invoke) -> None:
    assert_usage_error(invoke("audit", "--since", "yesterday"), "--since")
    assert_usage_error(invoke("audit", "--since", "2026-01-01T00:00:00"), "--since")
    assert_usage_error(invoke("audit", "--limit", "0"), "--limit")
    assert_usage_error(invoke("audit", "--cursor", "nonsense"), "cursor")
