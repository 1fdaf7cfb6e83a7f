"""Fixtures for the CLI tests: a SQLite file per test and a CliRunner bound to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from duetime.cli import cli

pytest.register_assert_rewrite("clikit")
from clikit import DeadRuns, Invoke  # noqa: E402


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No database or tenant from the environment; plain (non-terminal) output."""
    for name in ("DUETIME_DATABASE_URL", "DUETIME_TENANT", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TTY_COMPATIBLE", "0")


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "duetime.db")


@pytest.fixture
def invoke(db: str) -> Invoke:
    """``invoke("jobs", "list", "--json")``: run the CLI in-process with ``--db`` appended."""
    runner = CliRunner()

    def run(*args: str, use_db: bool = True) -> Result:
        argv = [*args, "--db", db] if use_db else list(args)
        return runner.invoke(cli, argv, catch_exceptions=False)

    return run


@pytest.fixture
def dead_runs(db: str) -> DeadRuns:
    return DeadRuns(db)
