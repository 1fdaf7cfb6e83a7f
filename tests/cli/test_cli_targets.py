"""``duetime tenants rotate-secret``, ``duetime breakers``, target descriptions and the
command checks of ``duetime doctor`` (issue 19)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clikit import Invoke, assert_usage_error, ok
from typer.testing import CliRunner

from duetime._types import BreakerState, WorkerInfo
from duetime.app import AsyncApp
from duetime.cli import cli
from duetime.cli._output import describe_target


def test_rotate_secret_prints_the_new_secret_once_and_keeps_the_old_signing(
    invoke: Invoke, db: str
) -> None:
    async def secrets() -> list[str]:
        async with AsyncApp(db, migrate=True) as app:
            return await app.store.tenant_signing_secrets("acme")

    [old] = asyncio.run(secrets())
    out = json.loads(
        ok(invoke("tenants", "rotate-secret", "acme", "--overlap", "2h", "--json")).stdout
    )
    assert out["tenant"] == "acme"
    assert asyncio.run(secrets()) == [out["secret"], old]
    until = datetime.fromisoformat(out["previous_until"])
    assert timedelta(minutes=119) < until - datetime.now(UTC) <= timedelta(hours=2)
    text = ok(invoke("tenants", "rotate-secret", "acme")).stdout
    assert "new secret" in text
    assert_usage_error(invoke("tenants", "rotate-secret", "acme", "--overlap", "soon"), "--overlap")
    assert_usage_error(invoke("tenants", "rotate-secret", "acme", "--overlap", "5s"), "overlap")


def test_breakers_lists_what_workers_report(invoke: Invoke, db: str) -> None:
    assert "no breaker is open" in ok(invoke("breakers")).stderr

    async def report() -> None:
        async with AsyncApp(db, migrate=True) as app:
            now = await app.store.db_now()
            await app.store.worker_register(
                WorkerInfo("w1", "h", 1, ("t",), ("*",), started_at=now, heartbeat_at=now)
            )
            state = BreakerState("w1", "http:crm.example:443", "open", 5, now, now)
            await app.store.breakers_report("w1", [state])

    asyncio.run(report())
    [shown] = json.loads(ok(invoke("breakers", "--json")).stdout)["breakers"]
    assert (shown["key"], shown["state"], shown["failures"]) == ("http:crm.example:443", "open", 5)
    assert "http:crm.example:443" in ok(invoke("breakers")).stdout


def test_targets_are_described_without_values() -> None:
    assert describe_target({"type": "command", "name": "export"}) == "command export"
    shown = describe_target(
        {
            "type": "http",
            "url": "https://crm.example/x",
            "headers": {"A": {"secret": "CRM_TOKEN"}, "B": "plain-credential"},
        }
    )
    assert shown == "POST https://crm.example/x (headers A: secret CRM_TOKEN, B: <redacted>)"


def test_doctor_checks_each_commands_program_and_directory(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def migrate() -> None:
        async with AsyncApp(db, migrate=True):
            pass

    asyncio.run(migrate())
    commands = {
        "ok": {"argv": [sys.executable, "-c", "pass"], "cwd": str(tmp_path)},
        "gone": {"argv": ["/nonexistent/duetime-export"]},
        "nowhere": {"argv": [sys.executable], "cwd": str(tmp_path / "missing")},
    }
    monkeypatch.setenv("DUETIME_COMMANDS", json.dumps(commands))
    result = CliRunner().invoke(cli, ["doctor", "--db", db, "--json"], catch_exceptions=False)
    found = {c["check"]: c for c in json.loads(result.stdout)["checks"]}
    assert found["command ok"]["status"] == "ok"
    assert found["command gone"]["status"] == "fail"
    assert "not an executable file" in found["command gone"]["detail"]
    assert found["command nowhere"]["status"] == "fail"
    assert "DUETIME_COMMANDS" in str(found["command nowhere"]["fix"])
    monkeypatch.setenv("DUETIME_COMMANDS", '{"x": {"argv": []}}')
    result = CliRunner().invoke(cli, ["doctor", "--db", db, "--json"], catch_exceptions=False)
    bad = {c["check"]: c for c in json.loads(result.stdout)["checks"]}["commands"]
    assert bad["status"] == "fail"
    assert "commands.x.argv" in bad["detail"]
