"""Failover of the database under load: what a failover costs duetime, and that it loses and
doubles nothing (docs/reliability.md, "Failover of PostgreSQL").

    python -m bench.failover                      # 3 rounds of the three faults, 1,600 triggers/s
    python -m bench.failover --trigger-rate 50 --backlog 2000   # what a loaded 2-core machine keeps
    python -m bench.failover --scenarios none --rounds 1 --duration 45 --backlog 0 --no-api
                                                  # no fault: is the rate sustained here?

A Patroni cluster of two PostgreSQL 15 nodes in strict synchronous mode with one etcd
(tests/failover/ha.py; ports 5491/5492, 8091/8092, 23790/23800, data under ``--dir``),
started once and used by every round. Each round is a chaos run (chaos/harness.py) on a fresh
database through the multi-host URL:

- the chaos workload (chaos/workload.py): ``--cron-jobs`` every-second crons of every kind
  (at-least-once and exactly-once effects, overlap and misfire policies), one-shots, a workflow,
  run by ``--schedulers`` schedulers and ``--workers`` workers as real ``duetime`` processes;
- a trigger process firing ``app.trigger`` at ``--trigger-rate`` per second (idempotency keys,
  retried until acknowledged; one run in ten exactly-once) and a burn-down backlog of
  ``--backlog`` runs queued before the workers start (tests/failover/load.py);
- a ``duetime server`` taking a REST trigger before, during and after each fault
  (tests/failover/api.py; ``--no-api`` leaves it out).

Each scenario (tests/failover/faults.py) is injected once per round, spread over
``--duration``:

- ``kill-primary``: SIGKILL of the primary's PostgreSQL and Patroni; the standby is promoted;
  the killed node is cloned afresh and becomes the synchronous standby;
- ``kill-standby``: SIGKILL of the standby's PostgreSQL and Patroni for ``--standby-down``
  seconds (commits wait), then it is started again;
- ``freeze-primary``: SIGSTOP of the primary's PostgreSQL and Patroni together until the
  standby is promoted, then SIGCONT.

Measured per fault, then per scenario over the rounds (median, min–max):

- **promoted**: from the fault until the standby is the primary (Patroni's REST API);
- **whole**: until the cluster has a primary and a streaming synchronous standby again;
- **firing resumes**: from the fault until a reader polling every 0.25 s (a fresh connection
  through the multi-host URL each time) first sees a run finished more than a second after the
  fault;
- **fire lag**: for the plain every-second crons (``chaos.tick``, instant) due from the fault
  until 10 s after ``whole``: the run's ``finished_at`` minus the occurrence's instant, median
  and max;
- **triggers acknowledged again**: from the fault until the first trigger sent more than a
  second after it is acknowledged (one sent at the instant of a SIGSTOP may still commit);
  **trigger wait**: the longest a trigger in flight during the fault waited for its
  acknowledgement (retries included);
- **API served again**: from ``whole`` until the REST trigger is served (201).

Before the first fault of each round: the trigger rate acknowledged and the crons' fire lag
(p50/p99) from 10 s after the start — whether the machine sustains the load at all.

Then the chaos checker's invariants (0 lost occurrences, 0 duplicate runs, 0 duplicate
exactly-once effects, every due run final) and the load's and the API's (no acknowledged
trigger without its run, every backlog run made and final; the API: 201 before, 201 or a
503 problem during, 201 again after); the exit status is non-zero when one fails in any round.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from chaos.harness import Options, Outcome, run_chaos
from chaos.report import text
from psycopg import sql
from tests.failover.api import ApiProbe
from tests.failover.faults import SCENARIOS, Fault, Faults
from tests.failover.ha import HaCluster, NodeSpec, missing_tools
from tests.failover.load import TriggerLoad, read_acks

from bench._common import Spread, guarded_main, machine

NODES = (NodeSpec("node1", 5491, 8091), NodeSpec("node2", 5492, 8092))
SUSTAINED = 0.95
"""A rate is sustained when at least this share of it is acknowledged before the first fault
and the crons' fire lag p99 there stays under SUSTAINED_LAG seconds."""
SUSTAINED_LAG = 2.0


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


