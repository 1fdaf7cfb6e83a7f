"""Broker chaos (issue 19; docs/reliability.md): real ``duetime scheduler`` and ``duetime
worker`` processes run one-shot jobs whose targets are a Redis stream, a RabbitMQ exchange and a
NATS JetStream subject; their relays publish the outbox while workers (and the relays in them)
are SIGKILLed every few seconds, mid-publish; the Redis, RabbitMQ and NATS servers are each
killed for a while and started again, and so is PostgreSQL (stopped ``fast`` or ``immediate``,
down for a while, started). Then, from the database and what each broker holds:

- every succeeded broker run's message reached its broker at least once;
- no message without a run: each one names a run that succeeded, with that attempt's id;
- duplicates only with identical message ids (and bodies);
- none reached the JetStream stream twice (it dedupes on ``Nats-Msg-Id``);
- every succeeded run's ``succeeded`` run event is there, and no outbox row is dead.

Every server is private, started here on its own port and data, so killing it disturbs no one:
Redis on 6391 (an fsync'd append-only file), NATS with JetStream on 4231 (its own store
directory), a RabbitMQ node on 5682 (Erlang distribution on 25682, its own epmd on 25683, a
durable queue; chaos/private_servers.py) and a PostgreSQL cluster on 5503 (initdb'd for the
run, removed at the end).

    python -m chaos.brokers --duration 120          # the longer run of docs/reliability.md

Every wait is bounded; on every exit path each process we started is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from chaos import pg
from chaos.private_servers import (
    PrivatePostgres,
    ServerSetupError,
    epmd_argv,
    rabbitmq_argv_env,
    rabbitmq_server,
)
from duetime import AsyncApp, _json
from duetime._types import RetryPolicy
from duetime.registration import JobSpec

SETTINGS = {
    "DUETIME_LEASE_TTL": "3",
    "DUETIME_HEARTBEAT_INTERVAL": "1",
    "DUETIME_REAPER_INTERVAL": "0.5",
    "DUETIME_LEADER_TTL": "3",
    "DUETIME_SCHEDULER_TICK": "0.5",
    "DUETIME_WORKER_POLL_INTERVAL": "0.5",
    "DUETIME_WORKER_CONCURRENCY": "50",
    "DUETIME_SHUTDOWN_GRACE": "5",
    "DUETIME_OUTBOX_LEASE": "3",
}
"""Short timings, so a minute holds many failures and recoveries; an outbox claim of a killed
relay comes back after 3 s."""
RETRY = RetryPolicy(max_attempts=20, backoff_base=0.2, backoff_cap=1.0)
"""Lost leases (a killed worker's runs) count as attempts: enough that kills never kill a run."""


class SetupError(RuntimeError):
    """The run could not start (a port taken, a broker or PostgreSQL unreachable)."""


@dataclass
class Options:
    duration: float = 40.0
    workers: int = 3
    kill_every: float = 2.5
    rate: float = 20.0
    """One-shot jobs per second per broker."""
    outage: float = 5.0
    """Seconds each server (Redis, RabbitMQ, NATS, PostgreSQL) stays down (one outage each)."""
    drain_timeout: float = 90.0
    lead: float = 8.0
    redis_port: int = 6391
    nats_port: int = 4231
    rabbitmq_port: int = 5682
    rabbitmq_dist_port: int = 25682
    epmd_port: int = 25683
    pg_port: int = 5503
    pg_stop: str = "either"
    """How PostgreSQL is stopped: ``fast``, ``immediate``, or ``either`` (the seed's choice)."""
    workdir: Path | None = None
    seed: int | None = None


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        lines = [f"{k}: {v}" for k, v in self.figures.items()]
        lines += [f"PROBLEM: {p}" for p in self.problems] or ["every invariant held"]
        return "\n".join(lines)


# --- processes --------------------------------------------------------------------------------


@dataclass
class Procs:
    """The processes we started, each in its own session; logs under ``workdir``."""

    workdir: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Any:
        log = open(self.workdir / f"{name}.{len(self.started)}.log", "wb")  # noqa: SIM115
        with log:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append(proc)
        return proc

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self, procs: list[subprocess.Popen[bytes]], timeout: float = 20.0) -> None:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(proc)

    def kill_everything(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                self.kill(proc)

    def logs(self, chars: int = 1500) -> str:
        tails = []
        for path in sorted(self.workdir.glob("*.log")):
            text = path.read_text(errors="replace")
            if "Traceback" in text:
                tails.append(f"--- {path.name}\n{text[-chars:]}")
        return "\n".join(tails)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _port_free(port):
            return
        time.sleep(0.1)
    raise SetupError(f"nothing answers on 127.0.0.1:{port} after {timeout:.0f} s")


STARTUP = {"redis": 20.0, "nats": 20.0, "rabbitmq": 120.0}
"""Seconds each server may take to answer after a start (a RabbitMQ node boots in ~8 s on a
loaded machine, and recovers its queues after a kill)."""


class Servers:
    """The private Redis, NATS and RabbitMQ servers: started, killed, started again on their
    data. The RabbitMQ node's epmd is started with the first start of the node and runs until
    the end (killing it would be a different failure: the node's name lost)."""

    def __init__(self, procs: Procs, opts: Options, workdir: Path) -> None:
        self.procs, self.opts, self.workdir = procs, opts, workdir
        self.current: dict[str, subprocess.Popen[bytes]] = {}
        for kind in ("redis", "nats", "rabbitmq"):
            (workdir / kind).mkdir(exist_ok=True)
        self.epmd: subprocess.Popen[bytes] | None = None

    def argv(self, kind: str) -> list[str]:
        if kind == "redis":
            return [
                "redis-server", "--port", str(self.opts.redis_port), "--bind", "127.0.0.1",
                "--dir", str(self.workdir / "redis"), "--appendonly", "yes",
                "--appendfsync", "always", "--save", "",
            ]  # fmt: skip
        return [
            "nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.opts.nats_port),
            "-sd", str(self.workdir / "nats"),
        ]  # fmt: skip

    def port(self, kind: str) -> int:
        return {
            "redis": self.opts.redis_port,
            "nats": self.opts.nats_port,
            "rabbitmq": self.opts.rabbitmq_port,
        }[kind]

    def start(self, kind: str, *, wait: bool = True) -> None:
        if not _port_free(self.port(kind)):
            raise SetupError(f"port {self.port(kind)} is taken: another {kind} runs there")
        if kind == "rabbitmq":
            self._start_rabbitmq()
        else:
            self.current[kind] = self.procs.start(kind, self.argv(kind))
        if wait:
            self.wait(kind)

    def wait(self, kind: str) -> None:
        _wait_port(self.port(kind), STARTUP[kind])

    def _start_rabbitmq(self) -> None:
        o = self.opts
        try:
            if self.epmd is None:
                if not _port_free(o.epmd_port):
                    raise SetupError(f"port {o.epmd_port} (epmd) is taken")
                self.epmd = self.procs.start("epmd", epmd_argv(o.epmd_port))
                _wait_port(o.epmd_port, 10)
            argv, env = rabbitmq_argv_env(
                self.workdir / "rabbitmq", o.rabbitmq_port, o.rabbitmq_dist_port, o.epmd_port
            )
        except ServerSetupError as exc:
            raise SetupError(str(exc)) from None
        if not _port_free(o.rabbitmq_dist_port):
            raise SetupError(f"port {o.rabbitmq_dist_port} (Erlang distribution) is taken")
        self.current["rabbitmq"] = self.procs.start("rabbitmq", argv, env)

    def kill(self, kind: str) -> None:
        self.procs.kill(self.current[kind])
        deadline = time.monotonic() + 10
        ports = [self.port(kind)]
        if kind == "rabbitmq":  # its next start binds the distribution port again
            ports.append(self.opts.rabbitmq_dist_port)
        while not all(map(_port_free, ports)) and time.monotonic() < deadline:
            time.sleep(0.05)


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Destinations:
    redis_url: str
    nats_url: str
    amqp_url: str
    stream: str = "chaos-orders"
    events: str = "chaos-events"
    subject: str = "chaos.orders"
    jetstream: str = "CHAOS"
    exchange: str = field(default_factory=lambda: f"duetime-chaos-{uuid.uuid4().hex[:8]}")

    def targets(self) -> dict[str, dict[str, str]]:
        return {
            "redis": {"type": "redis", "connection": "r", "stream": self.stream},
            "rabbitmq": {
                "type": "rabbitmq",
                "connection": "q",
                "exchange": self.exchange,
                "routing_key": "due",
            },
            "nats": {"type": "nats", "connection": "n", "subject": self.subject},
        }

    def brokers(self) -> str:
        return _json.dumps(
            {
                "r": {"type": "redis", "url": self.redis_url},
                "q": {"type": "rabbitmq", "url": self.amqp_url},
                "n": {"type": "nats", "url": self.nats_url, "duplicate_window": 120},
            }
        )

    def run_events(self) -> str:
        """Each run's ``succeeded`` event to a Redis stream of its own (docs/brokers.md)."""
        target = {"type": "redis", "connection": "r", "stream": self.events}
        return _json.dumps({"target": target, "events": ["succeeded"]})

    async def create(self) -> None:
        import aio_pika
        import nats
        from nats.js.api import StreamConfig

        conn = await aio_pika.connect(self.amqp_url)
        async with conn:  # durable: the node is killed, its persistent messages must survive
            channel = await conn.channel()
            exchange = await channel.declare_exchange(self.exchange, durable=True)
            queue = await channel.declare_queue(self.exchange, durable=True)
            await queue.bind(exchange, routing_key="due")
        nc = await nats.connect(self.nats_url)
        try:
            await nc.jetstream().add_stream(
                StreamConfig(name=self.jetstream, subjects=[self.subject], duplicate_window=120)
            )
        finally:
            await nc.close()

    async def read(self) -> dict[str, list[dict[str, str]]]:
        """Every message each broker holds: its headers (Redis: fields) and body."""
        import aio_pika
        import nats
        import redis.asyncio as aioredis

        out: dict[str, list[dict[str, str]]] = {"redis": [], "rabbitmq": [], "nats": []}
        client: Any = aioredis.from_url(self.redis_url)
        try:
            for kind, stream in (("redis", self.stream), ("events", self.events)):
                for _, fields in await client.xrange(stream):
                    decoded = {k.decode(): v.decode() for k, v in fields.items()}
                    decoded["body"] = decoded.pop("payload")
                    out.setdefault(kind, []).append(decoded)
        finally:
            await client.aclose()
        conn = await aio_pika.connect(self.amqp_url)
        async with conn:
            channel = await conn.channel()
            queue = await channel.declare_queue(self.exchange, durable=True)
            while (message := await queue.get(no_ack=True, fail=False)) is not None:
                headers = {k: str(v) for k, v in (message.headers or {}).items()}
                headers["body"] = message.body.decode()
                out["rabbitmq"].append(headers)
            await queue.delete(if_unused=False, if_empty=False)
            await channel.exchange_delete(self.exchange)
        nc = await nats.connect(self.nats_url)
        try:
            js = nc.jetstream()
            info = await js.stream_info(self.jetstream)
            if info.state.messages:
                for seq in range(info.state.first_seq, info.state.last_seq + 1):
                    msg = await js.get_msg(self.jetstream, seq)
                    body = (msg.data or b"").decode()
                    out["nats"].append({**dict(msg.headers or {}), "body": body})
        finally:
            await nc.close()
        return out


async def _register(url: str, dest: Destinations, start: datetime, opts: Options) -> int:
    count = round(opts.rate * opts.duration)
    step = opts.duration / count
    specs = [
        JobSpec(
            name=f"{kind}-{i}",
            at=start + timedelta(seconds=i * step),
            target=target,
            payload={"kind": kind, "i": i},
            retry=RETRY,
        )
        for kind, target in dest.targets().items()
        for i in range(count)
    ]
    async with AsyncApp(url, migrate=True) as app:
        return await app.schedule_many(specs, allow_unregistered=True)


def _db_state(url: str) -> tuple[int, int]:
    """(runs not yet ended, outbox rows not yet sent)."""
    with psycopg.connect(url, autocommit=True) as conn:
        open_runs = conn.execute(
            "SELECT count(*) FROM jobs j LEFT JOIN runs r ON r.job_id = j.id "
            "WHERE r.id IS NULL OR r.state IN ('scheduled', 'running')"
        ).fetchone()
        pending = conn.execute(
            "SELECT count(*) FROM outbox WHERE sent_at IS NULL AND dead_at IS NULL"
        ).fetchone()
    assert open_runs is not None
    assert pending is not None
    return int(open_runs[0]), int(pending[0])


def _wait(what: str, done: Callable[[], bool], timeout: float, verdict: Verdict) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.5)
    verdict.problems.append(f"{what}: not within {timeout:.0f} s")


