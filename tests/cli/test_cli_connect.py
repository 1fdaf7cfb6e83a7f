"""A database the CLI cannot open (issue 17): a wrong PostgreSQL URL, a refused port, a bad
SQLite path — one line and a non-zero exit, never a hang or a traceback; long-running roles
retry a refused connection, announced, and stop at the first signal while still connecting.

Every command runs the real ``duetime`` executable with a guard timeout (a hang fails the
test); the tests assert messages and exit codes, not durations."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from test_cli_executable import EXECUTABLE, duetime
from tests.conftest import pg_base_url, pg_unavailable_reason

pytestmark = pytest.mark.skipif(EXECUTABLE is None, reason="the duetime script is not installed")

GUARD = 30.0
"""Seconds any one process may take before the test fails (a hang)."""


def refused_url(password: str = "s3cret") -> str:
    """A PostgreSQL URL whose port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres"


def with_part(url: str, *, user: str | None = None, dbname: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if user is not None:
        netloc = f"{user}@{netloc.rpartition('@')[2]}"
    path = parts.path if dbname is None else f"/{dbname}"
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


def one_error_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def live_pg() -> str:
    reason = pg_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return pg_base_url()


# --- PostgreSQL: errors that retrying cannot fix end at once ----------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"user": "duetime_no_such_role"}, 'role "duetime_no_such_role" does not exist'),
        ({"dbname": "duetime_no_such_db"}, 'database "duetime_no_such_db" does not exist'),
    ],
    ids=["unknown-role", "unknown-database"],
)
@pytest.mark.parametrize("command", [["jobs", "list"], ["worker"], ["scheduler"]])
def test_permanent_errors_end_at_once(
    live_pg: str, tmp_path: Path, change: dict[str, str], needle: str, command: list[str]
) -> None:
    # a long-running role waits up to 600 s for a database that refuses; not for these
    url = with_part(live_pg, **change)
    result = duetime(*command, "--db", url, cwd=tmp_path, env={"DUETIME_STARTUP_WAIT": "600"})
    one_error_line(result, "cannot connect to", needle)


def test_malformed_url_ends_at_once(tmp_path: Path) -> None:
    url = "postgresql://postgres@127.0.0.1:notaport/postgres"
    result = duetime("worker", "--db", url, cwd=tmp_path, env={"DUETIME_STARTUP_WAIT": "600"})
    one_error_line(result, "cannot connect to", "notaport")


def test_refused_port_fails_a_read_command_with_one_line(tmp_path: Path) -> None:
    url = refused_url()
    result = duetime("jobs", "list", "--db", url, cwd=tmp_path)
    line = one_error_line(result, "cannot connect to", "refused", "postgres:***@127.0.0.1")
    assert "s3cret" not in result.stderr + result.stdout, line


def test_long_running_role_gives_up_after_startup_wait(tmp_path: Path) -> None:
    result = duetime(
        "worker", "--db", refused_url(), cwd=tmp_path, env={"DUETIME_STARTUP_WAIT": "1"}
    )
    assert result.returncode == 2, result.stderr
    assert "retrying until" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: cannot connect to")
    assert "s3cret" not in result.stderr
    assert "Traceback" not in result.stderr


# --- the first signal stops a process still connecting ----------------------------------------


def _read_until(proc: subprocess.Popen[str], needle: str, deadline: float) -> str:
    """stderr of ``proc`` up to the first line containing ``needle`` (fails at ``deadline``)."""
    assert proc.stderr is not None
    seen = ""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while needle not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {needle!r} in time: {seen}"
            if sel.select(timeout=left):
                # the raw descriptor: a buffered readline could hold lines select cannot see
                chunk = os.read(proc.stderr.fileno(), 65536)
                assert chunk, f"process ended before {needle!r}: {seen}"
                seen += chunk.decode()
    return seen


def _start(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    assert EXECUTABLE is not None
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DUETIME_DATABASE_URL", "DUETIME_TENANT", "FORCE_COLOR")
    }
    environ.update(env)
    return subprocess.Popen(
        [EXECUTABLE, *args],
        cwd=tmp_path,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    "command",
    [["worker"], ["scheduler"], ["up", "--port", "0", "--log-level", "warning"]],
    ids=["worker", "scheduler", "up"],
)
def test_first_sigint_stops_a_process_still_connecting(tmp_path: Path, command: list[str]) -> None:
    proc = _start(tmp_path, *command, "--db", refused_url(), env={"DUETIME_STARTUP_WAIT": "600"})
    try:
        seen = _read_until(proc, "attempt 2, retrying until", time.monotonic() + GUARD)
        assert "cannot connect to postgresql://postgres:***@" in seen
        proc.send_signal(signal.SIGINT)  # once
        _, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert "stopped (SIGINT) before the database was reachable" in err
    assert "Traceback" not in err
    assert "s3cret" not in seen + err


