"""The real ``duetime`` executable, in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXECUTABLE = shutil.which("duetime", path=str(Path(sys.executable).parent)) or shutil.which(
    "duetime"
)

pytestmark = pytest.mark.skipif(EXECUTABLE is None, reason="the duetime script is not installed")


def duetime(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DUETIME_DATABASE_URL", "DUETIME_TENANT", "FORCE_COLOR")
    }
    environ.update(env or {})
    return subprocess.run(
        [EXECUTABLE, *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_jobs_round_trip_through_the_executable(tmp_path: Path) -> None:
    env = {"DUETIME_DATABASE_URL": str(tmp_path / "cli.db")}
    added = duetime(
        "jobs",
        "add",
        "nightly",
        "--task",
        "duetime.noop",
        "--cron",
        "0 3 * * *",
        "--json",
        cwd=tmp_path,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    job = json.loads(added.stdout)
    trigger = duetime("jobs", "trigger", "nightly", cwd=tmp_path, env=env)
    assert trigger.returncode == 0, trigger.stderr
    listed = duetime("runs", "list", "--job", job["id"], "--json", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)["items"]] == [trigger.stdout.strip()]

    bad = duetime(
        "jobs",
        "add",
        "x",
        "--task",
        "duetime.noop",
        "--cron",
        "0 0 * * *",
        "--tz",
        "Mars/Base",
        cwd=tmp_path,
        env=env,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: tz: ")
    assert "Traceback" not in bad.stderr
    assert bad.stdout == ""


def test_preview_through_the_executable(tmp_path: Path) -> None:
    result = duetime(
        "preview",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-07T00:00:00Z",
        "--count",
        "3",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    fires = json.loads(result.stdout)
    moved = [f for f in fires if f["utc"] == "2026-03-08T07:00:00Z"]
    assert len(moved) == 1
    assert moved[0]["dst_note"]
    assert list(tmp_path.iterdir()) == []
