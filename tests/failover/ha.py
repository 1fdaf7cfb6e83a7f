"""A real highly available PostgreSQL on this machine, for the failover test and bench
(``from tests.failover.ha import HaCluster``; the recipe it follows: deploy/patroni/README.md).

One etcd (Debian's ``etcd-server``) and two Patroni nodes (Debian's ``patroni``), each with its
own PostgreSQL 15 and data directory under one base directory, in synchronous mode with
``synchronous_mode_strict``: a commit returns only once the synchronous standby has it, so the
standby Patroni promotes never lacks a committed transaction. :class:`HaCluster` starts it all,
waits (bounded) until one node leads and the other is its synchronous standby, injects faults
(:meth:`HaCluster.kill_node`, :meth:`HaCluster.freeze_node`, :meth:`HaCluster.restart_node`)
and :meth:`HaCluster.stop` kills every process it started — call it on every exit path (it is
a context manager).

Running as root, Patroni and PostgreSQL run as the ``postgres`` system user (PostgreSQL refuses
root). The ports are fixed by the caller (``NodeSpec``); nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PATRONI = "/usr/bin/patroni"
ETCD = "/usr/bin/etcd"
PG_BIN = "/usr/lib/postgresql/15/bin"
SCOPE = "duetime-ha"
READY_TIMEOUT = 120.0
"""Seconds the cluster (or a node rejoining it) may take to be ready."""

DCS = {
    "ttl": 8,
    "loop_wait": 1,
    "retry_timeout": 3,
    "maximum_lag_on_failover": 1048576,
    "synchronous_mode": True,
    "synchronous_mode_strict": True,
    "postgresql": {
        "use_pg_rewind": True,
        "use_slots": True,
        "parameters": {
            "wal_level": "replica",
            "hot_standby": "on",
            "max_wal_senders": 5,
            "max_replication_slots": 5,
            "wal_log_hints": "on",
            "max_connections": 200,
        },
    },
}
"""Patroni's cluster-wide settings (written to etcd at bootstrap). ``ttl`` is the leader
lease: a primary that stops renewing it is replaced once it expires, so a failover costs about
``ttl`` seconds plus ``loop_wait``."""


def missing_tools() -> list[str]:
    """What of Patroni, etcd and PostgreSQL 15 is not installed here (empty: all is)."""
    wanted = [PATRONI, ETCD, f"{PG_BIN}/postgres", f"{PG_BIN}/initdb"]
    missing = [path for path in wanted if not os.access(path, os.X_OK)]
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            missing.append("the postgres system user")
    return missing


@dataclass(frozen=True)
class NodeSpec:
    """One Patroni node: its name, PostgreSQL port and REST API port."""

    name: str
    pg_port: int
    rest_port: int


@dataclass
class _Node:
    spec: NodeSpec
    dir: Path
    process: subprocess.Popen[bytes] | None = None
    frozen: list[int] = field(default_factory=list)
    """Process groups stopped by :meth:`HaCluster.freeze_node`, to continue at the end."""

    @property
    def config(self) -> Path:
        return self.dir / "patroni.yml"

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def log(self) -> Path:
        return self.dir / "patroni.log"

    def postgres_group(self) -> int | None:
        """The process group of the node's PostgreSQL (Patroni starts the postmaster in a
        session of its own: every PostgreSQL process is in it), or None when it is not
        running."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            if str(self.data).encode() not in command:  # a stale file, the pid reused
                return None
            return os.getpgid(pid)
        except (OSError, ValueError):
            return None


def _run_as() -> pwd.struct_passwd | None:
    return pwd.getpwnam("postgres") if os.geteuid() == 0 else None


def _get(url: str, timeout: float = 2.0) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of a Patroni REST call (0 and {} when it does not answer)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        return int(exc.code), body
    except (OSError, ValueError):
        return 0, {}


