"""A real PostgreSQL 15 primary and its streaming hot standby on this machine, for the read
replica tests (``from tests.replica.pair import StreamingPair``).

The primary is made with ``initdb`` (trust authentication on loopback, replication allowed),
the standby with ``pg_basebackup -R`` from it (``standby.signal`` and ``primary_conninfo``
written by pg_basebackup itself); both run under ``pg_ctl``. As root, PostgreSQL runs as the
``postgres`` system user. Every wait is bounded; :meth:`StreamingPair.stop` stops both servers
(``pg_ctl stop -m immediate``) and is safe to call on every exit path.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

PG_BIN = "/usr/lib/postgresql/15/bin"
READY_TIMEOUT = 60.0
"""Seconds a server may take to start, or the standby to catch up."""
PRIMARY_CONF = """
listen_addresses = '127.0.0.1'
unix_socket_directories = '{sockets}'
wal_level = replica
max_wal_senders = 4
hot_standby = on
max_connections = 60
shared_buffers = 32MB
fsync = off
full_page_writes = off
"""


def missing_tools() -> list[str]:
    """What this needs and the machine lacks (empty: nothing)."""
    wanted = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
    missing = [name for name in wanted if not os.access(f"{PG_BIN}/{name}", os.X_OK)]
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            missing.append("the postgres system user")
    return missing


def wait_until(check: Callable[[], bool], what: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll ``check`` every 50 ms until it is true; AssertionError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


class StreamingPair:
    """A primary on ``primary_port`` and its standby on ``standby_port``, under ``base``
    (wiped first)."""

    def __init__(self, base: Path, primary_port: int, standby_port: int) -> None:
        self.base = base
        self.ports = {"primary": primary_port, "standby": standby_port}
        self._started: list[str] = []

    def url(self, node: str, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[node]}/{dbname}"

    def data(self, node: str) -> Path:
        return self.base / node

    # --- life cycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Make and start the primary, copy it into the standby, start that; return once
        the standby streams from the primary (RuntimeError with the logs otherwise)."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)
        (self.base / "sockets").mkdir()
        self._own(self.base, self.base / "sockets")
        self._run("initdb", "-D", str(self.data("primary")), "-U", "postgres", "--auth=trust")
        with (self.data("primary") / "postgresql.conf").open("a") as conf:
            conf.write(PRIMARY_CONF.format(sockets=self.base / "sockets"))
        self._start("primary")
        self._run(
            "pg_basebackup",
            "-D",
            str(self.data("standby")),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.ports["primary"]),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
        )
        self._start("standby")
        wait_until(self._streaming, "the standby to stream from the primary")

    def stop(self) -> None:
        for node in reversed(self._started):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._run("pg_ctl", "-D", str(self.data(node)), "stop", "-m", "immediate", "-w")
        self._started.clear()

    # --- queries ----------------------------------------------------------------------------

    def query(self, node: str, sql: str, dbname: str = "postgres") -> Any:
        """The first column of the first row of ``sql`` on ``node`` (autocommit; None when
        it returns no rows)."""
        with psycopg.connect(self.url(node, dbname), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql)  # type: ignore[arg-type]
            row = None if cursor.description is None else cursor.fetchone()
        return None if row is None else row[0]

    def caught_up(self) -> bool:
        """Whether the standby has replayed everything the primary has written (up to the
        primary's insert position: committed but not yet flushed WAL counts too)."""
        target = self.query("primary", "SELECT pg_current_wal_insert_lsn()::text")
        return bool(self.query("standby", f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"))

    def wait_caught_up(self) -> None:
        wait_until(self.caught_up, "the standby to replay the primary's WAL")

    def pause_replay(self) -> None:
        self.query("standby", "SELECT pg_wal_replay_pause()")
        wait_until(
            lambda: self.query("standby", "SELECT pg_get_wal_replay_pause_state()") == "paused",
            "replay to pause",
        )

    def resume_replay(self) -> None:
        self.query("standby", "SELECT pg_wal_replay_resume()")

    # --- internals --------------------------------------------------------------------------

    def _streaming(self) -> bool:
        try:
            state = self.query("primary", "SELECT state FROM pg_stat_replication LIMIT 1")
            in_recovery = self.query("standby", "SELECT pg_is_in_recovery()")
        except psycopg.OperationalError:
            return False
        return state == "streaming" and in_recovery is True

    def _start(self, node: str) -> None:
        data = self.data(node)
        os.chmod(data, 0o700)
        self._own(data)
        log = self.base / f"{node}.log"
        port = self.ports[node]
        self._started.append(node)
        try:
            self._run(
                "pg_ctl", "-D", str(data), "-l", str(log), "-o", f"-p {port}", "-w",
                "-t", str(int(READY_TIMEOUT)), "start",
            )  # fmt: skip
        except subprocess.CalledProcessError as exc:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"PostgreSQL {node} on port {port} did not start:\n{tail}") from exc

    def _own(self, *paths: Path) -> None:
        if os.geteuid() != 0:
            return
        owner = pwd.getpwnam("postgres")
        for path in paths:
            for root, _, files in os.walk(path):
                os.chown(root, owner.pw_uid, owner.pw_gid)
                for name in files:
                    os.chown(os.path.join(root, name), owner.pw_uid, owner.pw_gid)

    def _run(self, tool: str, *args: str) -> None:
        """Run a PostgreSQL tool (as ``postgres`` when root), bounded in time."""
        command = [f"{PG_BIN}/{tool}", *args]
        user = "postgres" if os.geteuid() == 0 else None
        subprocess.run(
            command,
            check=True,
            capture_output=True,
            timeout=READY_TIMEOUT + 30,
            user=user,
            cwd="/tmp",
        )