class Probe(threading.Thread):
    """Polls the cluster (through the multi-host URL, a fresh connection each time, so a frozen
    host costs a poll its ``connect_timeout``, never the probe) for the latest ``finished_at``
    of the run's database that a reader can see: ``samples`` of (poll instant, latest)."""

    def __init__(self, cluster: HaCluster) -> None:
        super().__init__(daemon=True, name="failover-probe")
        self.cluster = cluster
        self.dbname: str | None = None
        """The chaos run's database (the only ``duetime_chaos_*`` one of the cluster)."""
        self.samples: list[tuple[float, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.25):
            with contextlib.suppress(psycopg.Error):
                if self.dbname is None:
                    self.dbname = self._find_database()
                    continue
                url = self.cluster.url(self.dbname)
                with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
                    row = conn.execute(
                        "SELECT extract(epoch FROM max(finished_at)) FROM runs"
                    ).fetchone()
                if row and row[0] is not None:
                    self.samples.append((time.time(), float(row[0])))

    def _find_database(self) -> str | None:
        with psycopg.connect(self.cluster.url(), autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'duetime_chaos_%'"
            ).fetchone()
        return None if row is None else str(row[0])

    def visible_after(self, instant: float) -> float | None:
        """When a run finished at least a second after ``instant`` was first seen: duetime
        completing runs again after a fault (a completion stamped before the fault, or within
        its first second, may be one the old primary committed)."""
        return next((t for t, latest in self.samples if latest > instant + 1.0), None)


def _cron_lags(url: str, begin: datetime, end: datetime) -> list[float]:
    """``finished_at`` minus the occurrence for the plain every-second crons due in
    [``begin``, ``end``)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        return [
            float(r[0])
            for r in conn.execute(
                "SELECT extract(epoch FROM r.finished_at - r.scheduled_for) "
                "FROM runs r JOIN chaos_jobs c ON c.job_id = r.job_id "
                "WHERE c.kind = 'cron' AND r.state = 'succeeded' "
                "AND r.scheduled_for >= %s AND r.scheduled_for < %s",
                (begin, end),
            ).fetchall()
            if r[0] is not None
        ]


def measure(
    url: str, fault: Fault, probe: Probe, load: TriggerLoad, api_after: float | None
) -> dict[str, float | None]:
    """The figures of one fault (seconds; None: not seen), from the run's database, the probe,
    the trigger log and the API probe."""
    resumed = probe.visible_after(fault.began)
    lags = _cron_lags(url, _utc(fault.began), _utc(fault.whole) + timedelta(seconds=10))
    acks = read_acks(load.log_path)
    after = [a for a in acks if a.sent >= fault.began + 1.0]  # as the probe: not one in flight
    # in flight at some moment of the fault: the calls a client saw wait (those sent during
    # it are few: the calls in flight take every slot of the trigger process)
    during = [a for a in acks if a.acked >= fault.began and a.sent <= fault.whole]
    return {
        "promoted": None if fault.promoted is None else fault.promoted - fault.began,
        "whole": fault.whole - fault.began,
        "firing resumes": None if resumed is None else resumed - fault.began,
        "fire lag median": statistics.median(lags) if lags else None,
        "fire lag max": max(lags) if lags else None,
        "triggers acknowledged again": (
            min(a.acked for a in after) - fault.began if after else None
        ),
        "trigger wait max": max((a.acked - a.sent for a in during), default=None),
        "API served again": api_after,
    }


def before_faults(url: str, outcome: Outcome, faults: Faults, load: TriggerLoad) -> str:
    """The load sustained before the first fault (see SUSTAINED)."""
    started = load.started_at
    first = faults.done[0].began if faults.done else (load.stopped_at or time.time())
    if started is None:
        return "no trigger load"
    rate = load.rate_before(first, settle=10.0)
    lags = sorted(_cron_lags(url, _utc(started + 10.0), _utc(first)))
    if not lags or rate is None:
        return "too short before the first fault to tell"
    p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
    kept = rate >= SUSTAINED * load.rate and p99 < SUSTAINED_LAG
    return (
        f"{rate:,.0f} triggers/s acknowledged of {load.rate:,.0f} asked; cron fire lag p50 "
        f"{statistics.median(lags):.2f} s, p99 {p99:.2f} s — "
        + ("sustained" if kept else "NOT sustained")
    )


def _drop(cluster: HaCluster, url: str) -> None:
    name = url.rsplit("/", 1)[-1].split("?", 1)[0]
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(cluster.url(), autocommit=True, connect_timeout=10) as conn,
    ):
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _show(values: list[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "—"
    missing = len(values) - len(seen)
    return Spread.of(seen).show(".1f") + ("" if not missing else f" ({missing} not seen)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help="comma-separated, or 'none'"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cron-jobs", type=int, default=50, help="every-second crons")
    parser.add_argument("--one-shots", type=int, default=300)
    parser.add_argument("--trigger-rate", type=float, default=1600.0, help="triggers/s")
    parser.add_argument("--backlog", type=int, default=10_000, help="runs queued at the start")
    parser.add_argument("--no-api", action="store_true", help="no duetime server")
    parser.add_argument("--schedulers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=150.0)
    parser.add_argument("--standby-down", type=float, default=10.0)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/duetime-bench-failover"))
    args = parser.parse_args()
    scenarios = tuple(s for s in args.scenarios.split(",") if s and s != "none")
    if args.rounds < 1:
        sys.exit("bench.failover: --rounds must be >= 1")
    missing = missing_tools()
    if missing:
        sys.exit(f"bench.failover: missing {', '.join(missing)}")
    args.dir.mkdir(parents=True, exist_ok=True)
    args.dir.chmod(0o755)
    command = " ".join(["python -m bench.failover", *sys.argv[1:]])
    began = datetime.now(UTC)
    load_at_start = machine()["load"]
    cluster = HaCluster(args.dir / "cluster", NODES)
    per_scenario: dict[str, dict[str, list[float | None]]] = defaultdict(lambda: defaultdict(list))
    failures: list[str] = []
    sustained: list[str] = []
    try:
        cluster.start()
        for number in range(1, args.rounds + 1):
            print(f"\n=== bench.failover round {number} of {args.rounds}", flush=True)
            workdir = args.dir / f"round-{number}"
            shutil.rmtree(workdir, ignore_errors=True)
            api = None if args.no_api else ApiProbe(workdir / "api")
            load = TriggerLoad(args.trigger_rate, args.backlog, workdir / "load")
            faults = Faults(cluster, scenarios, standby_down=args.standby_down, api=api)
            options = Options(
                duration=args.duration,
                schedulers=args.schedulers,
                workers=args.workers,
                kill_every=1e9,
                pg_restarts=len(scenarios),
                restarter=faults,
                base_url=cluster.url(),
                cron_jobs=args.cron_jobs,
                one_shots=args.one_shots,
                drain_timeout=180,
                lock_timeout=60,
                keep=True,
                workdir=workdir / "chaos",
                command=command,
                addons=(load,) if api is None else (load, api),
            )
            probe = Probe(cluster)
            probe.start()
            try:
                outcome = run_chaos(options, say=print)
            finally:
                probe.halt.set()
                probe.join(timeout=10)
            url = str(outcome.meta["database"])
            print(text(outcome))
            sustained.append(before_faults(url, outcome, faults, load))
            print(f"round {number}, before the first fault: {sustained[-1]}")
            for i, fault in enumerate(faults.done):
                served = api.served_after[i] if api and i < len(api.served_after) else None
                row = measure(url, fault, probe, load, served)
                print(
                    f"  {fault.scenario}: "
                    + "; ".join(f"{k} {'—' if v is None else f'{v:.1f} s'}" for k, v in row.items())
                )
                for name, value in row.items():
                    per_scenario[fault.scenario][name].append(value)
            if len(faults.done) != len(scenarios):
                failures.append(f"round {number}: {len(faults.done)} of {len(scenarios)} faults")
            if not outcome.ok:
                failures.append(
                    f"round {number}: " + "; ".join(f.name for f in outcome.verdict.failures)
                )
            _drop(cluster, url)
        about = ", ".join(f"{k} {v}" for k, v in machine().items())
        print(
            f"\nbench.failover — {began:%Y-%m-%d %H:%M UTC}, {args.rounds} round(s); "
            f"load average at the start {load_at_start}; now {about}\n{command}\n"
            f"{args.cron_jobs} every-second crons (+ {args.one_shots} one-shots), "
            f"{args.trigger_rate:,.0f} triggers/s, a backlog of {args.backlog:,} runs, "
            f"{args.schedulers} schedulers, {args.workers} workers"
            + ("" if args.no_api else ", a duetime server")
            + "; shared machine"
        )
        for number, line in enumerate(sustained, 1):
            print(f"  round {number} before the first fault: {line}")
        for scenario, figures in per_scenario.items():
            print(f"  {scenario}:")
            for name, values in figures.items():
                print(f"    {name}: {_show(values)}")
        if failures:
            sys.exit("bench.failover: an invariant failed: " + " | ".join(failures))
    finally:
        cluster.stop()  # the runs' databases go with the cluster's data
        shutil.rmtree(args.dir / "cluster", ignore_errors=True)


if __name__ == "__main__":
    guarded_main(main)