def check(url: str, held: dict[str, list[dict[str, str]]], verdict: Verdict) -> None:
    """The four invariants, from the database and what the brokers hold."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT r.id::text, r.attempt, r.state, r.target->>'type', r.token FROM runs r"
        ).fetchall()
        republished = conn.execute("SELECT count(*) FROM outbox WHERE tries > 1").fetchone()
        dead_rows = conn.execute("SELECT count(*) FROM outbox WHERE dead_at IS NOT NULL").fetchone()
    runs = {r[0]: r for r in rows}
    states = Counter(r[2] for r in rows)
    verdict.figures["runs"] = dict(states)
    verdict.figures["outbox rows claimed more than once"] = republished[0] if republished else 0
    if dead_rows and dead_rows[0]:
        verdict.problems.append(f"{dead_rows[0]} outbox rows are dead (a broker refused them)")
    _check_events(runs, held.pop("events", []), verdict)
    for kind, messages in held.items():
        ids = Counter(m["duetime-message-id"] for m in messages)
        doubled = sum(n - 1 for n in ids.values())
        verdict.figures[f"{kind} messages"] = f"{len(messages):,} ({doubled} duplicates)"
        if kind == "nats" and doubled:
            verdict.problems.append(f"nats: {doubled} duplicates reached the JetStream stream")
        bodies: dict[str, str] = {}
        for m in messages:
            run = runs.get(m["duetime-run-id"])
            if run is None or run[2] != "succeeded":
                verdict.problems.append(f"{kind}: message {m['duetime-message-id']} has no "
                                        f"succeeded run")  # fmt: skip
                continue
            if m["duetime-message-id"] != f"{run[0]}:{run[1]}":
                verdict.problems.append(
                    f"{kind}: message id {m['duetime-message-id']} is not its run's "
                    f"succeeded attempt {run[1]}"
                )
            if bodies.setdefault(m["duetime-message-id"], m["body"]) != m["body"]:
                verdict.problems.append(f"{kind}: duplicates of {m['duetime-message-id']} differ")
        for run_id, _, state, target, _ in rows:
            if target == kind and state == "succeeded" and f"{run_id}:{runs[run_id][1]}" not in ids:
                verdict.problems.append(f"{kind}: succeeded run {run_id} has no message")
    if states.get("dead"):
        verdict.problems.append(f"{states['dead']} runs died (lost leases exhausted attempts?)")


def _check_events(runs: dict[str, Any], events: list[dict[str, str]], verdict: Verdict) -> None:
    """Run events (``succeeded`` only): one id per succeeded run, the run's and its last
    token's, each run's event at least once, and none of a run that did not succeed."""
    ids = Counter(m["duetime-message-id"] for m in events)
    verdict.figures["run events"] = f"{len(events):,} ({sum(ids.values()) - len(ids)} duplicates)"
    for m in events:
        run = runs.get(m["duetime-run-id"])
        if run is None or run[2] != "succeeded":
            verdict.problems.append(f"event {m['duetime-message-id']} has no succeeded run")
        elif m["duetime-message-id"] != f"{run[0]}:{run[4]}:succeeded":
            verdict.problems.append(f"event {m['duetime-message-id']}: not its run's last token")
    for run_id, _, state, _, token in runs.values():
        if state == "succeeded" and f"{run_id}:{token}:succeeded" not in ids:
            verdict.problems.append(f"succeeded run {run_id} has no succeeded event")


OUTAGES = {"rabbitmq": 0.15, "redis": 0.3, "postgres": 0.45, "nats": 0.6}
"""When each server goes down, as a share of the chaos window; each stays down ``outage``
seconds (one at a time while the window is at least four outages long)."""


def _outage_plan(chaos_start: float, opts: Options) -> list[tuple[float, str, str]]:
    """(instant, ``stop`` or ``start``, server) of every outage, in order."""
    plan = []
    for kind, share in OUTAGES.items():
        down = chaos_start + share * opts.duration
        plan += [(down, "stop", kind), (down + opts.outage, "start", kind)]
    return sorted(plan)


def _stop_mode(opts: Options, rng: random.Random) -> str:
    return rng.choice(("fast", "immediate")) if opts.pg_stop == "either" else opts.pg_stop


def _outage_step(
    action: str,
    kind: str,
    servers: Servers,
    postgres: PrivatePostgres,
    mode: str,
    verdict: Verdict,
) -> None:
    """Stop or start one server. A broker is SIGKILLed and started again without waiting
    for it (the kills go on while a RabbitMQ node boots); PostgreSQL is stopped in ``mode``
    (``fast`` or ``immediate``) and started, waiting until it answers."""
    if kind != "postgres":
        if action == "stop":
            servers.kill(kind)
        else:
            servers.start(kind, wait=False)
        return
    try:
        if action == "stop":
            postgres.stop(mode)
            verdict.figures["postgres restart"] = f"stopped {mode}"
        else:
            took = postgres.start()
            verdict.figures["postgres restart"] += f", answering {took:.1f} s after its start"
    except ServerSetupError as exc:
        verdict.problems.append(f"PostgreSQL {action}: {exc}")


def run_broker_chaos(opts: Options, say: Callable[[str], None] = print) -> tuple[Verdict, str]:
    """One run; returns the verdict and the tails of logs that hold a traceback."""
    for tool in ("redis-server", "nats-server"):
        if shutil.which(tool) is None:
            raise SetupError(f"{tool} is not installed")
    if rabbitmq_server() is None:
        raise SetupError("rabbitmq-server is not installed")
    if not _port_free(opts.pg_port):
        raise SetupError(f"port {opts.pg_port} is taken: another PostgreSQL runs there")
    rng = random.Random(opts.seed)
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="duetime-broker-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    procs = Procs(workdir)
    verdict = Verdict()
    postgres: PrivatePostgres | None = None
    try:
        servers = Servers(procs, opts, workdir)
        servers.start("rabbitmq", wait=False)  # it boots while the others start
        servers.start("redis")
        servers.start("nats")
        try:
            postgres = PrivatePostgres(opts.pg_port)
            postgres.create()
        except ServerSetupError as exc:
            raise SetupError(str(exc)) from None
        servers.wait("rabbitmq")
        dest = Destinations(
            f"redis://127.0.0.1:{opts.redis_port}/0",
            f"nats://127.0.0.1:{opts.nats_port}",
            f"amqp://guest:guest@127.0.0.1:{opts.rabbitmq_port}/",
        )
        asyncio.run(dest.create())
        url = pg.create_database(postgres.base_url)
        start = datetime.now(UTC) + timedelta(seconds=opts.lead)
        registered = asyncio.run(_register(url, dest, start, opts))
        verdict.figures["jobs"] = registered
        env = {**os.environ, **SETTINGS, "DUETIME_DATABASE_URL": url}
        env |= {"DUETIME_BROKERS": dest.brokers(), "DUETIME_RUN_EVENTS": dest.run_events()}
        env["PYTHONUNBUFFERED"] = "1"
        py = [sys.executable, "-m", "duetime"]
        scheduler = procs.start("scheduler", [*py, "scheduler"], env)
        workers = [procs.start(f"worker{i}", [*py, "worker"], env) for i in range(opts.workers)]
        say(f"{registered:,} jobs from {start:%H:%M:%S}; chaos for {opts.duration:.0f} s")
        kills = outages = 0
        end = time.monotonic() + max(0.0, (start - datetime.now(UTC)).total_seconds())
        end += opts.duration
        plan = _outage_plan(end - opts.duration, opts)
        next_kill = end - opts.duration
        # every outage ends, even one a slow machine pushed past the end of the kills
        while (now := time.monotonic()) < end or plan:
            while plan and plan[0][0] <= now:
                _, action, kind = plan.pop(0)
                if action == "stop":
                    outages += 1
                mode = _stop_mode(opts, rng) if (action, kind) == ("stop", "postgres") else ""
                _outage_step(action, kind, servers, postgres, mode, verdict)
            if now < end and now >= next_kill:
                i = rng.randrange(len(workers))
                procs.kill(workers[i])
                workers[i] = procs.start(f"worker{i}", [*py, "worker"], env)
                kills += 1
                next_kill = now + opts.kill_every * rng.uniform(0.5, 1.5)
            if scheduler.poll() is not None:
                verdict.problems.append("the scheduler exited by itself")
                scheduler = procs.start("scheduler", [*py, "scheduler"], env)
            wake = [plan[0][0]] if plan else []
            if now < end:
                wake += [next_kill, end]
            time.sleep(max(0.05, min(wake, default=now) - time.monotonic()))
        for kind in ("rabbitmq", "redis", "nats"):
            servers.wait(kind)
        verdict.figures["workers SIGKILLed"] = kills
        verdict.figures["outages"] = (
            f"{outages} of {opts.outage:.0f} s (RabbitMQ, Redis, PostgreSQL, NATS)"
        )

        def drained() -> bool:
            open_runs, pending = _db_state(url)
            return open_runs == 0 and pending == 0

        _wait("every run ended and every message sent", drained, opts.drain_timeout, verdict)
        procs.stop([scheduler, *workers])
        check(url, asyncio.run(dest.read()), verdict)
        return verdict, procs.logs()
    finally:
        procs.kill_everything()
        if postgres is not None:
            postgres.destroy()
        if opts.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=20.0, help="jobs/s per broker")
    parser.add_argument("--kill-every", type=float, default=2.5)
    parser.add_argument("--outage", type=float, default=10.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--pg-stop", choices=("fast", "immediate", "either"), default="either",
        help="how PostgreSQL is stopped mid-run (either: the seed's choice)",
    )  # fmt: skip
    args = parser.parse_args()
    opts = Options(
        duration=args.duration,
        workers=args.workers,
        rate=args.rate,
        kill_every=args.kill_every,
        outage=args.outage,
        seed=args.seed,
        pg_stop=args.pg_stop,
        drain_timeout=max(90.0, args.outage * 6),
    )
    started = time.monotonic()
    try:
        verdict, logs = run_broker_chaos(opts)
    except SetupError as exc:
        raise SystemExit(f"broker chaos could not run: {exc}") from None
    print(verdict.text())
    print(f"took {time.monotonic() - started:.0f} s")
    if not verdict.ok:
        print(logs, file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
