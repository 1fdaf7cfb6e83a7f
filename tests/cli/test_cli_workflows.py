"""``duetime workflows …`` (issue 21): register from a file, list, show, trigger (with an
idempotency key), runs, an instance as a tree with mapped items summarized, explain, retry,
cancel, ``--json`` everywhere, and bad input as usage errors (exit 2). Steps are run by
duetime.testing's drain on a frozen clock a minute ahead (the CLI wrote on the real one)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clikit import Invoke, assert_usage_error, ok

from duetime import Permanent, RunContext
from duetime.testing import FrozenApp, FrozenClock, drain

DOC: dict[str, Any] = {
    "name": "etl",
    "steps": [
        {"name": "extract", "task": "wf.extract"},
        {"name": "parts", "task": "wf.part", "map_over": "extract"},
        {"name": "load", "task": "wf.load", "after": ["parts"]},
        {"name": "report", "task": "wf.part", "after": ["load"]},
    ],
}


def run_steps(db: str) -> None:
    """Run everything due, with the workflow's tasks: item 1 of ``parts`` and ``load`` fail
    for good."""

    async def go() -> None:
        clock = FrozenClock(datetime.now(UTC) + timedelta(minutes=1))
        async with FrozenApp(db, clock=clock) as app:

            @app.task("wf.extract")
            async def extract(ctx: RunContext) -> list[int]:
                return [0, 1, 2]

            @app.task("wf.part")
            async def part(ctx: RunContext, payload: Any) -> Any:
                if payload == 1:
                    raise Permanent("item one is broken")
                return payload

            @app.task("wf.load")
            async def load(ctx: RunContext) -> None:
                raise Permanent("never reached")

            await drain(app)

    asyncio.run(go())


@pytest.fixture
def doc_file(tmp_path: Path) -> Path:
    path = tmp_path / "etl.json"
    path.write_text(json.dumps(DOC))
    return path


def test_register_list_show_and_versions(invoke: Invoke, doc_file: Path, tmp_path: Path) -> None:
    first = ok(invoke("workflows", "register", str(doc_file), "--allow-unregistered"))
    assert first.stdout == "registered workflow 'etl' version 1\n"
    again = json.loads(
        ok(invoke("workflows", "register", str(doc_file), "--allow-unregistered", "--json")).stdout
    )
    assert (again["version"], again["created"], again["definition"]) == (1, False, DOC)
    changed = tmp_path / "v2.json"
    changed.write_text(json.dumps({**DOC, "steps": DOC["steps"][:2]}))
    ok(invoke("workflows", "register", str(changed), "--allow-unregistered"))

    listed = json.loads(ok(invoke("workflows", "list", "--json")).stdout)
    assert [(w["name"], w["version"], w["steps"]) for w in listed] == [("etl", 2, 2)]
    table = ok(invoke("workflows", "list")).stdout
    assert "etl" in table
    assert "version" in table
    shown = json.loads(ok(invoke("workflows", "show", "etl", "--version", "1", "--json")).stdout)
    assert (shown["version"], shown["versions"], shown["definition"]) == (1, [1, 2], DOC)
    text = ok(invoke("workflows", "show", "etl", "--version", "1")).stdout
    assert "1 of 1, 2" in text
    assert "parts" in text
    assert "extract" in text


def test_bad_input_is_a_usage_error(invoke: Invoke, doc_file: Path, tmp_path: Path) -> None:
    assert_usage_error(invoke("workflows", "register", str(tmp_path / "none.json")), "FILE.json")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert_usage_error(invoke("workflows", "register", str(garbage)), "is not JSON")
    cyclic = tmp_path / "cyclic.json"
    cyclic.write_text(
        json.dumps({"name": "c", "steps": [{"name": "a", "task": "t", "after": ["zzz"]}]})
    )
    assert_usage_error(
        invoke("workflows", "register", str(cyclic), "--allow-unregistered"),
        "steps[0].after[0]",
        "unknown step 'zzz'",
    )
    assert_usage_error(invoke("workflows", "register", str(doc_file)), "steps[0].task")
    assert_usage_error(invoke("workflows", "show", "nothing"), "'nothing' not found")
    assert_usage_error(invoke("workflows", "trigger", "nothing"), "'nothing' not found")
    ok(invoke("workflows", "register", str(doc_file), "--allow-unregistered"))
    assert_usage_error(invoke("workflows", "trigger", "etl", "--payload", "{x"), "--payload")
    assert_usage_error(invoke("workflows", "instance", "nope"), "ID", "not an instance id")
    assert_usage_error(invoke("workflows", "explain", "nope"), "not an instance id")
    missing = "00000000-0000-4000-8000-000000000000"
    assert_usage_error(invoke("workflows", "cancel", missing), "not found")
    assert_usage_error(invoke("workflows", "runs", "--state", "asleep"), "--state", "asleep")
    assert_usage_error(invoke("workflows", "runs", "--job", "x"), "--job")


def test_trigger_instance_tree_explain_retry_and_cancel(
    invoke: Invoke, db: str, doc_file: Path
) -> None:
    ok(invoke("workflows", "register", str(doc_file), "--allow-unregistered"))
    made = ok(invoke("workflows", "trigger", "etl", "--payload", '{"day": 1}'))
    assert "created job 'workflow:etl'" in made.stdout
    run_steps(db)
    [failed] = json.loads(ok(invoke("workflows", "runs", "--workflow", "etl", "--json")).stdout)
    assert failed["state"] == "failed"
    assert failed["input"] == {"day": 1}
    table = ok(invoke("workflows", "runs", "--state", "failed")).stdout
    assert failed["id"] in table

    tree = ok(invoke("workflows", "instance", failed["id"])).stdout
    assert f"etl v1  failed  {failed['id']}" in tree
    assert "3 items: 1 failed, 2 succeeded" in tree
    assert "[1] failed" in tree
    assert "item one is broken" in tree
    assert "report  skipped  after load" in tree
    detail = json.loads(ok(invoke("workflows", "instance", failed["id"], "--json")).stdout)
    assert [(s["step"], s["map_index"], s["state"]) for s in detail["steps"]] == [
        ("extract", -1, "succeeded"),
        ("parts", -1, "failed"),
        ("parts", 0, "succeeded"),
        ("parts", 1, "failed"),
        ("parts", 2, "succeeded"),
        ("load", -1, "skipped"),
        ("report", -1, "skipped"),
    ]
    assert {"from": "extract", "to": "parts", "on": "on_success"} in detail["edges"]

    why = ok(invoke("workflows", "explain", failed["id"])).stdout
    assert "skipped: parent parts failed, edge on_success" in why
    explained = json.loads(ok(invoke("workflows", "explain", failed["id"], "--json")).stdout)
    assert [s["step"] for s in explained["steps"]] == ["load", "report"]

    assert_usage_error(invoke("workflows", "cancel", failed["id"]), "only a running")
    retried = json.loads(ok(invoke("workflows", "retry", failed["id"], "--json")).stdout)
    assert retried["state"] == "running"
    waiting = ok(invoke("workflows", "explain", failed["id"])).stdout
    assert "waiting for parts (on_success)" in waiting
    assert "cancelled workflow instance" in ok(invoke("workflows", "cancel", failed["id"])).stdout
    assert_usage_error(invoke("workflows", "retry", failed["id"]), "only a failed")


def test_trigger_with_an_idempotency_key(invoke: Invoke, db: str, doc_file: Path) -> None:
    ok(invoke("workflows", "register", str(doc_file), "--allow-unregistered"))
    ok(invoke("workflows", "trigger", "etl"))  # creates the job
    run_steps(db)
    args = ("workflows", "trigger", "etl", "--idempotency-key", "k1", "--json")
    first = json.loads(ok(invoke(*args)).stdout)
    assert first["created"] is True
    assert first["run_id"]
    repeat = json.loads(ok(invoke(*args)).stdout)
    assert (repeat["created"], repeat["run_id"]) == (False, first["run_id"])
    text = ok(invoke("workflows", "trigger", "etl", "--idempotency-key", "k1")).stdout
    assert text == f"already triggered with this key: run {first['run_id']}\n"
