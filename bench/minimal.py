"""Minimal scripts of duetime's data model: what this server does with nothing but a queue.

    python -m bench.minimal uniform --runs 100000          # burn-down of one uniform backlog
    python -m bench.minimal distinct-jobs --runs 50000     # one-shot jobs due at one instant

Every figure of bench.hotpath_suite is a ratio to one of these, run on the same server in the
same sitting. Plain psycopg, no duetime code; the same figures as the duetime scenarios:

- tables: ``jobs`` (id, tenant, queue, priority, ``next_fire_at``), ``runs`` (the columns a
  queue needs: id, job, tenant, queue, priority, ``scheduled_for``, ``available_at``, state,
  fencing token, attempt, lease owner and expiry, ``claimed_at``, ``finished_at``) with a
  ready index ``(priority DESC, available_at) WHERE state = 'scheduled'``, a lease index and
  the unique ``(job_id, scheduled_for)``; ``attempts`` keyed by ``(run_id, token)``.
- workers: ``--workers`` processes (2, like the suite's duetime workers), each claiming batches
  of ``--batch`` with ``FOR UPDATE SKIP LOCKED`` (lease owner, new token, ``claimed_at``), then
  completing the batch in one statement fenced by (id, token, state, lease owner) that also
  inserts one attempt row per run. The "task" is a no-op. An idle worker asks again after
  :data:`IDLE_S`.
- ``uniform``: N runs of one job inserted in one statement while the workers are idle (all
  with one tenant, queue, priority and instant, as bench.burndown's uniform mix).
- ``distinct-jobs``: N one-shot jobs (one tenant, queue and priority, as a new user would
  register them with duetime's defaults) due at one instant a few seconds after the processes
  are up; one scheduler process turns due jobs into runs in batches of :data:`FIRE_BATCH`
  (``FOR UPDATE SKIP LOCKED`` on the jobs, one statement clears ``next_fire_at`` and inserts
  the runs), with no lookahead.

runs/s = succeeded runs / (last ``finished_at`` − the start), the start being the first claim
(``uniform``) or the earlier of the due instant and the first claim (``distinct-jobs``). CPU:
the worker and scheduler processes (``/proc``) and the PostgreSQL backends serving them
(``bench._common.BackendMeter``), from the insert's commit to the end; the insert itself is not
in it. Exits non-zero with the reason when a step fails.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench._common import (
    BENCH_TAG,
    BackendMeter,
    BenchError,
    CpuMeter,
    Spread,
    base_parser,
    check_alive,
    create_database,
    drop_database,
    guarded_main,
    measured_env,
    report,
    spawn,
    stop_all,
    wait_for,
)
from bench.burndown import cpu_text

SCENARIOS = ("uniform", "distinct-jobs")
IDLE_S = 0.005
"""Seconds an idle worker or scheduler waits before asking again."""
FIRE_BATCH = 1000
"""Due jobs the minimal scheduler turns into runs per statement."""
LEAD_S = 3.0
"""Seconds between the processes being up and the distinct jobs' instant."""
LIFETIME_S = 3600.0
"""A worker or scheduler process exits on its own after this long (bounded if orphaned)."""

SCHEMA = """
CREATE TABLE jobs (
    id           bigint PRIMARY KEY,
    tenant       text NOT NULL,
    queue        text NOT NULL,
    priority     integer NOT NULL,
    next_fire_at timestamptz
);
CREATE INDEX jobs_due ON jobs (next_fire_at) WHERE next_fire_at IS NOT NULL;
CREATE TABLE runs (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    job_id           bigint NOT NULL,
    tenant           text NOT NULL,
    queue            text NOT NULL,
    priority         integer NOT NULL,
    scheduled_for    timestamptz NOT NULL,
    available_at     timestamptz NOT NULL,
    state            text NOT NULL DEFAULT 'scheduled',
    token            bigint NOT NULL DEFAULT 0,
    attempt          integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    claimed_at       timestamptz,
    finished_at      timestamptz
);
CREATE INDEX runs_ready ON runs (priority DESC, available_at) WHERE state = 'scheduled';
CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE state = 'running';
CREATE UNIQUE INDEX runs_occurrence ON runs (job_id, scheduled_for);
CREATE TABLE attempts (
    run_id      uuid NOT NULL,
    token       bigint NOT NULL,
    number      integer NOT NULL,
    worker_id   text NOT NULL,
    claimed_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome     text NOT NULL,
    PRIMARY KEY (run_id, token)
);
"""

