"""Fire lag to publish: how late does a broker run's message reach a consumer, against the
run's scheduled instant (docs/brokers.md, issue 19; goal p99 < 20 ms at 1,600 triggers/s)?

    python -m bench.outbox_lag                       # Redis, 1,600 triggers/s for 20 s
    python -m bench.outbox_lag --broker nats --seconds 10 --repeat 3

One-shot ``at`` jobs with a broker target are registered up front, spread evenly over the
window; then one ``duetime scheduler`` and ``--workers`` ``duetime worker`` processes (each with
the connection in ``DUETIME_BROKERS``, so each runs a relay) run them on PostgreSQL, while a
consumer in this process reads the destination as messages arrive (Redis ``XREAD BLOCK``;
NATS: a JetStream push subscription). Lag = arrival on the consumer's clock − the message's
``duetime-scheduled-for`` (same machine, same clock). Every run of the window must arrive
exactly once by its message id; a missing or doubled one fails the bench. Also printed: where
the lag goes (the run's start, its message's commit and its mark ``sent``, from the database)
and the CPU time of the scheduler and workers (from their start) per message.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import (
    BenchError,
    Spread,
    base_parser,
    check_alive,
    duetime_env,
    guarded_main,
    lag_summary,
    percentile,
    proc_cpu_seconds,
    report,
    spawn,
    stop_all,
    wait_for,
)
from bench.burndown import Database
from bench.outbox import URLS
from duetime import _json
from duetime.app import AsyncApp
from duetime.registration import JobSpec

LEAD = 30.0
"""Default seconds between registration and the window's start (processes start meanwhile)."""


class Arrivals:
    """What the consumer saw: message id → (arrival, scheduled instant), both UTC seconds."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[float, float]] = {}
        self.doubled = 0
        self.lock = threading.Lock()

    def add(self, message_id: str, scheduled_for: str) -> None:
        arrived = time.time()
        due = datetime.fromisoformat(scheduled_for).timestamp()
        with self.lock:
            if message_id in self.seen:
                self.doubled += 1
            else:
                self.seen[message_id] = (arrived, due)


async def _consume_redis(name: str, arrivals: Arrivals, stop: threading.Event) -> None:
    import redis.asyncio as aioredis

    client = aioredis.from_url(URLS["redis"])
    last = "0"
    try:
        while not stop.is_set():
            got = await client.xread({name: last}, count=1000, block=200)
            for _, entries in got or []:
                for entry_id, fields in entries:
                    last = entry_id
                    arrivals.add(
                        fields[b"duetime-message-id"].decode(),
                        fields[b"duetime-scheduled-for"].decode(),
                    )
    finally:
        await client.delete(name)
        await client.aclose()


async def _consume_nats(
    subject: str, name: str, arrivals: Arrivals, stop: threading.Event, ready: threading.Event
) -> None:
    import nats

    nc = await nats.connect(URLS["nats"])
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[subject])

    async def heard(msg: Any) -> None:
        headers = msg.headers or {}
        arrivals.add(headers["duetime-message-id"], headers["duetime-scheduled-for"])

    sub = await js.subscribe(subject, cb=heard, ordered_consumer=True)
    ready.set()
    try:
        await asyncio.to_thread(stop.wait)
    finally:
        await sub.unsubscribe()
        await js.delete_stream(name)
        await nc.close()


def _consumer_thread(
    kind: str, target: dict[str, str], arrivals: Arrivals, stop: threading.Event
) -> tuple[threading.Thread, threading.Event]:
    ready = threading.Event()

    def run() -> None:
        if kind == "redis":
            ready.set()
            asyncio.run(_consume_redis(target["stream"], arrivals, stop))
        else:
            asyncio.run(_consume_nats(target["subject"], target["name"], arrivals, stop, ready))

    thread = threading.Thread(target=run, name="consumer", daemon=True)
    thread.start()
    return thread, ready


async def _register(
    url: str, target: dict[str, str], start: datetime, rate: float, seconds: float
) -> int:
    count = round(rate * seconds)
    step = seconds / count
    specs = [
        JobSpec(name=f"at-{i}", at=start + timedelta(seconds=i * step), target=target)
        for i in range(count)
    ]
    async with AsyncApp(url, migrate=False) as app:
        return await app.schedule_many(specs, allow_unregistered=True)


def fire_to_publish(
    kind: str, *, rate: float, seconds: float, workers: int, settle: float, lead: float = LEAD
) -> dict[str, Any]:
    db = Database("postgres")
    procs: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    arrivals = Arrivals()
    name = f"duetime_lag_{uuid.uuid4().hex[:8]}"
    target = {"type": kind, "connection": "b"}
    target |= {"stream": name} if kind == "redis" else {"subject": f"bench.{name}"}
    consumer, ready = _consumer_thread(kind, {**target, "name": name}, arrivals, stop)
    try:
        if not ready.wait(30):
            raise BenchError(f"the {kind} consumer did not start")
        start = (datetime.now(UTC) + timedelta(seconds=lead)).replace(microsecond=0)
        registered = asyncio.run(_register(db.url, target, start, rate, seconds))
        env = duetime_env(
            database_url=db.url,
            brokers=_json.dumps({"b": {"type": kind, "url": URLS[kind]}}),
            worker_concurrency=4000,
            worker_batch=500,
            log_level="warning",
            shutdown_grace=5,
        )
        py = [sys.executable, "-m", "duetime"]
        procs.append(spawn([*py, "scheduler"], env))
        procs += [spawn([*py, "worker"], env) for _ in range(workers)]
        if datetime.now(UTC) > start - timedelta(seconds=2):
            raise BenchError("registration took too long: raise --lead")
        end = start + timedelta(seconds=seconds)
        wait_for(
            "the window",
            lambda: datetime.now(UTC) >= end,
            seconds + lead + 5.0,
            0.5,
            lambda: check_alive(procs, "a duetime process"),
        )
        try:
            wait_for(
                "every message",
                lambda: len(arrivals.seen) >= registered,
                settle,
                0.25,
                lambda: check_alive(procs, "a duetime process"),
            )
        except BenchError as exc:
            raise BenchError(f"{exc} ({len(arrivals.seen):,} of {registered:,} arrived)") from None
        stages = _stages(db)
        cpu = sum(proc_cpu_seconds(p.pid) for p in procs)
        errors = stop_all(procs)
        procs = []
        if errors:
            print("process errors:\n" + "\n".join(errors), file=sys.stderr)
        if arrivals.doubled:
            raise BenchError(f"{arrivals.doubled} messages arrived twice")
        lags = [(arrived - due) * 1000 for arrived, due in arrivals.seen.values()]
        summary = lag_summary(lags)
        return {
            "broker": kind,
            "rate": rate,
            "messages": len(lags),
            **summary,
            "stages": stages,
            "cpu_us": cpu / len(lags) * 1e6,
        }
    finally:
        stop.set()
        stop_all(procs)
        consumer.join(10)
        db.drop()


STAGES = """
SELECT extract(epoch FROM r.started_at - r.scheduled_for) * 1000,
       extract(epoch FROM o.created_at - r.scheduled_for) * 1000,
       extract(epoch FROM o.sent_at - r.scheduled_for) * 1000
