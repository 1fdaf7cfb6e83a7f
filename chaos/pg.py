"""PostgreSQL for the chaos test: a fresh database per run, and restarts of the server.

The server is restarted with ``pg_ctlcluster`` (the Debian/Ubuntu wrapper; needs root or the
``postgres`` user) for the cluster listening on the base URL's port, or with a command given on
the command line (``{mode}`` in it becomes ``fast`` or ``immediate``). Every restart waits until
the server accepts connections again, and :func:`ensure_running` is called on every exit path,
so a failing run never leaves PostgreSQL down.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

DEFAULT_BASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
RESTART_TIMEOUT = 90.0
"""Seconds a restart command (and the wait for connections after it) may take."""


def base_url_from_env() -> str:
    return os.environ.get("DUETIME_TEST_PG_URL") or DEFAULT_BASE_URL


def _with_dbname(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))


def create_database(base_url: str) -> str:
    """Create a fresh, empty database next to ``base_url``; return its URL."""
    name = f"duetime_chaos_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(base_url, connect_timeout=5, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return _with_dbname(base_url, name)


def drop_database(url: str, base_url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(base_url, connect_timeout=5, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def accepts_connections(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def wait_until_up(url: str, timeout: float) -> bool:
    """Poll until the server answers a query; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if accepts_connections(url):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def server_version(url: str) -> str:
    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


@dataclass(frozen=True)
class Restarter:
    """How to restart the server behind ``base_url``: an argv template (``{mode}`` replaced)."""

    argv: tuple[str, ...]
    shell: bool = False

    def describe(self) -> str:
        return self.argv[0] if self.shell else " ".join(self.argv)

    def _command(self, mode: str) -> list[str] | str:
        if self.shell:
            return self.argv[0].replace("{mode}", mode)
        return [part.replace("{mode}", mode) for part in self.argv]

    def restart(self, base_url: str, mode: str) -> tuple[float, float]:
        """Restart in ``mode`` (``fast`` or ``immediate``) and wait until the server accepts
        connections. Returns (began, up) as ``time.time()`` instants. Raises RuntimeError if the
        command fails or the server does not come back within RESTART_TIMEOUT."""
        began = time.time()
        done = subprocess.run(
            self._command(mode),
            shell=self.shell,
            capture_output=True,
            text=True,
            timeout=RESTART_TIMEOUT,
            check=False,
        )
        if not wait_until_up(base_url, RESTART_TIMEOUT):
            raise RuntimeError(
                f"PostgreSQL did not accept connections within {RESTART_TIMEOUT:.0f}s after "
                f"{self.describe()} (exit {done.returncode}): {done.stderr.strip()[-500:]}"
            )
        return began, time.time()

    def ensure_running(self, base_url: str) -> bool:
        """If the server does not answer, (re)start it and wait. True when it answers."""
        if accepts_connections(base_url):
            return True
        for _ in range(2):
            try:
                self.restart(base_url, "fast")
                return True
            except (RuntimeError, OSError, subprocess.SubprocessError):
                time.sleep(1)
        return accepts_connections(base_url)


def _cluster_for_port(port: int) -> tuple[str, str] | None:
    """(version, name) of the local cluster listening on ``port``, from ``pg_lsclusters``."""
    if shutil.which("pg_lsclusters") is None:
        return None
    try:
        out = subprocess.run(
            ["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == str(port):
            return fields[0], fields[1]
    return None


def find_restarter(base_url: str, command: str | None = None) -> Restarter | None:
    """The restart command given (a shell command, ``{mode}`` replaced), else ``pg_ctlcluster``
    for the local cluster on the base URL's port when we may run it; None if neither."""
    if command:
        return Restarter((command,), shell=True)
    parts = urlsplit(base_url)
    host = parts.hostname or "127.0.0.1"
    if host not in ("127.0.0.1", "localhost", "::1") or shutil.which("pg_ctlcluster") is None:
        return None
    if os.geteuid() != 0:
        return None
    cluster = _cluster_for_port(parts.port or 5432)
    if cluster is None:
        return None
    version, name = cluster
    return Restarter(
        (
            "pg_ctlcluster",
            "--skip-systemctl-redirect",
            version,
            name,
            "restart",
            "-m",
            "{mode}",
        )
    )