CLAIM = """
UPDATE runs r SET state = 'running', token = r.token + 1, attempt = r.attempt + 1,
    lease_owner = %(worker)s, lease_expires_at = now() + interval '30 seconds',
    claimed_at = clock_timestamp()
FROM (
    SELECT id FROM runs WHERE state = 'scheduled' AND available_at <= now()
    ORDER BY priority DESC, available_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
) c
WHERE r.id = c.id
RETURNING r.id, r.token
"""

COMPLETE = """
WITH done AS (
    UPDATE runs r SET state = 'succeeded', finished_at = clock_timestamp(),
        lease_owner = NULL, lease_expires_at = NULL
    FROM unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS d(id, token)
    WHERE r.id = d.id AND r.token = d.token AND r.state = 'running'
      AND r.lease_owner = %(worker)s
    RETURNING r.id, r.token, r.attempt, r.claimed_at, r.finished_at
)
INSERT INTO attempts (run_id, token, number, worker_id, claimed_at, finished_at, outcome)
SELECT id, token, attempt, %(worker)s, claimed_at, finished_at, 'succeeded' FROM done
"""

FIRE = """
WITH due AS (
    SELECT id, next_fire_at FROM jobs WHERE next_fire_at <= now()
    ORDER BY next_fire_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), fired AS (
    UPDATE jobs j SET next_fire_at = NULL FROM due WHERE j.id = due.id
    RETURNING j.id, j.tenant, j.queue, j.priority, due.next_fire_at AS at
)
INSERT INTO runs (job_id, tenant, queue, priority, scheduled_for, available_at)
SELECT id, tenant, queue, priority, at, at FROM fired
ON CONFLICT (job_id, scheduled_for) DO NOTHING
"""


class _Stop:
    """Set by SIGTERM: a worker or scheduler finishes the statement it is in, then exits."""

    stopped = False

    def __init__(self) -> None:
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, signum: int, frame: object) -> None:
        self.stopped = True


def work(url: str, worker: str, batch: int) -> None:
    """A worker process: claim a batch, complete it in one fenced statement, until SIGTERM
    (or :data:`LIFETIME_S`). Exits 2 if a completion was refused by its fencing."""
    stop = _Stop()
    deadline = time.monotonic() + LIFETIME_S
    with psycopg.connect(url, autocommit=True) as conn:
        claim = {"worker": worker, "limit": batch}
        while not stop.stopped and time.monotonic() < deadline:
            rows = conn.execute(CLAIM, claim).fetchall()
            if not rows:
                time.sleep(IDLE_S)
                continue
            done = conn.execute(
                COMPLETE,
                {"worker": worker, "ids": [r[0] for r in rows], "tokens": [r[1] for r in rows]},
            )
            if done.rowcount != len(rows):
                sys.exit(f"{worker}: {len(rows) - done.rowcount} completions refused (fencing)")


def schedule(url: str) -> None:
    """The scheduler process: turn due jobs into runs, until SIGTERM (or :data:`LIFETIME_S`)."""
    stop = _Stop()
    deadline = time.monotonic() + LIFETIME_S
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.stopped and time.monotonic() < deadline:
            if conn.execute(FIRE, {"limit": FIRE_BATCH}).rowcount == 0:
                time.sleep(IDLE_S)


SETTLED = (
    f"{BENCH_TAG} SELECT EXISTS (SELECT 1 FROM jobs WHERE next_fire_at IS NOT NULL) "
    "OR EXISTS (SELECT 1 FROM runs WHERE state = 'scheduled') "
    "OR EXISTS (SELECT 1 FROM runs WHERE state = 'running')"
)
"""The benchmark's own question, once a second: is anything left? (index probes, LIMIT 1)"""


