"""The failover run's trigger load and burn-down backlog (a chaos addon, chaos/harness.py):
triggers fired at a set rate through ``app.trigger`` by a process of their own, on top of the
chaos workload's every-second crons, and a backlog of runs queued before the workers start.

- :meth:`TriggerLoad.prepare` creates the load's jobs — ``load-tick-*`` (``chaos.tick``) and
  ``load-once-*`` (``chaos.exactly_once``, ``delivery=exactly_once``: their effects are the
  chaos checker's exactly-once effects), yearly crons that never fire during the run, overlap
  ``allow`` (under the default ``skip`` a job's manual runs wait for each other, and the 20 jobs
  drained the backlog one run per job at a time) — and
  queues ``backlog`` runs of them (idempotency keys ``backlog-<i>``): the burn-down. One run
  per job is triggered (``backlog-template-<j>``), the rest cloned from it in one statement
  per job, as bench/burndown.py does (a trigger at a time took minutes for 10,000 here).
- :meth:`TriggerLoad.start` starts the trigger process (``python -m tests.failover.load``):
  trigger ``i`` is due at ``i / rate`` seconds, has the idempotency key ``load-<i>`` and is
  retried with that key until acknowledged (a failover makes calls fail, and one cut off
  mid-way may have written its run: the key makes the retry safe). At most ``--in-flight``
  calls at once; when they are all waiting the process falls behind its schedule, and says so.
  It logs one line per acknowledged trigger — ``i sent acked tries`` (``time.time()``; ``sent``
  the first try) — to a file.
- :meth:`TriggerLoad.stop` (at the end of the chaos) stops it: no new trigger; calls in flight
  get a few seconds.
- :meth:`TriggerLoad.check` reads the database: every acknowledged trigger has its run (an
  acknowledged one missing is *lost*: the invariant a failover must keep; strict synchronous
  replication keeps it), every backlog run exists, and none of them is unfinished (the
  chaos checker counts unfinished runs of every kind too). The rates and lags are figures.

Stop idempotently: the harness calls :meth:`stop` again on every exit path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import psycopg
from chaos.checks import INFO, Verdict
from chaos.procs import spawn_logged, terminate

from duetime import AsyncApp
from duetime._config import Settings

LOAD_KEY = "load-"
BACKLOG_KEY = "backlog-"
JOB_CRON = "0 0 1 1 *"
"""The load jobs' schedule: January 1st, never during a run; their runs are triggered."""
ROOT = Path(__file__).resolve().parents[2]


def job_names(jobs: int, exactly_once_every: int) -> list[str]:
    """The load's jobs: every ``exactly_once_every``-th an exactly-once one."""
    return [
        f"load-once-{i:03d}"
        if exactly_once_every and i % exactly_once_every == 0
        else f"load-tick-{i:03d}"
        for i in range(jobs)
    ]


@dataclass(frozen=True)
class Ack:
    index: int
    sent: float
    acked: float
    tries: int


def read_acks(path: Path) -> list[Ack]:
    """The acknowledged triggers the process logged (a torn last line is skipped)."""
    acks = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) == 4:
            with contextlib.suppress(ValueError):
                acks.append(Ack(int(parts[0]), float(parts[1]), float(parts[2]), int(parts[3])))
    return acks


