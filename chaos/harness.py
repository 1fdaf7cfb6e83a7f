"""The chaos run, start to verdict.

1. Create a fresh database, migrate it, create the chaos tables and a few hundred jobs.
2. Start the schedulers and workers (``python -m duetime scheduler|worker``), poll the leader.
3. For ``duration`` seconds: every ``kill_every`` seconds (jittered ±50 %) SIGKILL a random
   process and start it again at once; restart PostgreSQL ``pg_restarts`` times, spread over the
   window; a process that exits by itself is recorded as a crash and started again.
4. Stop the chaos at instant S. Occurrences up to S − ``window_slack`` are the ones that count.
   Keep the cluster running, unharmed, until every one of them has a finished run or a recorded
   skip and every workflow instance one of them started has ended (at most
   ``drain_timeout``): materialization lag and late takeovers at the end are waited for, not
   counted as losses.
5. SIGTERM everything (graceful shutdown), write what the harness did into the database, and
   check (chaos/checks.py).

Every wait is bounded; on every exit path each process group is killed, PostgreSQL is left
running and the database is dropped (unless ``keep``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import platform
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

import duetime
from chaos import checks, pg, workload
from chaos.observe import LeaderWatch
from chaos.procs import Fleet, Proc

SETTINGS = {
    "DUETIME_LEASE_TTL": "3",
    "DUETIME_HEARTBEAT_INTERVAL": "1",
    "DUETIME_REAPER_INTERVAL": "0.5",
    "DUETIME_LEADER_TTL": "3",
    "DUETIME_SCHEDULER_TICK": "0.5",
    "DUETIME_WORKER_POLL_INTERVAL": "0.5",
    "DUETIME_WORKER_LOOKAHEAD": "1",
    "DUETIME_WORKER_CONCURRENCY": "20",
    "DUETIME_SHUTDOWN_GRACE": "5",
}
"""Short timings so that a few minutes hold many failures and recoveries."""


STARTUP_LIMIT = 30.0
"""Seconds after which a process that never registered may be killed anyway."""


class SetupError(RuntimeError):
    """The chaos test cannot run here (no PostgreSQL, no way to restart it)."""


@dataclass
class Options:
    duration: float = 180.0
    schedulers: int = 2
    workers: int = 3
    kill_every: float = 3.0
    pg_restarts: int = 1
    pg_restart_mode: str = "alternate"
    """``fast``, ``immediate`` (a crash: recovery on start) or ``alternate`` (fast first)."""
    pg_restart_cmd: str | None = None
    base_url: str = field(default_factory=pg.base_url_from_env)
    cron_jobs: int = 32
    one_shots: int = 300
    workflow_crons: int = 1
    """Jobs starting the chaos workflow (fan-out of 100, fan-in) every few seconds."""
    workflow_one_shots: int = 2
    seed: int | None = None
    settle: float = 2.0
    """A process may be killed once it, and every other process of its role, is registered in
    the database (ready) and at least this old."""
    window_slack: float = 1.0
    drain_timeout: float = 90.0
    timing_slack: float = 1.0
    strict_timing: bool = False
    keep: bool = False
    lock_timeout: float = 900.0
    """Seconds to wait while another chaos run uses the same PostgreSQL server."""
    workdir: Path | None = None
    verbose: bool = False
    command: str = ""
    restarter: Any = None
    """Used instead of a server restart when given: an object with ``restart(base_url, mode)``
    returning the (began, up) instants and ``ensure_running(base_url)`` — the failover test's
    faults of a Patroni cluster (tests/failover/)."""
    addons: tuple[Any, ...] = ()
    """More of the run, each an object with ``prepare(url)`` (the database is created, before
    the jobs are registered), ``start(url)`` (the processes run, the chaos begins), ``stop()``
    (the chaos is over, before the drain; also on every exit path, so it must be idempotent)
    and ``check(conn, verdict)`` (add its figures to the verdict): the failover bench's trigger
    load and REST API (tests/failover/)."""


@dataclass
class Outcome:
    verdict: checks.Verdict
    meta: dict[str, Any]
    workdir: Path | None
    logs: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict.ok


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _env(url: str, workdir: Path, code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env.update(SETTINGS)
    env["DUETIME_DATABASE_URL"] = url
    env["CHAOS_DATABASE_URL"] = url
    env["PYTHONUNBUFFERED"] = "1"
    paths = [str(code), str(workdir), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _snapshot(workdir: Path) -> Path:
    """Copy the duetime package this harness imported into ``workdir/code``: every process of
    the run, including those started minutes later, runs the same code even if the source tree
    is being edited meanwhile (a changed migration would otherwise stop new processes)."""
    code = workdir / "code"
    source = Path(duetime.__file__).resolve().parent
    shutil.copytree(source, code / "duetime", ignore=shutil.ignore_patterns("__pycache__"))
    return code


@contextlib.contextmanager
def _exclusive(base_url: str, timeout: float, say: Callable[[str], None]) -> Iterator[None]:
    """One chaos run per PostgreSQL server at a time (they restart it): a lock file per port
    on this host, waited for up to ``timeout`` seconds."""
    try:
        port = urlsplit(base_url).port or 5432
    except ValueError:  # a multi-host URL: the lock of its first host's port
        port = int(urlsplit(base_url).netloc.split(",")[0].rsplit(":", 1)[-1])
    path = Path(tempfile.gettempdir()) / f"duetime-chaos-{port}.lock"
    with open(path, "a+") as lock:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SetupError(
                        f"another chaos run holds {path} (PostgreSQL on port {port}); "
                        f"waited {timeout:.0f}s"
                    ) from None
                if not told:
                    say(f"chaos: waiting for another chaos run on port {port} ({path})")
                    told = True
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load() -> str:
    """The 1-minute load average (the host may be busy with other work)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def _timing(slack: float = 1.0) -> checks.Timing:
    s = {k.removeprefix("DUETIME_").lower(): float(v) for k, v in SETTINGS.items()}
    return checks.Timing(
        lease_ttl=s["lease_ttl"],
        reaper_interval=s["reaper_interval"],
        claim_poll=min(s["worker_poll_interval"], s["worker_lookahead"]),
        leader_ttl=s["leader_ttl"],
        slack=slack,
        worker_concurrency=int(s["worker_concurrency"]),
    )


