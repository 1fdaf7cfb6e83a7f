"""Every duetime role through a real PgBouncer in transaction pooling mode
(docs/howto/pgbouncer.md): migrations, registration, triggers (the app's and the caller's own
transaction), the scheduler role's loops and its materializer, a real worker claiming and
completing, a workflow, notifications from a direct listen URL or polling without one,
connections bounded per store, no cancel requests.

The PgBouncer here (tests/pgbouncer_kit.py) has two server connections per database: every
client's transactions share them, so a prepared statement or session setting one client left
on a server session would meet the next client's statements.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from duetime import AsyncApp, RunContext
from duetime._config import Settings
from duetime._types import RunState
from duetime.errors import ValidationError
from duetime.store import SCHEMA_VERSION, Pooling, create_store
from duetime.store.base import Store
from duetime.testing import FrozenApp, FrozenClock, drain
from duetime.worker.worker import Worker
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState
from tests.conftest import make_pg_schema, pgbouncer_alias
from tests.pgbouncer_kit import PgBouncer, pgbouncer_binary
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.pgbouncer]

SERVER_CONNECTIONS = 2
FAST = {
    "lease_ttl": 5.0,
    "heartbeat_interval": 0.2,
    "worker_poll_interval": 0.05,
    "worker_lookahead": 0.2,
    "shutdown_grace": 2.0,
}
FAR = timedelta(days=365)


@pytest.fixture(scope="module")
def bouncer(pg_database: str) -> Iterator[PgBouncer]:
    if pgbouncer_binary() is None:
        from tests.conftest import _unavailable

        _unavailable("pgbouncer is not installed (apt-get install -y pgbouncer)")
    started = PgBouncer(pg_database, pool_size=SERVER_CONNECTIONS)
    try:
        yield started
    finally:
        started.stop()


class Database:
    """One fresh schema: its direct URL and its URL through PgBouncer."""

    def __init__(self, direct: str, through: str) -> None:
        self.direct = direct
        self.through = through

    def settings(self, *, listen: bool = True, **overrides: Any) -> Settings:
        return Settings(
            database_url=self.through,
            pgbouncer="transaction",
            listen_url=self.direct if listen else "",
            database_pool_size=4,
            **{**FAST, **overrides},
        )


@pytest.fixture
def db(bouncer: PgBouncer, pg_database: str) -> Database:
    direct = make_pg_schema(pg_database)
    return Database(direct, pgbouncer_alias(bouncer, direct))


@pytest.fixture
async def app(db: Database) -> AsyncIterator[AsyncApp]:
    opened = await AsyncApp(settings=db.settings(), migrate=True).open()
    yield opened
    await opened.close()


async def _serve_until(app: AsyncApp, done: asyncio.Event) -> None:
    """A real worker of ``app`` until ``done`` is set (bounded: a test fails, never hangs)."""
    worker = Worker(app.store, app.registry, app.settings, tasks=sorted(app.registry.names()))
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.wait_for(done.wait(), 60)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_migrations_run_through_pgbouncer(app: AsyncApp) -> None:
    assert await app.store.schema_version() == SCHEMA_VERSION
    await app.store.check_schema()
    assert await app.migrate() == SCHEMA_VERSION  # again: nothing to do, same answer


async def test_a_scheduled_job_and_triggers_are_claimed_and_completed(
    app: AsyncApp, db: Database
) -> None:
    seen: list[Any] = []
    done = asyncio.Event()

    @app.task("bouncer.record")
    async def record(ctx: RunContext, payload: Any) -> str:
        seen.append(payload)
        if len(seen) == 12:
            done.set()
        return "ok"

    job = await app.schedule("record", task="bouncer.record", at=FAR, overlap="allow")
    for i in range(10):  # the same statements many times: psycopg would prepare them
        await app.trigger(job.id, payload=i)
    # the caller's own transaction through PgBouncer (transactional enqueue)
    own = await psycopg.AsyncConnection.connect(db.through, prepare_threshold=None)
    async with own, own.transaction():
        await app.trigger(job.id, payload="enlisted", connection=own)
    # the scheduler's materializer: a one-shot job due now
    await app.schedule("soon", task="bouncer.record", now=True, payload="materialized")
    await app.materializer().run_once()

    await _serve_until(app, done)

    assert sorted(map(str, seen)) == sorted([*map(str, range(10)), "enlisted", "materialized"])
    runs = (await app.runs(job.id, limit=100)).items
    assert len(runs) == 11
    assert {r.state for r in runs} == {RunState.SUCCEEDED}
    for run in runs:
        assert [a.outcome.value for a in await app.attempts(run.id)] == ["succeeded"]


async def test_the_scheduler_role_and_a_worker_role_run_through_pgbouncer(db: Database) -> None:
    """Two processes' worth: the scheduler role's loops (presence, partition leases, leader
    election, leader-only maintenance, the materializer) and a worker, each with its own app."""
    scheduler = await AsyncApp(settings=db.settings(), migrate=True).open()
    worker = await AsyncApp(settings=db.settings()).open()
    stop = asyncio.Event()
    loops = asyncio.create_task(scheduler.run_scheduler(stop))
    try:
        done = asyncio.Event()

        @worker.task("roles.tick")
        async def tick(ctx: RunContext) -> None:
            done.set()

        await worker.schedule("tick", task="roles.tick", now=True)
        await _serve_until(worker, done)  # materialized by the scheduler role, run here

        async def led() -> bool:
            nodes, leader = await scheduler.monitoring.nodes()
            return leader is not None and any(n.id == leader.node_id for n in nodes)

        assert await eventually(led, what="a leader elected through PgBouncer")
    finally:
        stop.set()
        await asyncio.wait_for(loops, 30)
        await worker.close()
        await scheduler.close()


async def test_workers_hear_new_runs_from_the_listen_url(
    app: AsyncApp, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="duetime.store")
    other = await AsyncApp(settings=db.settings()).open()
    try:
        said = [r.getMessage() for r in caplog.records if "PgBouncer" in r.getMessage()]
        assert said
        assert "notifications from a direct connection" in said[-1]

        @other.task("bouncer.none")
        async def none(ctx: RunContext) -> None:
            return None

        job = await other.schedule("heard", task="bouncer.none", at=FAR)
        await app.store.wait_for_runs(0.01)  # starts listening; the first wake is the start's
        while await app.store.wait_for_runs(0.01):
            pass
        waiting = asyncio.create_task(app.store.wait_for_runs(60))
        await other.trigger(job.id)
        assert await waiting, "the NOTIFY of the trigger did not arrive"
        # API key news is heard on the listen URL too: the epoch becomes a number
        assert await eventually(lambda: _epoch(app.store), what="the API key listener")
    finally:
        await other.close()


async def _epoch(store: Store) -> bool:
    return store.api_keys_epoch() is not None


async def test_without_a_listen_url_the_store_polls_and_says_so(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="duetime.store")
    app = await AsyncApp(settings=db.settings(listen=False), migrate=True).open()
    try:
        said = [r.getMessage() for r in caplog.records if "PgBouncer" in r.getMessage()]
        assert said
        assert "polling" in said[-1]
        done = asyncio.Event()

        @app.task("bouncer.poll")
        async def poll(ctx: RunContext) -> None:
            done.set()

        job = await app.schedule("polled", task="bouncer.poll", at=FAR)
        await app.trigger(job.id)
        assert await app.store.wait_for_runs(0.01) is False, "nothing can be heard"
        assert app.store.api_keys_epoch() is None, "API keys are read on every request"
        await _serve_until(app, done)  # the worker found the run by polling
        [run] = (await app.runs(job.id)).items
        assert await eventually(lambda: _succeeded(app, run.id), what="the polled run to succeed")
    finally:
        await app.close()


async def _succeeded(app: AsyncApp, run_id: Any) -> bool:
    return (await app.run(run_id)).state is RunState.SUCCEEDED


async def test_a_workflow_runs_through_pgbouncer(db: Database, clock: FrozenClock) -> None:
    async with FrozenApp(db.through, clock=clock, settings=db.settings()) as app:

        @app.task("wf.extract")
        async def extract(ctx: RunContext) -> dict[str, int]:
            return {"rows": 3}

        @app.task("wf.load")
        async def load(ctx: RunContext) -> int:
            return int(ctx.parents["extract"]["rows"]) * 10

        flow = Workflow("bounced")
        first = flow.step("extract", task="wf.extract")
        flow.step("load", task="wf.load", after=first)
        await app.workflows.register(flow)
        job = await app.schedule(
            "run-bounced", target={"type": "workflow", "name": "bounced"}, now=True
        )
        await drain(app)

        [instance] = await app.workflows.instances(job=job.id)
        assert instance.state is InstanceState.SUCCEEDED, instance.reason
        steps = await app.workflows.steps(instance.id)
        assert {s.step: s.result for s in steps} == {"extract": {"rows": 3}, "load": 30}


async def test_sessions_keep_utc_whatever_other_clients_set(app: AsyncApp, db: Database) -> None:
    """The time zone is the one setting a store's connections keep: PgBouncer tracks it per
    client, so another client's zone on the shared server sessions never shows."""
    async with await psycopg.AsyncConnection.connect(
        db.through, autocommit=True, prepare_threshold=None
    ) as other:
        await other.execute("SET TimeZone = 'Asia/Tokyo'")
        for _ in range(SERVER_CONNECTIONS * 3):
            now = await app.store.db_now()
            assert now.utcoffset() == timedelta(0)
            cursor = await other.execute("SELECT current_setting('TimeZone')")
            assert await cursor.fetchone() == ("Asia/Tokyo",)