@dataclass
class TriggerLoad:
    """The addon (see the module's docstring). ``rate`` 0: no trigger process."""

    rate: float
    backlog: int
    workdir: Path
    jobs: int = 20
    exactly_once_every: int = 10
    in_flight: int = 64
    say: Any = print
    process: subprocess.Popen[bytes] | None = None
    started_at: float | None = None
    stopped_at: float | None = None
    backlog_queued_in: float | None = None
    figures: dict[str, str] = field(default_factory=dict)

    @property
    def log_path(self) -> Path:
        return self.workdir / "triggers.log"

    @property
    def out_path(self) -> Path:
        return self.workdir / "triggers.out"

    def prepare(self, url: str) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        asyncio.run(self._prepare(url))
        self.backlog_queued_in = time.monotonic() - began
        if self.backlog:
            self.say(
                f"failover load: {self.backlog} backlog runs queued in "
                f"{self.backlog_queued_in:.1f}s"
            )

    async def _prepare(self, url: str) -> None:
        names = job_names(self.jobs, self.exactly_once_every)
        async with AsyncApp(url, migrate=True) as app:
            for name in names:
                once = name.startswith("load-once")
                await app.schedule(
                    name,
                    task="chaos.exactly_once" if once else "chaos.tick",
                    cron=JOB_CRON,
                    payload={"hold": 0} if once else None,
                    delivery="exactly_once" if once else "at_least_once",
                    overlap="allow",  # a job's triggers and backlog runs run side by side
                    tags=("load",),
                    allow_unregistered=True,
                )
            templates = [
                (await app.trigger(name, idempotency_key=f"{BACKLOG_KEY}template-{j}")).id
                for j, name in enumerate(names[: self.backlog])
            ]
        with psycopg.connect(url) as conn:
            columns = [
                str(r[0])
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'runs' AND table_schema = current_schema() "
                    "ORDER BY ordinal_position"
                ).fetchall()
            ]
            key = "%(prefix)s::text || (%(j)s::int + %(n)s::int * g)::text"
            made = {"id": "gen_random_uuid()", "idempotency_key": key}
            select = ", ".join(made.get(c, f"r.{c}") for c in columns)
            statement = (
                f"INSERT INTO runs ({', '.join(columns)}) SELECT {select} "
                "FROM runs r CROSS JOIN generate_series(0, %(count)s - 1) g WHERE r.id = %(id)s"
            )
            for j, template in enumerate(templates):
                count = len(range(j, self.backlog, len(names)))
                values = {"prefix": BACKLOG_KEY, "j": j, "n": len(names), "count": count}
                conn.execute(statement, {**values, "id": template})
            conn.execute("SELECT pg_notify('duetime_runs', '')")

    def start(self, url: str) -> None:
        if self.rate <= 0:
            return
        command = [
            sys.executable,
            "-m",
            "tests.failover.load",
            "--url",
            url,
            "--rate",
            str(self.rate),
            "--jobs",
            str(self.jobs),
            "--exactly-once-every",
            str(self.exactly_once_every),
            "--in-flight",
            str(self.in_flight),
            "--log",
            str(self.log_path),
        ]
        self.process = spawn_logged(command, self.out_path, cwd=ROOT)
        self.started_at = time.time()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        self.stopped_at = time.time()
        terminate(process, timeout=30)

    def check(self, conn: psycopg.Connection[Any], verdict: Verdict) -> None:
        acks = read_acks(self.log_path)
        made = {
            str(key): str(state)
            for key, state in conn.execute(
                "SELECT idempotency_key, state FROM runs "
                "WHERE idempotency_key LIKE 'load-%%' OR idempotency_key LIKE 'backlog-%%'"
            ).fetchall()
        }
        lost = [a.index for a in acks if f"{LOAD_KEY}{a.index}" not in made]
        backlog_missing = [i for i in range(self.backlog) if f"{BACKLOG_KEY}{i}" not in made]
        unfinished = sorted(k for k, state in made.items() if state in ("scheduled", "running"))
        acked = {f"{LOAD_KEY}{a.index}" for a in acks}
        unacked = sum(1 for k in made if k.startswith(LOAD_KEY) and k not in acked)
        verdict.add(
            "triggers acknowledged / made without an acknowledgement (cut off mid-way)",
            f"{len(acks)} / {unacked}",
            kind=INFO,
        )
        verdict.must_be_zero("acknowledged triggers without their run (lost)", len(lost))
        verdict.must_be_zero("backlog runs missing", len(backlog_missing))
        verdict.must_be_zero("trigger and backlog runs unfinished after the drain", len(unfinished))
        for index in lost[:10]:
            verdict.details.append(f"lost trigger: key {LOAD_KEY}{index} acknowledged, no run")
        for key in unfinished[:10]:
            verdict.details.append(f"unfinished: run with key {key} is {made[key]}")
        verdict.data["triggers_acked"] = len(acks)
        self.figures.update(self._figures(conn, acks))
        for name, value in self.figures.items():
            verdict.add(name, value, kind=INFO)

    def _figures(self, conn: psycopg.Connection[Any], acks: list[Ack]) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.backlog:
            row = conn.execute(
                "SELECT count(*), extract(epoch FROM max(finished_at) - min(claimed_at)) "
                "FROM runs WHERE idempotency_key LIKE 'backlog-%%' AND state = 'succeeded'"
            ).fetchone()
            if row and row[1]:
                out["burn-down"] = (
                    f"{self.backlog} runs queued at the start, done in {float(row[1]):.1f} s "
                    f"({int(row[0]) / float(row[1]):,.0f} runs/s beside the rest)"
                )
        if acks and self.started_at is not None:
            end = self.stopped_at or max(a.acked for a in acks)
            span = max(end - self.started_at, 1e-9)
            retried = sum(1 for a in acks if a.tries > 1)
            out["trigger rate acknowledged"] = (
                f"{len(acks) / span:,.0f}/s over {span:.0f} s (asked {self.rate:,.0f}/s); "
                f"{retried} needed more than one try"
            )
        return out

    def rate_before(self, instant: float, settle: float = 5.0) -> float | None:
        """Triggers acknowledged per second from ``settle`` s after the start until
        ``instant`` (the first fault): the rate sustained before any fault."""
        if self.started_at is None:
            return None
        begin = self.started_at + settle
        if instant <= begin:
            return None
        acks = read_acks(self.log_path)
        return sum(1 for a in acks if begin <= a.acked < instant) / (instant - begin)