class _Run:
    """The state of one chaos run (processes, events, the PostgreSQL restarts)."""

    def __init__(self, opts: Options, say: Callable[[str], None]) -> None:
        self.opts = opts
        self.say = say
        self.rng = random.Random(opts.seed)
        self.t0 = time.time()
        self.restarts: list[tuple[float, float, str]] = []
        self.restart_errors: list[str] = []
        self.fleet: Fleet | None = None

    def log(self, text: str) -> None:
        if self.opts.verbose:
            self.say(f"[{time.time() - self.t0:7.2f}s] {text}")

    # --- PostgreSQL restarts --------------------------------------------------------------

    def restart_pg(self, restarter: pg.Restarter, mode: str) -> None:
        self.log(f"restarting PostgreSQL ({mode})")
        try:
            began, up = restarter.restart(self.opts.base_url, mode)
        except Exception as exc:
            self.restart_errors.append(f"PostgreSQL restart ({mode}) failed: {exc}")
            return
        self.restarts.append((began, up, mode))
        self.log(f"PostgreSQL accepts connections again ({up - began:.1f}s)")

    # --- processes ------------------------------------------------------------------------

    def victim(self, now: float, watch: LeaderWatch) -> Proc | None:
        """A random process among those that may be killed now: it is ready (registered in the
        database) and so is every other process of its role — each role keeps its other
        members working, so a takeover always has somebody to take over. A process that is
        still not ready after STARTUP_LIMIT counts as ready (and its slow start shows)."""
        assert self.fleet is not None
        live = self.fleet.live()

        def ready(p: Proc) -> bool:
            seen = watch.ready.get(p.pid)
            up = (seen is not None and seen >= p.started) or now - p.started >= STARTUP_LIMIT
            return up and now - p.started >= self.opts.settle

        eligible = [p for p in live if all(ready(q) for q in live if q.role == p.role)]
        return self.rng.choice(eligible) if eligible else None

    def restart_crashed(self) -> None:
        assert self.fleet is not None
        for proc in self.fleet.find_crashed():
            self.log(f"{proc.name} exited by itself (code {proc.exit_code}); starting it again")
            self.fleet.restart(proc)

    def kill_one(self, watch: LeaderWatch) -> bool:
        """SIGKILL a random eligible process and start its successor; False if none was."""
        assert self.fleet is not None
        proc = self.victim(time.time(), watch)
        if proc is None:
            return False
        leader = watch.current()
        was_leader = leader is not None and leader.pid == proc.pid
        self.fleet.kill(proc)
        new = self.fleet.restart(proc)
        self.log(f"SIGKILL {proc.name}{' (leader)' if was_leader else ''}; started pid {new.pid}")
        return True


