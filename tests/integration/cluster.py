"""Real duetime processes for end-to-end tests: schedulers and workers started with the CLI,
sharing one database, each logging to its own file under the test's tmp_path."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

FAST_SETTINGS = {
    "DUETIME_LEASE_TTL": "2",
    "DUETIME_HEARTBEAT_INTERVAL": "0.5",
    "DUETIME_REAPER_INTERVAL": "0.3",
    "DUETIME_SCHEDULER_TICK": "0.5",
    "DUETIME_WORKER_POLL_INTERVAL": "0.2",
    "DUETIME_SHUTDOWN_GRACE": "5",
}


@dataclass
class Cluster:
    url: str
    workdir: Path
    app_module: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(FAST_SETTINGS)
        env.update(self.env)
        env["DUETIME_DATABASE_URL"] = self.url
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.workdir), *filter(None, [env.get("PYTHONPATH")])]
        )
        return env

    def start(self, role: str, *args: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "duetime", role, "--log-level", "info", *args]
        if role == "worker" and self.app_module:
            command += ["--app", self.app_module]
        log = open(self.workdir / f"{role}-{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            command, env=self._env(), cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.workdir.glob("*.log"))
        )
