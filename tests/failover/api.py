"""A ``duetime server`` (the REST API) in the failover run (a chaos addon, chaos/harness.py,
driven by :class:`tests.failover.faults.Faults` around each fault).

:meth:`ApiProbe.prepare` creates the job ``api-probe`` (``chaos.tick``, a yearly cron: its
runs are triggered) and an operator API key; :meth:`ApiProbe.start` starts the server on a
free port, on the multi-host URL like every other process (its pooled connections wait at
most ``checkout_wait`` seconds). Around each fault, ``POST /api/v1/jobs/api-probe/trigger``
(each with an idempotency key of its own):

- :meth:`before` — once, before the fault: must be 201;
- :meth:`during` — every half second from the fault until the cluster is whole again: each
  answer must be 201 (served, perhaps after a wait) or a 503 problem (``unavailable``); a 500,
  another status, or no answer within ``REQUEST_TIMEOUT`` (a hang) fails the run;
- :meth:`after` — from the moment the cluster is whole, until the first 201 (bounded by
  ``AFTER_TIMEOUT``): the server reconnects to the new primary without a restart.

:meth:`check` adds these as invariants to the chaos verdict; the server's log must hold no
traceback. :meth:`stop` is idempotent (the harness calls it on every exit path).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from chaos.checks import INFO, Verdict
from chaos.procs import spawn_logged, terminate

from duetime import AsyncApp

JOB = "api-probe"
REQUEST_TIMEOUT = 120.0
"""Seconds an answer may take before it counts as a hang (a commit may wait for the
synchronous standby: in strict mode, until the cluster is whole)."""
AFTER_TIMEOUT = 60.0
"""Seconds after the cluster is whole within which a trigger must be served again."""
_URL = re.compile(rb"listening on (http://127\.0\.0\.1:\d+)")


@dataclass(frozen=True)
class Answer:
    phase: str
    """``before``, ``during`` or ``after``, with the fault's number: ``during 2``."""
    sent: float
    seconds: float
    status: int
    """The HTTP status; 0: no answer (a timeout or a refused connection: see ``error``)."""
    kind: str = ""
    """The problem's ``type`` (its last part), or the client error's class."""


@dataclass
class ApiProbe:
    """The addon (see the module's docstring)."""

    workdir: Path
    checkout_wait: float = 5.0
    say: Any = print
    base: str | None = None
    key: str | None = None
    answers: list[Answer] = field(default_factory=list)
    served_after: list[float | None] = field(default_factory=list)
    """Per fault: seconds from the cluster being whole until a trigger was served."""
    process: subprocess.Popen[bytes] | None = None
    _sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def prepare(self, url: str) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)

        async def go() -> str:
            async with AsyncApp(url, migrate=True) as app:
                await app.schedule(
                    JOB, task="chaos.tick", cron="0 0 1 1 *", allow_unregistered=True
                )
                return (await app.create_key("operator", name="failover api probe"))[1]

        self.key = asyncio.run(go())

    def start(self, url: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
        env.update(
            DUETIME_DATABASE_URL=url,
            DUETIME_DATABASE_CHECKOUT_WAIT=str(self.checkout_wait),
            DUETIME_API_RATE_LIMIT="0",
            PYTHONUNBUFFERED="1",
        )
        self.process = spawn_logged(
            [sys.executable, "-m", "duetime", "server", "--port", "0"], self.log_path, env=env
        )
        deadline = time.monotonic() + 60
        while self.base is None:
            found = _URL.search(self.log_path.read_bytes())
            if found:
                self.base = found.group(1).decode()
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"duetime server did not start:\n{self.log_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            terminate(process, timeout=20)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    # --- requests ----------------------------------------------------------------------------

    def trigger(self, phase: str) -> Answer:
        """One ``POST …/trigger`` (a key of its own), recorded."""
        with self._lock:
            self._sent += 1
            number = self._sent
        request = urllib.request.Request(
            f"{self.base}/api/v1/jobs/{JOB}/trigger",
            data=b"{}",
            method="POST",
            headers={
                "Authorization": f"Bearer {self.key}",
                "Content-Type": "application/json",
                "Idempotency-Key": f"api-{number}",
            },
        )
        sent = time.time()
        status, kind = 0, ""
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            status = int(exc.code)
            with contextlib.suppress(ValueError, OSError):
                kind = str(json.loads(exc.read() or b"{}").get("type", "")).rsplit(":", 1)[-1]
        except (OSError, ValueError) as exc:
            kind = type(exc).__name__
        answer = Answer(phase, sent, time.time() - sent, status, kind)
        with self._lock:
            self.answers.append(answer)
        return answer

    def before(self, fault: int) -> None:
        self.trigger(f"before {fault}")

    @contextlib.contextmanager
    def during(self, fault: int) -> Any:
        """Trigger every half second (one at a time) while the block runs."""
        done = threading.Event()

        def loop() -> None:
            while not done.is_set():
                self.trigger(f"during {fault}")
                done.wait(0.5)

        thread = threading.Thread(target=loop, daemon=True, name="failover-api-during")
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=REQUEST_TIMEOUT + 5)

    def after(self, fault: int, whole: float) -> None:
        """Trigger until one is served (201), from ``whole`` on, for at most AFTER_TIMEOUT."""
        while time.time() - whole < AFTER_TIMEOUT:
            if self.trigger(f"after {fault}").status == 201:
                self.served_after.append(time.time() - whole)
                return
            time.sleep(0.25)
        self.served_after.append(None)

    # --- the verdict -------------------------------------------------------------------------

    def check(self, conn: psycopg.Connection[Any], verdict: Verdict) -> None:
        def of(phase: str) -> list[Answer]:
            return [a for a in self.answers if a.phase.split()[0] == phase]

        before, during = of("before"), of("during")
        bad_before = [a for a in before if a.status != 201]
        odd = [
            a
            for a in during
            if not (a.status == 201 or (a.status == 503 and a.kind == "unavailable"))
        ]
        unserved = sum(1 for s in self.served_after if s is None)
        counts = Counter(f"{a.status or a.kind}" for a in during)
        verdict.must_be_zero("API: triggers before each fault not served (201)", len(bad_before))
        verdict.must_be_zero(
            "API: answers during a fault other than 201 or a 503 problem (500s, hangs)", len(odd)
        )
        verdict.must_be_zero(
            "API: faults after which no trigger was served within "
            f"{AFTER_TIMEOUT:.0f} s of the cluster being whole",
            unserved,
        )
        traceback = "Traceback" in self.log_text()
        verdict.must_be_zero("API: tracebacks in the server's log", int(traceback))
        slowest = max((a.seconds for a in during), default=0.0)
        verdict.add(
            "API: answers during the faults",
            ", ".join(f"{k} × {n}" for k, n in sorted(counts.items()))
            + f"; slowest {slowest:.1f} s",
            kind=INFO,
        )
        served = [f"{s:.1f} s" if s is not None else "never" for s in self.served_after]
        verdict.add("API: served again after the cluster was whole", ", ".join(served), kind=INFO)
        for a in (bad_before + odd)[:10]:
            verdict.details.append(
                f"API {a.phase}: status {a.status} {a.kind} after {a.seconds:.1f} s"
            )