async def test_a_store_opens_at_most_its_pool_size_through_pgbouncer(
    bouncer: PgBouncer, db: Database, pg_database: str
) -> None:
    # a database name of its own in PgBouncer: its clients are this store's connections
    schema = db.direct.rsplit("search_path%3D", 1)[1]
    solo = bouncer.alias(f"solo_{schema}", dbname=pg_database.rsplit("/", 1)[1], schema=schema)
    store = create_store(solo, pooling=Pooling("transaction", db.direct, pool_size=3))
    await store.open()
    try:
        await store.migrate()
        await asyncio.gather(*(store.db_now() for _ in range(50)))
        with psycopg.connect(bouncer.url("pgbouncer"), autocommit=True) as admin:
            cursor = admin.execute("SHOW CLIENTS")
            names = [d.name for d in cursor.description or []]
            clients = cursor.fetchall()
        ours = [c for c in clients if c[names.index("database")] == f"solo_{schema}"]
        assert 1 <= len(ours) <= 3, ours  # the listeners are direct, not through PgBouncer
    finally:
        await store.close()


def test_an_unknown_pgbouncer_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="pgbouncer"):
        Settings(pgbouncer="statement")
    with pytest.raises(ValidationError, match="pgbouncer"):
        Pooling("statement")
    with pytest.raises(ValidationError, match="listen_url"):
        Pooling("transaction", "127.0.0.1:5432")
    with pytest.raises(ValidationError, match="database_pool_size"):
        Settings(database_pool_size=0)