def _events(run: _Run, chaos: tuple[float, float], watch: LeaderWatch) -> list[tuple[Any, ...]]:
    assert run.fleet is not None
    rows: list[tuple[Any, ...]] = [(_utc(chaos[0]), _utc(chaos[1]), "chaos", None, None, None)]
    for p in run.fleet.history:
        rows.append((_utc(p.started), None, "start", p.role, p.pid, p.log_path.name))
        ready = watch.ready.get(p.pid)
        if ready is not None and ready >= p.started:
            rows.append((_utc(ready), None, "ready", p.role, p.pid, None))
        if p.killed_at is not None:
            rows.append((_utc(p.killed_at), None, "kill", p.role, p.pid, None))
        if p.crashed:
            detail = f"exit {p.exit_code}: {p.log_tail(300)}"
            rows.append((_utc(p.exited_at or p.started), None, "crash", p.role, p.pid, detail))
        if p.stopped:
            rows.append(
                (_utc(p.exited_at or time.time()), None, "stop", p.role, p.pid, str(p.exit_code))
            )
    for began, up, mode in run.restarts:
        rows.append((_utc(began), _utc(up), "pg_restart", None, None, mode))
    return rows


def _save(url: str, events: list[tuple[Any, ...]], watch: LeaderWatch) -> None:
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO chaos_events (at, until, kind, role, pid, detail) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            events,
        )
        cur.executemany(
            "INSERT INTO chaos_leader_terms (term, node_id, elected_at, expires_at) "
            "VALUES (%s, %s, %s, %s)",
            [(t.term, t.node_id, t.elected_at, t.expires_at) for t in watch.terms.values()],
        )


def run_chaos(opts: Options, say: Callable[[str], None] = print) -> Outcome:
    """Run the chaos test; raises SetupError when it cannot run here."""
    with _exclusive(opts.base_url, opts.lock_timeout, say):
        return _run_chaos(opts, say)