TASKS = """
import time
from duetime import App

app = App({db!r})

@app.task("slow")
def slow(ctx, payload):
    time.sleep(60)
"""


def test_sigint_says_what_the_worker_waits_for(tmp_path: Path) -> None:
    db = str(tmp_path / "w.db")
    (tmp_path / "slowtasks.py").write_text(TASKS.format(db=db))
    env = {"DUETIME_DATABASE_URL": db, "DUETIME_SHUTDOWN_GRACE": "30"}
    added = duetime(
        "jobs",
        "add",
        "s",
        "--task",
        "slow",
        "--every",
        "1h",
        "--allow-unregistered",
        cwd=tmp_path,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    triggered = duetime("jobs", "trigger", "s", cwd=tmp_path, env=env)
    assert triggered.returncode == 0, triggered.stderr
    proc = _start(tmp_path, "worker", "--app", "slowtasks:app", env=env)
    try:
        deadline = time.monotonic() + GUARD
        while True:  # until the run is running
            listed = duetime("runs", "list", "--state", "running", "--json", cwd=tmp_path, env=env)
            if listed.returncode == 0 and json.loads(listed.stdout)["items"]:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        seen = _read_until(proc, "^C again to abort", time.monotonic() + GUARD)
        assert "waiting up to 30 s for 1 running run;" in seen
        proc.send_signal(signal.SIGINT)  # the second one exits at once
        proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0


# --- SQLite paths -----------------------------------------------------------------------------


def test_read_command_on_a_missing_directory_is_one_line_and_creates_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nonexistent" / "dir" / "x.db"
    for command in (["jobs", "list"], ["runs", "list"]):
        one_error_line(duetime(*command, "--db", str(path), cwd=tmp_path), "no such directory")
    assert not (tmp_path / "nonexistent").exists()


def test_read_command_on_a_missing_file_reads_empty_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    result = duetime("jobs", "list", "--db", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not path.exists()


def test_directory_path_is_one_line(tmp_path: Path) -> None:
    for command in (["jobs", "list"], ["jobs", "add", "j", "--task", "duetime.noop", "--now"]):
        one_error_line(duetime(*command, "--db", str(tmp_path), cwd=tmp_path), "is a directory")


def test_non_database_file_is_one_line_and_does_not_hang(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are not the pages of a SQLite database\n" * 100)
    for command in (["jobs", "list"], ["jobs", "add", "j", "--task", "duetime.noop", "--now"]):
        one_error_line(duetime(*command, "--db", str(path), cwd=tmp_path), "not a SQLite database")
    assert path.read_text().startswith("these are not")


# --- worker --app uses the app's database -----------------------------------------------------

PLAIN_TASKS = """
from duetime import App

app = App({db!r})

@app.task("hello")
def hello(ctx, payload):
    return None
"""


def _serve_briefly(tmp_path: Path, *args: str) -> str:
    """Start a worker, wait until it serves, stop it; its stderr."""
    proc = _start(tmp_path, "worker", *args, env={})
    try:
        seen = _read_until(proc, "serving", time.monotonic() + GUARD)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return seen + err


@pytest.mark.parametrize("same_db", [False, True], ids=["no-db", "same-db"])
def test_worker_serves_the_database_of_its_app(tmp_path: Path, same_db: bool) -> None:
    db = tmp_path / "data" / "app.db"
    (tmp_path / "mytasks.py").write_text(PLAIN_TASKS.format(db=str(db)))
    extra = ["--db", f"sqlite:///{db}"] if same_db else []
    _serve_briefly(tmp_path, "--app", "mytasks:app", *extra)
    assert db.exists()
    assert not (tmp_path / "duetime.db").exists()


def test_worker_refuses_a_db_other_than_its_apps(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    (tmp_path / "mytasks.py").write_text(PLAIN_TASKS.format(db=str(db)))
    other = tmp_path / "other.db"
    refused = duetime("worker", "--app", "mytasks:app", "--db", str(other), cwd=tmp_path)
    one_error_line(refused, "not the database of --app mytasks:app", str(db))
    assert not other.exists()