async def test_jit_left_on_for_the_role_is_warned_about(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """Through transaction pooling the store cannot turn jit off for its sessions: the role
    must; opening says so when it has not."""
    with psycopg.connect(db.direct) as direct:
        row = direct.execute("SELECT current_setting('jit')").fetchone()
    store = create_store(db.through, pooling=Pooling("transaction", db.direct))
    await store.open()
    await store.close()
    warned = any("jit is on" in r.getMessage() for r in caplog.records)
    assert warned == (row == ("on",))


async def test_a_statement_interrupted_through_pgbouncer_sends_no_cancel_request(
    bouncer: PgBouncer, db: Database
) -> None:
    """PgBouncer 1.18 can exit on a cancel request (store/postgres/uncancelled.py): a task
    cancelled in the middle of a statement waits for it to end instead of cancelling it."""
    store = create_store(db.through, pooling=Pooling("transaction", db.direct))
    await store.open()
    try:
        marker = f"interrupted_{id(store)}"

        async def sleeper() -> None:
            async with store._read() as conn:  # type: ignore[attr-defined]
                await conn.execute(f"SELECT pg_sleep(0.5) AS {marker}")

        task = asyncio.create_task(sleeper())

        async def running() -> bool:
            async with await psycopg.AsyncConnection.connect(db.direct) as direct:
                cursor = await direct.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE query LIKE %s AND state = 'active'",
                    (f"%AS {marker}",),
                )
                row = await cursor.fetchone()
                return row is not None and row[0] > 0

        await eventually(running, what="the statement to run")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "cancel request" not in bouncer.log()
        assert await store.db_now() is not None  # the pool goes on
    finally:
        await store.close()
