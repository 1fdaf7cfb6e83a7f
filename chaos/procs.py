"""The cluster's processes: ``python -m duetime scheduler|worker`` started as real subprocesses,
each in its own session (process group) so a kill takes the whole group and nothing outlives
the test. Every incarnation is remembered: role, pid, start, kill or exit, log file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Proc:
    role: str
    slot: int
    popen: subprocess.Popen[bytes]
    log_path: Path
    started: float
    killed_at: float | None = None
    """When we SIGKILLed it (``time.time()``)."""
    exited_at: float | None = None
    exit_code: int | None = None
    crashed: bool = False
    """It exited by itself while the chaos was running (not killed, not asked to stop)."""
    stopped: bool = False
    """It was asked to stop gracefully (SIGTERM) at the end."""

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def name(self) -> str:
        return f"{self.role}-{self.slot} (pid {self.pid})"

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 2500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def spawn_logged(
    command: list[str],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``command`` started in a session (process group) of its own, stdout and stderr to
    ``log_path`` (truncated first), no stdin."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM ``process`` and wait up to ``timeout`` seconds for it; then SIGKILL its process
    group (see :func:`spawn_logged`) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@dataclass
class Fleet:
    """Schedulers and workers in numbered slots; a slot's process can be killed and restarted."""

    workdir: Path
    env: dict[str, str]
    app_module: str
    current: dict[tuple[str, int], Proc] = field(default_factory=dict)
    history: list[Proc] = field(default_factory=list)

    def start(self, role: str, slot: int) -> Proc:
        command = [sys.executable, "-m", "duetime", role, "--log-level", "info"]
        if role == "worker":
            command += ["--app", self.app_module]
        generation = sum(1 for p in self.history if (p.role, p.slot) == (role, slot))
        log_path = self.workdir / f"{role}-{slot}.{generation}.log"
        popen = spawn_logged(command, log_path, env=self.env, cwd=self.workdir)
        named = log_path.with_name(f"{role}-{slot}.{generation}.pid{popen.pid}.log")
        log_path.rename(named)  # the child keeps writing to the same file
        proc = Proc(role, slot, popen, named, started=time.time())
        self.current[(role, slot)] = proc
        self.history.append(proc)
        return proc

    def live(self) -> list[Proc]:
        return [p for p in self.current.values() if p.alive()]

    def kill(self, proc: Proc) -> float:
        """SIGKILL the process (its whole group) and wait for it; returns the kill instant."""
        proc.killed_at = time.time()
        _signal_group(proc.pid, signal.SIGKILL)
        proc.exit_code = proc.popen.wait(timeout=30)
        proc.exited_at = time.time()
        return proc.killed_at

    def restart(self, proc: Proc) -> Proc:
        return self.start(proc.role, proc.slot)

    def find_crashed(self) -> list[Proc]:
        """Processes that exited by themselves (neither killed nor stopped by us)."""
        crashed = []
        for proc in self.current.values():
            if proc.killed_at is None and not proc.stopped and not proc.crashed:
                code = proc.popen.poll()
                if code is not None:
                    proc.crashed = True
                    proc.exit_code = code
                    proc.exited_at = time.time()
                    crashed.append(proc)
        return crashed

    def stop_all(self, timeout: float) -> list[Proc]:
        """SIGTERM every live process (graceful shutdown), wait up to ``timeout`` seconds, then
        SIGKILL what is left. Returns the processes that had to be killed."""
        live = self.live()
        for proc in live:
            proc.stopped = True
            _signal_group(proc.pid, signal.SIGCONT)
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        forced = []
        for proc in live:
            try:
                proc.exit_code = proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.exit_code = proc.popen.wait(timeout=30)
                forced.append(proc)
            proc.exited_at = time.time()
        return forced

    def kill_everything(self) -> None:
        """Last resort on every exit path: no process (or process group) of ours survives."""
        for proc in self.history:
            # only groups whose leader we have not reaped yet: that pid is still ours
            if proc.popen.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=10)

    def by_pid(self) -> dict[int, Proc]:
        """Incarnations by pid (the pid in worker and node ids ``host:pid:hex``)."""
        return {p.pid: p for p in self.history}
