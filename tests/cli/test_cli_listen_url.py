"""``--listen-url`` (issue 20): the commands that open a store and listen take the direct URL for
notifications as a flag too, one definition shared by all (``cli/_common.ListenUrlOption``); the
flag outranks ``DUETIME_LISTEN_URL``. The real ``duetime`` executable on real PostgreSQL."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from test_cli_connect import GUARD, _read_until, _start, one_error_line
from test_cli_executable import EXECUTABLE, duetime

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(EXECUTABLE is None, reason="the duetime script is not installed"),
]

COMMANDS = {
    "scheduler": ["scheduler"],
    "worker": ["worker"],
    "server": ["server", "--port", "0"],
    "up": ["up", "--port", "0"],
}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_each_listening_command_takes_the_flag_and_checks_it(
    pg_url: str, tmp_path: Path, command: list[str]
) -> None:
    result = duetime(
        *command,
        "--db",
        pg_url,
        "--listen-url",
        "mysql://db/x",
        cwd=tmp_path,
        env={"DUETIME_LISTEN_URL": ""},
    )
    one_error_line(result, "listen_url", "must be a postgresql:// URL", "mysql://db/x")


def test_the_flag_outranks_the_environment_and_the_store_listens_there(
    pg_url: str, tmp_path: Path
) -> None:
    assert duetime("migrate", "--db", pg_url, cwd=tmp_path).returncode == 0
    env = {"DUETIME_PGBOUNCER": "transaction", "DUETIME_LISTEN_URL": "mysql://db/x"}
    proc = _start(tmp_path, "scheduler", "--db", pg_url, "--listen-url", pg_url, env=env)
    try:
        seen = _read_until(
            proc,
            "notifications from a direct connection to postgresql://",
            time.monotonic() + GUARD,
        )
        seen += _read_until(proc, "scheduler started", time.monotonic() + GUARD)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, seen + err
    assert "PgBouncer transaction pooling at" in seen
    assert "mysql://" not in seen + err