def _run_chaos(opts: Options, say: Callable[[str], None]) -> Outcome:
    if opts.schedulers < 1 or opts.workers < 1:
        raise SetupError("need at least one scheduler and one worker")
    if not pg.accepts_connections(opts.base_url):
        raise SetupError(f"PostgreSQL does not answer at {opts.base_url}")
    restarter = opts.restarter or pg.find_restarter(opts.base_url, opts.pg_restart_cmd)
    if opts.pg_restarts and restarter is None:
        raise SetupError(
            "cannot restart PostgreSQL here: run as root next to a pg_ctlcluster cluster on "
            "the URL's port, or pass --pg-restart-cmd (or --pg-restarts 0)"
        )
    run = _Run(opts, say)
    caps = workload.capabilities()
    mix = workload.Mix.of(
        opts.cron_jobs,
        opts.one_shots,
        exactly_once=caps["exactly_once"],
        workflow_crons=opts.workflow_crons,
        workflow_one_shots=opts.workflow_one_shots,
    )
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="duetime-chaos-run-"))
    workdir.mkdir(parents=True, exist_ok=True)
    made_workdir = opts.workdir is None
    meta: dict[str, Any] = {
        "load": _load(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": (
            f"{socket.gethostname()}, {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"PostgreSQL {pg.server_version(opts.base_url)}"
        ),
        "command": opts.command,
        "options": {
            "duration": opts.duration,
            "schedulers": opts.schedulers,
            "workers": opts.workers,
            "kill_every": opts.kill_every,
            "pg_restarts": opts.pg_restarts,
            "pg_restart_mode": opts.pg_restart_mode,
            "seed": opts.seed,
        },
        "settings": dict(SETTINGS),
        "capabilities": caps,
        "mix": mix.counts,
    }
    url = pg.create_database(opts.base_url)
    meta["database"] = url
    watch = LeaderWatch(url)
    restart_thread: threading.Thread | None = None
    outcome: Outcome | None = None
    say(
        f"chaos: {opts.schedulers} schedulers + {opts.workers} workers, {mix.total} jobs, "
        f"{opts.duration:.0f}s, a kill every ~{opts.kill_every:g}s, "
        f"{opts.pg_restarts} PostgreSQL restart(s); database {url.rsplit('/', 1)[-1]}"
    )
    missing = [name for name, have in caps.items() if not have]
    if missing:
        say(f"chaos: duetime lacks {', '.join(missing)}: those job kinds are left out")
    try:
        (workdir / f"{workload.TASK_MODULE_NAME}.py").write_text(workload.TASK_MODULE)
        code = _snapshot(workdir)
        for addon in opts.addons:
            addon.prepare(url)
        reg_start = time.time()
        window = (
            _utc(reg_start + opts.settle + 4),
            _utc(reg_start + opts.settle + 2 + max(opts.duration - 3, 1)),
        )
        count = asyncio.run(workload.register(url, mix, window=window, rng=run.rng))
        run.log(f"registered {count} jobs in {time.time() - reg_start:.1f}s")

        fleet = Fleet(workdir, _env(url, workdir, code), f"{workload.TASK_MODULE_NAME}:app")
        run.fleet = fleet
        for i in range(opts.schedulers):
            fleet.start("scheduler", i)
        for i in range(opts.workers):
            fleet.start("worker", i)
        watch.start()
        settle_until = time.time() + opts.settle
        while time.time() < settle_until:
            run.restart_crashed()
            time.sleep(0.05)

        for addon in opts.addons:
            addon.start(url)
        chaos_start = time.time()
        chaos_end = chaos_start + opts.duration
        restart_at = [
            chaos_start + opts.duration * (i + 1) / (opts.pg_restarts + 1)
            for i in range(opts.pg_restarts)
        ]
        modes = {
            "fast": ["fast"],
            "immediate": ["immediate"],
            "alternate": ["fast", "immediate"],
        }[opts.pg_restart_mode]
        next_kill = chaos_start + opts.kill_every * run.rng.uniform(0.5, 1.5)
        done_restarts = 0
        while time.time() < chaos_end:
            run.restart_crashed()
            now = time.time()
            idle = restart_thread is None or not restart_thread.is_alive()
            if restart_at and now >= restart_at[0] and idle and restarter is not None:
                restart_at.pop(0)
                mode = modes[done_restarts % len(modes)]
                done_restarts += 1
                restart_thread = threading.Thread(
                    target=run.restart_pg, args=(restarter, mode), daemon=True
                )
                restart_thread.start()
            if now >= next_kill:
                if run.kill_one(watch):
                    next_kill = time.time() + opts.kill_every * run.rng.uniform(0.5, 1.5)
                else:  # everybody is still starting: try again shortly
                    next_kill = time.time() + 0.2
            time.sleep(0.05)
        if restart_thread is not None:
            restart_thread.join(timeout=2 * pg.RESTART_TIMEOUT)
        for addon in opts.addons:
            addon.stop()
        stop_at = time.time()
        until = _utc(stop_at - opts.window_slack)
        run.log(f"chaos over; draining (occurrences up to {until:%H:%M:%S.%f} count)")

        # every takeover the last kills started must have had time to happen
        timing = _timing(opts.timing_slack)
        last_kill = max((p.killed_at for p in fleet.history if p.killed_at), default=0.0)
        recovered_at = (
            last_kill
            + timing.slack
            + max(timing.worker_takeover_bound, timing.leader_takeover_bound)
        )
        drain_deadline = time.monotonic() + opts.drain_timeout
        left = -1
        while time.monotonic() < drain_deadline:
            run.restart_crashed()
            try:
                with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
                    left = checks.pending(conn, until)
            except psycopg.Error:
                left = -1
            if left == 0 and time.time() >= recovered_at:
                break
            time.sleep(0.5)
        drained_in = time.time() - stop_at
        run.log(f"drain: {left} pending after {drained_in:.1f}s")
        meta["drain"] = f"{drained_in:.1f} s" + ("" if left == 0 else f" (timed out, {left} left)")

        grace = float(SETTINGS["DUETIME_SHUTDOWN_GRACE"]) + 10
        forced = fleet.stop_all(grace)
        run.log(f"stopped every process ({len(forced)} had to be killed)")
        watch.stop()
        events = _events(run, (chaos_start, stop_at), watch)
        events += [
            (_utc(p.exited_at or time.time()), None, "forced_stop", p.role, p.pid, None)
            for p in forced
        ]
        _save(url, events, watch)
        with psycopg.connect(url, autocommit=True) as conn:
            verdict = checks.check(
                conn,
                until=until,
                timing=timing,
                caps=caps,
                strict_timing=opts.strict_timing,
            )
            for addon in opts.addons:
                addon.check(conn, verdict)
        for error in run.restart_errors:
            verdict.add("harness error", error, kind=checks.INVARIANT, ok=False)
        meta["elapsed"] = f"{time.time() - run.t0:.0f} s"
        meta["load"] += f" → {_load()}"
        meta["leader_polls"] = f"{watch.polls} ({watch.failed_polls} failed)"
        outcome = Outcome(verdict, meta, workdir)
        if not verdict.ok:
            outcome.logs = "\n".join(
                f"--- {p.name} [{p.log_path.name}]\n{p.log_tail()}"
                for p in fleet.history
                if p.crashed or p.stopped
            )
        return outcome
    finally:
        for addon in opts.addons:
            addon.stop()
        if run.fleet is not None:
            run.fleet.kill_everything()
        if watch.is_alive():
            watch.stop()
        if restart_thread is not None and restart_thread.is_alive():
            restart_thread.join(timeout=2 * pg.RESTART_TIMEOUT)
        if restarter is not None and not restarter.ensure_running(opts.base_url):
            say(f"chaos: WARNING: PostgreSQL at {opts.base_url} does not answer after the run")
        failed = outcome is not None and not outcome.ok
        if opts.keep or failed:
            say(f"chaos: database kept for a post-mortem: {url}")
        else:
            try:
                pg.drop_database(url, opts.base_url)
            except psycopg.Error as exc:
                say(f"chaos: could not drop {url}: {exc}")
        if made_workdir and not (opts.keep or failed or outcome is None):
            shutil.rmtree(workdir, ignore_errors=True)
        elif made_workdir or failed:
            say(f"chaos: process logs kept in {workdir}")
        sys.stdout.flush()
