"""A real PgBouncer for tests (import as ``from tests.pgbouncer_kit import PgBouncer``).

:class:`PgBouncer` runs Debian's ``pgbouncer`` (1.18+) on a free loopback port with its own
configuration in a temporary directory: ``pool_mode = transaction``, ``auth_type = trust``
(the one user of the server URL in its auth file), in front of the PostgreSQL of
``DUETIME_TEST_PG_URL``. Each :meth:`PgBouncer.alias` is a PgBouncer database standing for one
PostgreSQL database and schema: PgBouncer does not forward the ``options`` startup parameter,
so the schema is set on each server connection it opens (``connect_query``), which is how a
deployment fixes duetime's schema too (``ALTER ROLE … SET search_path``; docs/howto/pgbouncer.md).

Running as root (CI), PgBouncer is started as the ``postgres`` system user (it refuses root).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

BINARY = "/usr/sbin/pgbouncer"


def pgbouncer_binary() -> str | None:
    """The pgbouncer executable, or None when it is not installed."""
    return shutil.which("pgbouncer") or (BINARY if os.access(BINARY, os.X_OK) else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgBouncer:
    """One PgBouncer process in transaction pooling mode; :meth:`stop` ends it.

    ``server_url`` names the PostgreSQL server behind it (its host, port and user are used).
    ``pool_size`` bounds the server connections of each alias (``default_pool_size``)."""

    def __init__(self, server_url: str, *, pool_size: int = 20) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install -y pgbouncer)")
        parts = urlsplit(server_url)
        self._server = parts
        self.user = parts.username or "postgres"
        self.port = _free_port()
        self.pool_size = pool_size
        self.dir = Path(tempfile.mkdtemp(prefix="duetime-pgbouncer-"))
        self._aliases: dict[str, str] = {}
        run_as = _unprivileged_user()
        if run_as is not None:
            os.chown(self.dir, run_as.pw_uid, run_as.pw_gid)
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        self._write_config()
        command = [binary, str(self.dir / "pgbouncer.ini")]
        if run_as is not None:
            command[1:1] = ["-u", run_as.pw_name]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        self._wait_ready()

    # --- URLs -------------------------------------------------------------------------------

    def url(self, alias: str) -> str:
        """A client URL of ``alias`` through this PgBouncer."""
        netloc = f"{self.user}@127.0.0.1:{self.port}"
        return urlunsplit(("postgresql", netloc, "/" + alias, "", ""))

    def alias(self, name: str, *, dbname: str, schema: str | None = None) -> str:
        """Add (or replace) the database ``name``: PostgreSQL's ``dbname``, server connections
        in ``schema`` when given; reloads the configuration if that changed it; its client
        URL."""
        if self._process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited ({self._process.returncode}): {self.log()}")
        entry = f"host={self._server.hostname or '127.0.0.1'} port={self._server.port or 5432}"
        entry += f" dbname={dbname}"
        if schema is not None:
            entry += f" connect_query='SET search_path = {schema}'"
        if self._aliases.get(name) == entry:
            return self.url(name)
        self._aliases[name] = entry
        self._write_config()
        with psycopg.connect(self.url("pgbouncer"), autocommit=True) as admin:
            admin.execute("RELOAD")
        return self.url(name)

    # --- the process ------------------------------------------------------------------------

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self) -> str:
        """PgBouncer's log so far (for a failing test's message)."""
        path = self.dir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _write_config(self) -> None:
        databases = "\n".join(f"{name} = {entry}" for name, entry in self._aliases.items())
        config = f"""\
[databases]
{databases}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / "users.txt"}
admin_users = {self.user}
pool_mode = transaction
default_pool_size = {self.pool_size}
max_client_conn = 1000
server_reset_query =
logfile = {self.dir / "pgbouncer.log"}
pidfile = {self.dir / "pgbouncer.pid"}
"""
        path = self.dir / "pgbouncer.ini"
        path.write_text(config)
        path.chmod(0o644)
        (self.dir / "users.txt").chmod(0o644)

    def _wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited ({self._process.returncode}): {self.log()}")
            try:
                with psycopg.connect(self.url("pgbouncer"), autocommit=True, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"pgbouncer did not answer in {timeout} s") from None
                time.sleep(0.05)  # a process starting up: nothing to wait on but time


def _unprivileged_user() -> pwd.struct_passwd | None:
    """The system user to run PgBouncer as when this process is root (it refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and no postgres/nobody user to run pgbouncer as")
