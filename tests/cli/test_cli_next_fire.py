""" "next fire" in ``duetime jobs list``/``jobs show``/``explain`` through the real executable
(issue 17, item 7): the earliest occurrence not fired yet, not the scheduler's ``next_fire_at``
that has moved past the runs it wrote ahead."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime.app import AsyncApp
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job

EXECUTABLE = shutil.which("duetime", path=str(Path(sys.executable).parent)) or shutil.which(
    "duetime"
)

pytestmark = pytest.mark.skipif(EXECUTABLE is None, reason="the duetime script is not installed")


def duetime(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DUETIME_DATABASE_URL", "DUETIME_TENANT", "FORCE_COLOR")
    }
    result = subprocess.run(
        [str(EXECUTABLE), *args, "--db", db],
        env={**environ, "TTY_COMPATIBLE": "0"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def shown(at: datetime) -> str:
    return at.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


async def written_ahead(db: str) -> tuple[datetime, datetime]:
    """A job every minute whose next five occurrences a scheduler wrote ahead (a 5-minute
    horizon): its earliest occurrence not fired yet and its ``next_fire_at``, 5 min later."""
    async with AsyncApp(db, migrate=True) as app:
        job = await app.schedule("ticker", task="duetime.noop", every=60)
        assert job.next_fire_at is not None
        await materialize(app.store, plan_job, horizon=299.0, now=job.next_fire_at)
        stored = await app.get("ticker")
    assert stored.next_fire_at == job.next_fire_at + timedelta(minutes=5)
    return job.next_fire_at, stored.next_fire_at


def next_fire_field(lines: list[str]) -> str:
    """The value of the ``next fire`` field of ``print_fields`` output (plain, not a terminal)."""
    [line] = [
        line for line in lines if line.split()[:2] == ["next", "fire"] and ":" not in line[:20]
    ]
    return line.split()[-1]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "duetime.db")


def test_jobs_list_shows_the_earliest_occurrence_not_fired(db: str) -> None:
    first, cursor = asyncio.run(written_ahead(db))
    table = duetime("jobs", "list", db=db).stdout.splitlines()
    assert "next fire (UTC)" in table[0]
    [row] = [line for line in table if line.startswith("ticker")]
    assert shown(first) in row
    assert shown(cursor) not in row

    [item] = json.loads(duetime("jobs", "list", "--json", db=db).stdout)["items"]
    assert datetime.fromisoformat(item["next_occurrence_at"]) == first
    assert datetime.fromisoformat(item["next_fire_at"]) == cursor


def test_jobs_show_and_explain_show_it_too(db: str) -> None:
    first, cursor = asyncio.run(written_ahead(db))
    show = duetime("jobs", "show", "ticker", db=db).stdout.splitlines()
    assert next_fire_field(show) == shown(first)
    explain = duetime("explain", "ticker", db=db).stdout
    assert next_fire_field(explain.splitlines()) == shown(first)
    assert f"next fires at {first.isoformat().replace('+00:00', 'Z')}" in explain
    assert shown(cursor) not in explain.split("next fire instants")[0]
    data = json.loads(duetime("explain", "ticker", "--json", db=db).stdout)
    assert datetime.fromisoformat(data["next_occurrence_at"]) == first
    assert datetime.fromisoformat(data["next"][0]["utc"]) == first
