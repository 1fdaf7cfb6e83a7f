"""What the benchmarks measure, on real databases (no worker processes, no timing thresholds).

- the burn-down's span starts at the first claim of a measured run, never at the template's;
- the clone insert commits only after the measurement started (the insert is outside it,
  every claim of a clone inside it);
- the realistic mix spreads runs over tenants, queues, priorities and distinct instants;
- the PostgreSQL CPU meter counts the measured processes' backends, including one that
  connects and leaves during the window, and never the benchmark's own connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from bench._common import WORKER_APP_NAME, BackendMeter, create_database, drop_database
from bench.burndown import MIX_PRIORITIES, MIX_QUEUES, MIX_TENANTS, Database, _figures, _seed

STORES = [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
HEAVY = "SELECT count(*) FROM generate_series(1, 3000000)"
"""A statement that keeps a backend on the CPU for a while (well over one clock tick)."""


@pytest.fixture(scope="module", params=STORES)
def seeded(request: pytest.FixtureRequest) -> Iterator[tuple[Database, str]]:
    """A migrated benchmark database per store, seeded once for this module (the template run
    and the realistic mix's jobs); each test starts with the template as its only run."""
    if request.param == "postgres":
        request.getfixturevalue("pg_database")  # skips (or fails under CI) without a server
    database = Database(request.param)
    try:
        template, _ = asyncio.run(_seed(database.url, "noop", "realistic"))
        yield database, template
    finally:
        database.drop()


@pytest.fixture
def db(seeded: tuple[Database, str]) -> Database:
    database, template = seeded
    database.query("DELETE FROM attempts")
    database.query("DELETE FROM runs WHERE id <> ?", (template,))
    return database


def _template(db: Database) -> str:
    return str(db.query("SELECT id FROM runs")[0][0])


def _stamp(db: Database, run_id: str, claimed: datetime, finished: datetime) -> None:
    """Mark a run succeeded with these instants (each store's own representation)."""
    if db.store == "postgres":
        values: tuple[object, ...] = (claimed, finished, run_id)
    else:
        values = (int(claimed.timestamp() * 1e6), int(finished.timestamp() * 1e6), run_id)
    db.query(
        "UPDATE runs SET state = 'succeeded', claimed_at = ?, finished_at = ? WHERE id = ?", values
    )


def test_span_starts_at_the_first_claim_of_a_measured_run(db: Database) -> None:
    template = _template(db)
    db.clone_runs(template, 5)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    # the template ran an hour before the measured runs existed
    _stamp(db, template, t0 - timedelta(hours=1), t0 - timedelta(hours=1) + timedelta(seconds=1))
    clones = [r[0] for r in db.query("SELECT id FROM runs WHERE id <> ? ORDER BY id", (template,))]
    assert len(clones) == 5
    for i, run_id in enumerate(clones):
        claimed = t0 + timedelta(seconds=i)
        _stamp(db, str(run_id), claimed, claimed + timedelta(seconds=0.5))

    succeeded, _, span = _figures(db)

    assert succeeded == 5
    assert span == pytest.approx(4.5)


def test_the_clones_commit_after_the_measurement_started(db: Database) -> None:
    template = _template(db)
    seen_at_start: list[int] = []

    def start() -> None:  # what the burn-down does here: open its CPU window
        seen_at_start.append(db.query("SELECT count(*) FROM runs WHERE id <> ?", (template,))[0][0])

    db.clone_runs(template, 50, before_commit=start)

    assert seen_at_start == [0]  # the insert ran, uncommitted: no worker could claim a clone yet
    assert db.query("SELECT count(*) FROM runs WHERE id <> ?", (template,))[0][0] == 50


def test_the_realistic_mix_spreads_runs_over_tenants_queues_priorities_and_instants(
    db: Database,
) -> None:
    template = _template(db)
    db.clone_runs(template, 600, mix="realistic")

    row = db.query(
        "SELECT count(*), count(DISTINCT tenant), count(DISTINCT queue), count(DISTINCT priority),"
        " count(DISTINCT available_at), count(DISTINCT job_id), "
        "sum(CASE WHEN scheduled_for = available_at THEN 1 ELSE 0 END) FROM runs WHERE id <> ?",
        (template,),
    )[0]
    assert tuple(row) == (600, MIX_TENANTS, MIX_QUEUES, len(MIX_PRIORITIES), 600, 300, 600)
    # every run is its job's: same tenant, queue and priority
    mismatched = db.query(
        "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id <> ? AND "
        "(r.tenant <> j.tenant OR r.queue <> j.queue OR r.priority <> j.priority)",
        (template,),
    )
    assert mismatched[0][0] == 0


def test_the_uniform_mix_is_one_job_tenant_queue_priority_and_instant(db: Database) -> None:
    template = _template(db)
    db.clone_runs(template, 100)

    row = db.query(
        "SELECT count(DISTINCT tenant), count(DISTINCT queue), count(DISTINCT priority), "
        "count(DISTINCT available_at), count(DISTINCT job_id) FROM runs WHERE id <> ?",
        (template,),
    )[0]
    assert tuple(row) == (1, 1, 1, 1, 1)


@pytest.mark.postgres
def test_the_backend_meter_counts_only_the_measured_backends(pg_database: str) -> None:
    url = create_database("meter")
    meter = BackendMeter(url)
    try:
        with psycopg.connect(url, autocommit=True, application_name=WORKER_APP_NAME) as measured:
            measured_pid = measured.info.backend_pid
            meter.start()
            measured.execute(HEAVY)
            meter.conn.execute(HEAVY)  # the benchmark's own work: not counted
            with psycopg.connect(
                url, autocommit=True, application_name=WORKER_APP_NAME
            ) as late:  # connects during the window, leaves before its end
                late_pid = late.info.backend_pid
                late.execute(HEAVY)
                meter.sample()
            figures = meter.stop()
        assert set(meter.last) == {measured_pid, late_pid}
        assert meter.conn.info.backend_pid not in meter.last
        assert figures["backends"] == 2
        assert meter.last[late_pid] - meter.base[late_pid] > 0  # counted to its last reading
        assert meter.last[measured_pid] - meter.base[measured_pid] > 0
        assert figures["backend_cpu_s"] > 0
    finally:
        meter.close()
        drop_database(url)