# --- the trigger process ---------------------------------------------------------------------


async def fire(
    url: str, rate: float, names: list[str], in_flight: int, log: TextIO, stop: asyncio.Event
) -> tuple[int, float]:
    """Fire triggers until ``stop``, logging each acknowledged one to ``log``: (triggers
    acknowledged, most seconds behind schedule)."""
    settings = Settings(
        database_url=url,
        database_pool_size=max(4, min(in_flight, 20)),
        database_checkout_wait=5.0,
    )
    slots = asyncio.Semaphore(in_flight)
    acked = 0
    behind = 0.0
    pending: set[asyncio.Task[None]] = set()
    async with AsyncApp(settings=settings, migrate=False) as app:

        async def one(i: int) -> None:
            nonlocal acked
            sent = time.time()
            tries = 0
            try:
                while True:
                    tries += 1
                    try:
                        await app.trigger(names[i % len(names)], idempotency_key=f"{LOAD_KEY}{i}")
                        break
                    except Exception as exc:  # retried with its key until stopped
                        if not app.unreachable(exc):
                            print(f"trigger {i}: {type(exc).__name__}: {exc}", flush=True)
                        if stop.is_set():
                            return
                        await asyncio.sleep(0.2)
                log.write(f"{i} {sent:.4f} {time.time():.4f} {tries}\n")
                acked += 1
            finally:
                slots.release()

        t0 = time.monotonic()
        i = 0
        while not stop.is_set():
            due = int((time.monotonic() - t0) * rate) + 1
            while i < due and not stop.is_set():
                await slots.acquire()  # all in flight: this falls behind its schedule
                behind = max(behind, time.monotonic() - (t0 + i / rate))
                task = asyncio.create_task(one(i))
                pending.add(task)
                task.add_done_callback(pending.discard)
                i += 1
            log.flush()
            await asyncio.sleep(0.005)
        if pending:
            await asyncio.wait(pending, timeout=5)
        for task in pending:
            task.cancel()
        log.flush()
    return acked, behind


def main() -> None:
    parser = argparse.ArgumentParser(description="the failover run's trigger process")
    parser.add_argument("--url", required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--exactly-once-every", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    names = job_names(args.jobs, args.exactly_once_every)

    async def go(log: TextIO) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        acked, behind = await fire(args.url, args.rate, names, args.in_flight, log, stop)
        print(f"triggers acknowledged: {acked}; most behind schedule: {behind:.1f} s", flush=True)

    with open(args.log, "a", buffering=1 << 16) as log:
        asyncio.run(go(log))


if __name__ == "__main__":
    main()
