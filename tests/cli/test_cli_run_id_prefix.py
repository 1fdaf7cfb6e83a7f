"""Run ids by prefix in the real ``duetime`` executable (issue 17): every command that takes a
run id takes its first 8 or more characters, as ``duetime up`` prints them, within --tenant;
no run, a short prefix and an ambiguous one (the candidates listed) are errors, exit 2."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from clikit import DeadRuns
from realcli import duetime, needs_executable

from duetime.app import AsyncApp

pytestmark = needs_executable

TWINS = [
    uuid.UUID("abcd1234-0000-4000-8000-000000000001"),
    uuid.UUID("abcd1234-ffff-4000-8000-000000000002"),
]
"""Two runs' ids that share their first 8 characters (and only those)."""


def cli(cwd: Path, *args: str) -> tuple[int, str, str]:
    done = duetime(*args, "--db", str(cwd / "cli.db"), cwd=cwd)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout, done.stderr


def ok(cwd: Path, *args: str) -> str:
    code, out, err = cli(cwd, *args)
    assert code == 0, err
    return out


def one_line_error(cwd: Path, *args: str) -> str:
    code, out, err = cli(cwd, *args)
    assert code == 2, (out, err)
    assert out == ""
    assert err.startswith("error: "), err
    assert err.count("\n") == 1, err
    return err


def make_run(cwd: Path, job: str = "nightly") -> str:
    ok(cwd, "jobs", "add", job, "--task", "duetime.noop", "--cron", "0 3 * * *")
    return ok(cwd, "jobs", "trigger", job).strip()


def test_a_prefix_names_the_run_in_show_and_cancel(tmp_path: Path) -> None:
    run_id = make_run(tmp_path)
    for given in (run_id[:8], run_id[:13], run_id[:8].upper(), run_id.replace("-", "")[:12]):
        shown = json.loads(ok(tmp_path, "runs", "show", given, "--json"))
        assert shown["run"]["id"] == run_id
    assert ok(tmp_path, "runs", "cancel", run_id[:8]) == f"run {run_id} is cancelled\n"


def test_dlq_replay_takes_prefixes(tmp_path: Path) -> None:
    first, second = DeadRuns(str(tmp_path / "cli.db")).make("doomed", 2)
    replayed = json.loads(ok(tmp_path, "dlq", "replay", str(first)[:8], str(second), "--json"))
    assert set(replayed["run_ids"]) == {str(first), str(second)}
    code, out, err = cli(tmp_path, "dlq", "replay", str(first)[:10])
    assert (code, out) == (0, "replayed 0 runs\n")
    assert err == f"not dead (or not found), left as they are: {str(first)[:10]}\n"


@pytest.mark.parametrize("command", [["runs", "show"], ["runs", "cancel"], ["dlq", "replay"]])
def test_no_run_with_the_prefix_in_the_tenant(tmp_path: Path, command: list[str]) -> None:
    run_id = make_run(tmp_path)
    absent = "deadbeef" if not run_id.startswith("deadbeef") else "feedface"
    error = one_line_error(tmp_path, *command, absent)
    assert error == f"error: no run {absent} in tenant default\n"
    # the run is the default tenant's: another tenant has no run with its prefix
    error = one_line_error(tmp_path, *command, run_id[:8], "--tenant", "other")
    assert error == f"error: no run {run_id[:8]} in tenant other\n"


def test_a_short_prefix_is_refused(tmp_path: Path) -> None:
    run_id = make_run(tmp_path)
    error = one_line_error(tmp_path, "runs", "show", run_id[:7])
    assert error.startswith(f"error: run_id: {run_id[:7]!r} is too short: ")
    assert "at least 8" in error


async def _twin_runs(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs, of jobs ``a`` and ``b``, whose ids are TWINS (the store draws a run's id from
    ``uuid.uuid4``, which hands them out while the runs are made)."""
    async with AsyncApp(db) as app:
        for job in ("a", "b"):
            await app.schedule(job, task="duetime.noop", cron="0 3 * * *")
        chosen = iter(TWINS)
        with monkeypatch.context() as patch:
            patch.setattr(uuid, "uuid4", lambda: next(chosen))
            assert (await app.trigger("a")).id == TWINS[0]
            assert (await app.trigger("b")).id == TWINS[1]


def test_an_ambiguous_prefix_lists_the_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_twin_runs(str(tmp_path / "cli.db"), monkeypatch))
    for command in (["runs", "show"], ["runs", "cancel"], ["dlq", "replay"]):
        code, out, err = cli(tmp_path, *command, "abcd1234")
        assert (code, out) == (2, ""), err
        lines = err.splitlines()
        assert lines[0] == (
            "error: run id abcd1234 is ambiguous in tenant default: 2 runs have it "
            "(give more of the id):"
        )
        assert [line.split()[:2] for line in lines[1:]] == [
            [str(TWINS[0]), "a"],
            [str(TWINS[1]), "b"],
        ]
        assert all(line.split()[2].endswith("Z") for line in lines[1:])  # scheduled for
    # one more character tells them apart; both are still scheduled (nothing was cancelled)
    shown = json.loads(ok(tmp_path, "runs", "show", "abcd1234-f", "--json"))
    assert shown["run"]["id"] == str(TWINS[1])
    assert shown["run"]["state"] == "scheduled"