FROM runs r JOIN outbox o ON o.run_id = r.id
"""


def _stages(db: Database) -> dict[str, float]:
    """Where the lag goes, from the database: p50/p99 of the run's start, its message's commit
    (the completion) and its mark ``sent`` (after the broker took it), each against the
    instant."""
    rows = db.query(STAGES)
    out: dict[str, float] = {}
    for i, stage in enumerate(("started", "committed", "marked sent")):
        values = [float(r[i]) for r in rows if r[i] is not None]
        if values:
            out[f"{stage} p50"] = percentile(values, 50)
            out[f"{stage} p99"] = percentile(values, 99)
    return out


def describe(r: dict[str, Any]) -> str:
    stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages"].items())
    return (
        f"{r['broker']:6} {r['rate']:,.0f} triggers/s, {r['messages']:,} messages: lag p50 "
        f"{r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms "
        f"(ms after the instant: {stages}); CPU of the duetime processes "
        f"{r['cpu_us']:.0f} µs/message"
    )


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--broker", choices=["redis", "nats"], default="redis")
    parser.add_argument("--rate", type=float, default=1600.0, help="triggers per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="window length")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--settle", type=float, default=120.0, help="max wait after the window")
    parser.add_argument("--lead", type=float, default=LEAD, help="seconds before the window")
    args = parser.parse_args()
    results = []
    for _ in range(args.repeat):
        r = fire_to_publish(
            args.broker,
            rate=args.rate,
            seconds=args.seconds,
            workers=args.workers,
            settle=args.settle,
            lead=args.lead,
        )
        print("  " + describe(r), flush=True)
        results.append(r)
    lines = [describe(r) for r in results]
    if len(results) > 1:
        for key in ("p50_ms", "p99_ms", "max_ms"):
            lines.append(f"median {key}: {Spread.of([r[key] for r in results]).show('.1f')}")
    title = f"fire lag to publish ({args.broker}, {args.rate:,.0f}/s for {args.seconds:.0f} s)"
    report(title, lines, record=args.record)


if __name__ == "__main__":
    guarded_main(main)
