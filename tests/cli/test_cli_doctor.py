"""``duetime doctor``: each check's finding with its fix, exit 1 only when a check fails,
nothing written; on both stores (a real database, a real cluster's rows)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from duetime import AsyncApp
from duetime._types import NodeInfo, WorkerInfo
from duetime.cli import cli
from duetime.store.base import LeaderElectParams


def doctor(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["doctor", "--db", db, *args], catch_exceptions=False)


def checks(result: Result) -> dict[str, dict[str, str | None]]:
    body = json.loads(result.stdout)
    return {c["check"]: c for c in body["checks"]}


async def _cluster(url: str, *, worker: bool) -> None:
    """A migrated database where a scheduler heartbeats and leads, and (``worker``) a worker
    serving ``a.task``; one job of a task nobody serves has a run due."""
    async with AsyncApp(url, migrate=True) as app:
        now = await app.store.db_now()
        node = NodeInfo("sched-1", "host-a", os.getpid(), ("scheduler",), None, now, now)
        await app.store.node_register(node)
        assert await app.store.leader_elect(LeaderElectParams("sched-1", ttl=120)) is not None
        if worker:
            info = WorkerInfo("w-1", "host-b", 4242, ("a.task",), ("default",), now, now)
            await app.store.worker_register(info)


@pytest.mark.fresh_database
def test_an_empty_database_is_told_to_migrate(store_url: str) -> None:
    result = doctor(store_url, "--json")
    assert result.exit_code == 1
    found = checks(result)
    assert found["database"]["status"] == "ok"
    assert found["schema"]["status"] == "fail"
    assert "duetime migrate" in str(found["schema"]["fix"])
    assert "schedulers" not in found  # not checked on a database without the schema
    if store_url.endswith(".db"):
        assert not Path(store_url).exists()  # nothing written


async def _migrated(url: str) -> None:
    async with AsyncApp(url, migrate=True):
        pass


def test_a_cluster_without_schedulers_fails_and_says_what_to_start(store_url: str) -> None:
    asyncio.run(_migrated(store_url))
    result = doctor(store_url)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("schedulers") and "FAIL" in line for line in lines)
    assert any(line.startswith("leader") and "FAIL" in line for line in lines)
    assert any(line.startswith("workers") and "WARN" in line for line in lines)
    assert "schedulers: start `duetime scheduler`" in result.stdout
    assert "Traceback" not in result.output


def test_a_healthy_cluster_passes(store_url: str) -> None:
    asyncio.run(_cluster(store_url, worker=True))
    result = doctor(store_url, "--json")
    assert result.exit_code == 0, result.stdout
    found = checks(result)
    assert json.loads(result.stdout)["ok"] is True
    for name in ("database", "schema", "clock", "tzdata", "schedulers", "leader", "workers"):
        assert found[name]["status"] == "ok", found[name]
        assert found[name]["fix"] is None
    assert "sched-1" in str(found["leader"]["detail"])
    assert "a.task" in str(found["workers"]["detail"])


def test_an_unreachable_database_fails_with_its_fix() -> None:
    result = doctor("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "--json")
    assert result.exit_code == 1
    found = checks(result)
    assert found["database"]["status"] == "fail"
    assert "cannot open" in str(found["database"]["detail"])
    assert "DUETIME_DATABASE_URL" in str(found["database"]["fix"])
    assert list(found) == ["database"]
