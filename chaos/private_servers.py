"""Private servers the broker chaos run starts, stops and starts again on their own ports and
data, so that killing them disturbs no one: a RabbitMQ node (with an epmd of its own) and a
PostgreSQL cluster. Redis and NATS need nothing more than their argv (chaos/brokers.py).

The RabbitMQ node reads no file of the system's node (``/etc/rabbitmq``): its configuration,
enabled-plugins file, Erlang cookie (``HOME``), Mnesia and log directories are under the run's
directory; it listens for AMQP on ``port`` and for Erlang distribution on ``dist_port``, and
registers with an epmd on ``epmd_port`` that this run starts in the foreground (so it is killed
with the run's other processes; the system's epmd on 4369 is left alone).

The PostgreSQL cluster is made by ``initdb`` in a directory of its own (run as the ``postgres``
user when we are root: the server refuses to run as root), listens on 127.0.0.1:``port`` with
its socket in that directory, and is stopped (``fast`` or ``immediate``) and started again by
``pg_ctl``; :meth:`PrivatePostgres.destroy` stops it and removes the directory."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from chaos import pg


class ServerSetupError(RuntimeError):
    """A private server could not be made or started (a binary missing, initdb failed)."""


# --- RabbitMQ ---------------------------------------------------------------------------------

RABBITMQ_NODE = "duetime-chaos@localhost"


def rabbitmq_server() -> str | None:
    """The ``rabbitmq-server`` script to run as ourselves: the package's own (its
    ``/usr/sbin`` wrapper switches to the ``rabbitmq`` user, which cannot write our
    directories), else whatever is on the PATH."""
    scripts = sorted(glob.glob("/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin/rabbitmq-server"))
    return scripts[-1] if scripts else shutil.which("rabbitmq-server")


def epmd_argv(port: int) -> list[str]:
    """An epmd on ``port`` (loopback) in the foreground; its path, from the PATH."""
    epmd = shutil.which("epmd")
    if epmd is None:
        raise ServerSetupError("epmd (Erlang) is not installed")
    return [epmd, "-port", str(port), "-address", "127.0.0.1"]


def rabbitmq_argv_env(
    workdir: Path, port: int, dist_port: int, epmd_port: int
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of the private node, its files made under ``workdir``
    (kept between starts: a restarted node recovers its durable queues from Mnesia)."""
    script = rabbitmq_server()
    if script is None:
        raise ServerSetupError("rabbitmq-server is not installed")
    home = workdir / "home"
    for sub in (home, workdir / "mnesia", workdir / "log"):
        sub.mkdir(parents=True, exist_ok=True)
    (workdir / "rabbitmq.conf").write_text(
        f"listeners.tcp.local = 127.0.0.1:{port}\nloopback_users.guest = true\n"
    )
    (workdir / "enabled_plugins").write_text("[].\n")
    (workdir / "rabbitmq-env.conf").write_text("")
    cookie = home / ".erlang.cookie"
    if not cookie.exists():
        cookie.write_text("DUETIMECHAOSCOOKIE")
        cookie.chmod(0o400)
    env = {
        **os.environ,
        "HOME": str(home),
        "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
        "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
        "RABBITMQ_NODENAME": RABBITMQ_NODE,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(workdir / "log"),
        "ERL_EPMD_PORT": str(epmd_port),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_FLAGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }
    return [script], env


# --- PostgreSQL -------------------------------------------------------------------------------


def _pg_bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``: ``pg_config --bindir``, else the newest
    ``/usr/lib/postgresql/*/bin``, else the PATH."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        if out and (Path(out) / "pg_ctl").exists():
            return Path(out)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version_key)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def _version_key(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


class PrivatePostgres:
    """A throw-away PostgreSQL cluster on 127.0.0.1:``port``."""

    def __init__(self, port: int) -> None:
        self.port = port
        bindir = _pg_bindir()
        if bindir is None or not (bindir / "initdb").exists():
            raise ServerSetupError("PostgreSQL's initdb and pg_ctl are not installed")
        self.bindir = bindir
        # not under the run's directory: the server's user must reach it (pytest's tmp_path
        # is private to its owner)
        self.dir = Path(tempfile.mkdtemp(prefix=f"duetime-chaos-pg{port}-"))
        self.dir.chmod(0o755)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.base_url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._as_postgres = os.geteuid() == 0

    def _run(self, argv: list[str], timeout: float = pg.RESTART_TIMEOUT) -> None:
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise ServerSetupError(
                f"{Path(argv[-1] if argv[0] == 'runuser' else argv[0]).name} failed "
                f"(exit {done.returncode}): {(done.stderr or done.stdout).strip()[-500:]}"
            )

    def create(self) -> None:
        """initdb (trust, user ``postgres``) and start; waits until it answers."""
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
             "--no-sync"]
        )  # fmt: skip
        self.start()

    def start(self) -> float:
        """Start the cluster and wait until it answers; the seconds that took."""
        began = time.monotonic()
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir}"
            " -c max_connections=200"
        )
        self._run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
             "-t", str(int(pg.RESTART_TIMEOUT)), "-o", options, "start"]
        )  # fmt: skip
        if not pg.wait_until_up(self.base_url, pg.RESTART_TIMEOUT):
            raise ServerSetupError(f"PostgreSQL on port {self.port} did not come up")
        return time.monotonic() - began

    def stop(self, mode: str) -> None:
        """``pg_ctl stop -m mode`` (``fast``: clients disconnected, a checkpoint;
        ``immediate``: no checkpoint, crash recovery at the next start)."""
        self._run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]
        )  # fmt: skip

    def destroy(self) -> None:
        """Stop it (immediately) if it runs, and remove its directory."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(ServerSetupError, OSError, subprocess.SubprocessError):
                self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