def minimal(
    scenario: str, runs: int, *, workers: int = 2, batch: int = 500, timeout: float = 600.0
) -> dict[str, Any]:
    """One run of a minimal script in a fresh database; its figures. Raises
    :class:`BenchError` when a step fails."""
    if scenario not in SCENARIOS:
        raise BenchError(f"unknown minimal scenario {scenario!r}: one of {', '.join(SCENARIOS)}")
    url = create_database("minimal")
    procs = []
    meter: BackendMeter | None = None
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA)
            if scenario == "distinct-jobs":
                conn.execute(
                    "INSERT INTO jobs SELECT g, 'default', 'default', 0, "
                    "now() + interval '1 day' FROM generate_series(1, %s) g",
                    (runs,),
                )
                conn.execute("VACUUM ANALYZE jobs")
        env = measured_env()
        me = [sys.executable, "-m", "bench.minimal"]
        procs = [
            spawn([*me, "work", url, "--worker-id", f"w{i}", "--batch", str(batch)], env)
            for i in range(workers)
        ]
        if scenario == "distinct-jobs":
            procs.append(spawn([*me, "schedule", url], env))
        meter = BackendMeter(url)
        conn = meter.conn
        ready = meter.connected_count
        wait_for("the minimal script's processes", lambda: ready() >= len(procs), 60, 0.1,
                 lambda: check_alive(procs, "a minimal-script process"))  # fmt: skip
        cpu: list[CpuMeter] = []

        def start() -> None:
            meter.start()
            cpu.append(CpuMeter([p.pid for p in procs]))

        due: datetime | None = None
        with psycopg.connect(url) as tx:
            if scenario == "uniform":
                tx.execute(
                    "INSERT INTO runs (job_id, tenant, queue, priority, scheduled_for, "
                    "available_at) SELECT g, 'default', 'default', 0, now(), now() "
                    "FROM generate_series(1, %s) g",
                    (runs,),
                )
            else:
                due = datetime.now(UTC) + timedelta(seconds=LEAD_S)
                tx.execute("UPDATE jobs SET next_fire_at = %s", (due,))
            start()
            tx.commit()

        def settled() -> bool:
            row = conn.execute(SETTLED).fetchone()
            return row is not None and not row[0]

        def tick() -> None:
            check_alive(procs, "a minimal-script process")
            meter.sample()

        wait_for(f"minimal {scenario} of {runs:,} runs", settled, timeout, 1.0, tick)
        used = cpu[0].stop()
        db = meter.stop()
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), (SELECT count(*) FROM attempts), "
            "extract(epoch FROM max(finished_at) - least(min(claimed_at), %s)) FROM runs",
            (due,),
        ).fetchone()
        assert row is not None
        succeeded, attempts, span = int(row[0]), int(row[1]), float(row[2] or 0.0)
        errors = stop_all(procs)
        procs = []
        if errors:
            raise BenchError("minimal script process failed: " + " | ".join(errors))
        if succeeded != runs or attempts != runs or span <= 0:
            raise BenchError(
                f"minimal {scenario}: expected {runs} succeeded runs, got {succeeded} "
                f"({attempts} attempts, span {span:.3f} s)"
            )
        return {
            "scenario": scenario,
            "runs": runs,
            "workers": workers,
            "batch": batch,
            "runs_per_s": runs / span,
            "span_s": span,
            **per_run(used, db, runs),
        }
    finally:
        stop_all(procs)
        if meter is not None:
            meter.close()
        drop_database(url)


def per_run(used: dict[str, float], db: dict[str, float], runs: int) -> dict[str, float]:
    """The CPU figures per run, keyed as bench.burndown keys them: from a ``CpuMeter`` of the
    processes (``used``) and a ``BackendMeter`` (``db``)."""
    out = {
        "worker_cpu_us_per_run": used["app_cpu_s"] / runs * 1e6,
        "server_cpu_us_per_run": used["pg_cpu_s"] / runs * 1e6,
        "pg_cpu_us_per_run": db["backend_cpu_s"] / runs * 1e6,
    }
    if "statements_s" in db:
        out["pg_statements_us_per_run"] = db["statements_s"] / runs * 1e6
        out["wal_bytes_per_run"] = db["wal_bytes"] / runs
        out["buffers_per_run"] = db["buffers"] / runs
    return out


def describe(r: dict[str, Any]) -> str:
    return (
        f"minimal {r['scenario']} ({r['workers']} workers, batch {r['batch']}) N={r['runs']}: "
        f"{r['runs_per_s']:,.0f} runs/s; {cpu_text([r], 'process')}"
    )


def _process(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.minimal")
    parser.add_argument("role", choices=["work", "schedule"])
    parser.add_argument("url")
    parser.add_argument("--worker-id", default="w0")
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    if args.role == "work":
        work(args.url, args.worker_id, args.batch)
    else:
        schedule(args.url)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=SCENARIOS)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    if args.runs < 1 or args.repeat < 1 or args.workers < 1 or args.batch < 1:
        raise BenchError("--runs, --repeat, --workers and --batch must be at least 1")
    results = []
    for _ in range(args.repeat):
        r = minimal(args.scenario, args.runs, workers=args.workers, batch=args.batch,
                    timeout=args.timeout)  # fmt: skip
        print("  " + describe(r), flush=True)
        results.append(r)
    rate = Spread.of([r["runs_per_s"] for r in results])
    lines = [f"minimal {args.scenario} N={args.runs:,}: {rate.show()} runs/s"]
    report(f"minimal script ({args.scenario})", lines, record=args.record)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("work", "schedule"):
        _process(sys.argv[1:])
    else:
        guarded_main(main)
