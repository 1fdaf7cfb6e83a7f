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
        stdin=subprocess.DEVNULL,  # no terminal: nothing may wait for an answer
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


def test_version(tmp_path: Path) -> None:
    from duetime import __version__

    shown = duetime("--version", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"duetime {__version__}\n"


def test_an_at_long_past_is_refused_unless_allow_past(tmp_path: Path) -> None:
    env = {"DUETIME_DATABASE_URL": str(tmp_path / "cli.db")}
    args = ("jobs", "add", "typo", "--task", "duetime.noop", "--at", "2020-01-01T00:00:00Z")
    refused = duetime(*args, cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert "at:" in refused.stderr
    assert "--allow-past" in refused.stderr
    assert duetime("jobs", "show", "typo", cwd=tmp_path, env=env).returncode != 0
    accepted = duetime(*args, "--allow-past", "--json", cwd=tmp_path, env=env)
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["next_fire_at"].startswith("2020-01-01T00:00:00")


def _add_job(tmp_path: Path, env: dict[str, str]) -> None:
    added = duetime(
        "jobs", "add", "old", "--task", "duetime.noop", "--cron", "0 3 * * *", cwd=tmp_path, env=env
    )
    assert added.returncode == 0, added.stderr


def test_jobs_delete_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    env = {"DUETIME_DATABASE_URL": str(tmp_path / "cli.db")}
    _add_job(tmp_path, env)
    refused = duetime("jobs", "delete", "old", cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "--yes" in refused.stderr
    assert duetime("jobs", "show", "old", cwd=tmp_path, env=env).returncode == 0
    deleted = duetime("jobs", "delete", "old", "-y", cwd=tmp_path, env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert duetime("jobs", "show", "old", cwd=tmp_path, env=env).returncode != 0


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize(("answer", "kept"), [("n", True), ("y", False)])
def test_jobs_delete_asks_at_a_terminal(tmp_path: Path, answer: str, kept: bool) -> None:
    import pty

    env = {"DUETIME_DATABASE_URL": str(tmp_path / "cli.db")}
    _add_job(tmp_path, env)
    environ = {k: v for k, v in os.environ.items() if k != "DUETIME_DATABASE_URL"} | env
    main, terminal = pty.openpty()
    try:
        os.write(main, f"{answer}\n".encode())
        asked = subprocess.run(
            [EXECUTABLE, "jobs", "delete", "old"],
            cwd=tmp_path,
            env=environ,
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(main)
        os.close(terminal)
    assert "Delete job 'old'" in asked.stdout
    assert asked.returncode == (1 if kept else 0), asked.stderr
    shown = duetime("jobs", "show", "old", cwd=tmp_path, env=env)
    assert (shown.returncode == 0) is kept