class HaCluster:
    """etcd plus one Patroni node per ``NodeSpec`` (two: a primary and its synchronous
    standby), under ``base`` (wiped first). :meth:`start` returns once a node leads and every
    other node is a synchronous standby streaming from it."""

    def __init__(
        self,
        base: Path,
        nodes: tuple[NodeSpec, ...],
        *,
        etcd_ports: tuple[int, int] = (23790, 23800),
    ) -> None:
        self.base = base
        self.etcd_client, self.etcd_peer = etcd_ports
        self.nodes = {spec.name: _Node(spec, base / spec.name) for spec in nodes}
        self._etcd: subprocess.Popen[bytes] | None = None

    # --- URLs -------------------------------------------------------------------------------

    def url(self, dbname: str = "postgres") -> str:
        """A multi-host URL that reaches whichever node is the primary now."""
        hosts = ",".join(f"127.0.0.1:{n.spec.pg_port}" for n in self.nodes.values())
        return f"postgresql://postgres@{hosts}/{dbname}?target_session_attrs=read-write"

    def node_url(self, name: str, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.nodes[name].spec.pg_port}/{dbname}"

    # --- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> HaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd and every node; wait until the cluster is ready (raises RuntimeError
        with the logs' tails after READY_TIMEOUT; the caller still calls :meth:`stop`)."""
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)
        owner = _run_as()
        if owner is not None:
            os.chown(self.base, owner.pw_uid, owner.pw_gid)
        self._start_etcd()
        for node in self.nodes.values():
            node.dir.mkdir(mode=0o700)
            if owner is not None:
                os.chown(node.dir, owner.pw_uid, owner.pw_gid)
            node.config.write_text(json.dumps(self._config(node), indent=2))
            self._start_node(node)
        self.wait_ready()

    def stop(self) -> None:
        """Kill every process started here (Patroni, PostgreSQL, etcd), frozen ones too."""
        for node in self.nodes.values():
            for group in node.frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGCONT)
            node.frozen.clear()
            self._kill_node_processes(node)
        if self._etcd is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._etcd.pid, signal.SIGKILL)
            self._etcd.wait(timeout=10)
            self._etcd = None

    # --- state ------------------------------------------------------------------------------

    def role(self, name: str) -> str | None:
        """``primary``, ``sync`` (a standby the primary's PostgreSQL streams to
        synchronously), ``replica`` or None (down or not answering), as Patroni tells.
        ``sync`` is read from the primary's replication state, not from Patroni's
        synchronous-standby key: after a thawed primary's race, Patroni 3.0 was seen to retry
        that key's update for minutes while PostgreSQL replicated synchronously all along."""
        port = self.nodes[name].spec.rest_port
        status, body = _get(f"http://127.0.0.1:{port}/patroni")
        if status == 0:
            return None
        if body.get("role") in ("master", "primary") and body.get("state") == "running":
            status, _ = _get(f"http://127.0.0.1:{port}/primary")
            return "primary" if status == 200 else None
        if body.get("role") == "replica" and body.get("state") in ("running", "streaming"):
            return "sync" if name in self._synchronous_standbys() else "replica"
        return None

    def _synchronous_standbys(self) -> set[str]:
        """The nodes some primary's PostgreSQL streams to as synchronous standbys."""
        names: set[str] = set()
        for node in self.nodes.values():
            _, body = _get(f"http://127.0.0.1:{node.spec.rest_port}/patroni")
            if body.get("role") not in ("master", "primary"):
                continue
            for peer in body.get("replication") or []:
                if peer.get("state") == "streaming" and peer.get("sync_state") == "sync":
                    names.add(str(peer.get("application_name")))
        return names

    def primary(self) -> str | None:
        """The node that is the primary now, if one is."""
        for name in self.nodes:
            if self.role(name) == "primary":
                return name
        return None

    def standby(self) -> str:
        """A node that is not the primary (the synchronous standby while all is well)."""
        leader = self.primary()
        return next(name for name in self.nodes if name != leader)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> str:
        """Wait until one node is the primary and every other one its synchronous standby;
        the primary's name."""
        deadline = time.monotonic() + timeout
        while True:
            roles = {name: self.role(name) for name in self.nodes}
            leaders = [name for name, role in roles.items() if role == "primary"]
            if len(leaders) == 1 and all(
                role == "sync" for name, role in roles.items() if name != leaders[0]
            ):
                return leaders[0]
            dead = [n for n in self.nodes.values() if n.process and n.process.poll() is not None]
            if dead or time.monotonic() > deadline:
                why = f"Patroni of {dead[0].spec.name} exited" if dead else f"after {timeout:.0f}s"
                raise RuntimeError(f"HA cluster not ready ({why}): {roles}\n{self.logs()}")
            time.sleep(0.5)

    def heal(self, patience: float = 30.0, timeout: float = READY_TIMEOUT) -> str:
        """Wait until the cluster is ready again; a node that is still not a streaming
        synchronous standby after ``patience`` seconds is reinitialised once (killed, data
        wiped, cloned afresh: ``patronictl reinit``). Patroni 3.0 can leave a thawed former
        primary on its old timeline, not streaming: in strict synchronous mode every commit
        then waits until an operator reinitialises it, which this does. The primary's name."""
        try:
            return self.wait_ready(patience)
        except RuntimeError:
            pass
        leader = self.primary()
        for name in self.nodes:
            if name != leader and self._stuck(name):
                self.restart_node(name, wipe=True)
        return self.wait_ready(timeout)

    def _stuck(self, name: str) -> bool:
        """The node's Patroni is gone, or its PostgreSQL runs as a replica that does not
        stream as the synchronous standby (a node still cloning or starting is not stuck)."""
        node = self.nodes[name]
        if node.process is None or node.process.poll() is not None:
            return True
        port = node.spec.rest_port
        status, body = _get(f"http://127.0.0.1:{port}/patroni")
        return status != 0 and body.get("state") == "running" and self.role(name) != "sync"

    def wait_primary(self, name: str, timeout: float = READY_TIMEOUT) -> float:
        """Wait until ``name`` is the primary; the ``time.time()`` it was first seen so."""
        deadline = time.monotonic() + timeout
        while self.role(name) != "primary":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not promoted after {timeout:.0f}s\n{self.logs()}")
            time.sleep(0.1)
        return time.time()

    def logs(self, chars: int = 3000) -> str:
        parts = []
        for node in self.nodes.values():
            try:
                text = node.log.read_text(errors="replace")[-chars:]
            except OSError:
                text = "(no log)"
            try:
                out = (node.dir / "patroni.out").read_text(errors="replace")[-chars:]
            except OSError:
                out = ""
            parts.append(f"--- {node.spec.name} patroni.log\n{text}\n{out}")
        return "\n".join(parts)

    # --- faults -----------------------------------------------------------------------------

    def kill_node(self, name: str) -> None:
        """SIGKILL the node's PostgreSQL (every process of it) and its Patroni, together."""
        node = self.nodes[name]
        group = node.postgres_group()
        if node.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
        if group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        if node.process is not None:
            node.process.wait(timeout=10)
            node.process = None

    def freeze_node(self, name: str) -> None:
        """SIGSTOP the node's PostgreSQL (every process of it) and its Patroni, together:
        a machine that stops answering without closing a connection."""
        node = self.nodes[name]
        groups = [g for g in (node.postgres_group(), node.process and node.process.pid) if g]
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGSTOP)
                node.frozen.append(group)

    def thaw_node(self, name: str) -> None:
        """SIGCONT what :meth:`freeze_node` stopped (Patroni then demotes a stale primary)."""
        node = self.nodes[name]
        for group in node.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGCONT)
        node.frozen.clear()

    def restart_node(self, name: str, *, wipe: bool = True) -> None:
        """Start a killed node's Patroni again; does not wait. With ``wipe`` its data
        directory is removed first and Patroni clones the primary afresh (``pg_basebackup``,
        what ``patronictl reinit`` does): seconds for a small database, where rejoining with
        the old data after a crash (``pg_rewind``) took Patroni 3.0 about a minute here. In
        strict synchronous mode the old data holds no commit the primary lacks."""
        node = self.nodes[name]
        self._kill_node_processes(node)
        if wipe:
            shutil.rmtree(node.data, ignore_errors=True)
        else:
            (node.data / "postmaster.pid").unlink(missing_ok=True)
        self._start_node(node)

    # --- inside -----------------------------------------------------------------------------

    def _config(self, node: _Node) -> dict[str, Any]:
        spec = node.spec
        return {
            "scope": SCOPE,
            "name": spec.name,
            "log": {"level": "INFO", "dir": str(node.dir), "file_num": 1},
            "restapi": {
                "listen": f"127.0.0.1:{spec.rest_port}",
                "connect_address": f"127.0.0.1:{spec.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_client}"]},
            "bootstrap": {
                "dcs": DCS,
                "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}, "data-checksums"],
                "pg_hba": [
                    "local all all trust",
                    "host replication postgres 127.0.0.1/32 trust",
                    "host all all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{spec.pg_port}",
                "connect_address": f"127.0.0.1:{spec.pg_port}",
                "data_dir": str(node.data),
                "bin_dir": PG_BIN,
                "pgpass": str(node.dir / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {"unix_socket_directories": str(node.dir)},
                # a standby cloned afresh starts at once, not after a spread checkpoint
                # (minutes under load, with every commit waiting in strict mode)
                "basebackup": [{"checkpoint": "fast"}],
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
            },
            "tags": {"nofailover": False, "noloadbalance": False},
        }

    def _start_etcd(self) -> None:
        data = self.base / "etcd"
        client = f"http://127.0.0.1:{self.etcd_client}"
        peer = f"http://127.0.0.1:{self.etcd_peer}"
        command = [
            ETCD,
            "--name=ha",
            f"--data-dir={data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=ha={peer}",
            "--initial-cluster-state=new",
        ]
        with open(self.base / "etcd.log", "wb") as log:
            self._etcd = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 30
        while _get(f"{client}/health")[0] != 200:
            if self._etcd.poll() is not None or time.monotonic() > deadline:
                tail = (self.base / "etcd.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"etcd did not start on {client}:\n{tail}")
            time.sleep(0.2)

    def _start_node(self, node: _Node) -> None:
        owner = _run_as()
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(node.dir),
            "PYTHONUNBUFFERED": "1",
        }
        with open(node.dir / "patroni.out", "ab") as out:
            node.process = subprocess.Popen(
                [PATRONI, str(node.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=node.dir,
                env=env,
                start_new_session=True,
                user=owner.pw_uid if owner else None,
                group=owner.pw_gid if owner else None,
                extra_groups=[] if owner else None,
            )

    def _kill_node_processes(self, node: _Node) -> None:
        group = node.postgres_group()
        if node.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=10)
            node.process = None
        if group is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)


@contextlib.contextmanager
def running(base: Path, nodes: tuple[NodeSpec, ...]) -> Iterator[HaCluster]:
    """A started :class:`HaCluster`, stopped on exit whatever happens."""
    cluster = HaCluster(base, nodes)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
