"""Failover of the database under load: what a failover costs duetime, and that it loses and
doubles nothing (docs/reliability.md, "Failover of PostgreSQL").

    python -m bench.failover
    python -m bench.failover --scenarios kill-primary --cron-jobs 100 --duration 90

A Patroni cluster of two PostgreSQL 15 nodes in strict synchronous mode with one etcd
(tests/failover/ha.py; ports 5491/5492, 8091/8092, 23790/23800, data under ``--dir``), and the
chaos workload (chaos/workload.py: ``--cron-jobs`` every-second crons, about as many
triggers per second, of every kind: at-least-once and exactly-once effects, overlap and
misfire policies; one-shots; a workflow) run by schedulers and workers as real ``duetime``
processes through the multi-host URL. Each scenario (tests/failover/faults.py) is injected
once, spread over ``--duration``:

- ``kill-primary``: SIGKILL of the primary's PostgreSQL and Patroni; the standby is promoted;
  the killed node is cloned afresh and becomes the synchronous standby;
- ``kill-standby``: SIGKILL of the standby's PostgreSQL and Patroni for ``--standby-down``
  seconds (commits wait), then it is started again;
- ``freeze-primary``: SIGSTOP of the primary's PostgreSQL and Patroni together until the
  standby is promoted, then SIGCONT.

Measured per fault:

- **promoted**: from the fault until the standby is the primary (Patroni's REST API);
- **whole**: until the cluster has a primary and a streaming synchronous standby again;
- **runs complete again**: from the fault until a reader polling every 0.25 s (a fresh
  connection through the multi-host URL each time) first sees a run finished more than a
  second after the fault — firing resumed;
- **fire lag**: for the plain every-second crons (``chaos.tick``, instant) due from the fault
  until 10 s after ``whole``: the run's ``finished_at`` minus the occurrence's instant, median
  and max.

Then the chaos checker's invariants (0 lost, 0 duplicate runs, 0 duplicate exactly-once
effects, every due run final); the exit status is non-zero when one fails. One round per run
(a failover takes the cluster tens of seconds); bounded by ``--duration`` plus the drain.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from chaos.harness import Options, run_chaos
from chaos.report import text
from tests.failover.faults import SCENARIOS, Fault, Faults
from tests.failover.ha import HaCluster, NodeSpec, missing_tools

from bench._common import guarded_main, machine

NODES = (NodeSpec("node1", 5491, 8091), NodeSpec("node2", 5492, 8092))


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


def measure(url: str, fault: Fault, probe: Probe) -> dict[str, str]:
    """The figures of one fault, read from the run's database and the probe."""
    began = _utc(fault.began)
    whole = _utc(fault.whole)
    resumed = probe.visible_after(fault.began)
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        lags = [
            float(r[0])
            for r in conn.execute(
                "SELECT extract(epoch FROM r.finished_at - r.scheduled_for) "
                "FROM runs r JOIN chaos_jobs c ON c.job_id = r.job_id "
                "WHERE c.kind = 'cron' AND r.state = 'succeeded' "
                "AND r.scheduled_for >= %s AND r.scheduled_for < %s",
                (began, whole + timedelta(seconds=10)),
            ).fetchall()
            if r[0] is not None
        ]
    promoted = "—" if fault.promoted is None else f"{fault.promoted - fault.began:.1f} s"
    again = "—" if resumed is None else f"{resumed - fault.began:.1f} s"
    lag = (
        f"{statistics.median(lags):.1f} s / {max(lags):.1f} s ({len(lags)} occurrences)"
        if lags
        else "—"
    )
    return {
        "scenario": fault.scenario,
        "promoted": promoted,
        "whole": f"{fault.whole - fault.began:.1f} s",
        "runs complete again": again,
        "fire lag median / max": lag,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--cron-jobs", type=int, default=50, help="every-second crons")
    parser.add_argument("--one-shots", type=int, default=300)
    parser.add_argument("--schedulers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=150.0)
    parser.add_argument("--standby-down", type=float, default=10.0)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/duetime-bench-failover"))
    args = parser.parse_args()
    scenarios = tuple(s for s in args.scenarios.split(",") if s)
    missing = missing_tools()
    if missing:
        sys.exit(f"bench.failover: missing {', '.join(missing)}")
    args.dir.mkdir(parents=True, exist_ok=True)
    args.dir.chmod(0o755)
    cluster = HaCluster(args.dir / "cluster", NODES)
    try:
        cluster.start()
        faults = Faults(cluster, scenarios, standby_down=args.standby_down)
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
            drain_timeout=120,
            lock_timeout=60,
            keep=True,
            workdir=args.dir / "chaos",
            command=" ".join(["python -m bench.failover", *sys.argv[1:]]),
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
        rows = [measure(url, fault, probe) for fault in faults.done]
        about = ", ".join(f"{k} {v}" for k, v in machine().items())
        print(f"\nbench.failover — {datetime.now(UTC):%Y-%m-%d %H:%M UTC}; {about}")
        print(
            f"{args.cron_jobs} every-second crons (+ {args.one_shots} one-shots), "
            f"{args.schedulers} schedulers, {args.workers} workers; shared machine"
        )
        for row in rows:
            print("  " + "; ".join(f"{k}: {v}" for k, v in row.items()))
        if len(faults.done) != len(scenarios):
            sys.exit(f"bench.failover: {len(faults.done)} of {len(scenarios)} faults injected")
        if not outcome.ok:
            sys.exit("bench.failover: an invariant failed (see above)")
    finally:
        cluster.stop()  # the run's database goes with the cluster's data
        shutil.rmtree(args.dir / "cluster", ignore_errors=True)


if __name__ == "__main__":
    guarded_main(main)
