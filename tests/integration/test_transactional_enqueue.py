"""Transactional enqueue: ``trigger``/``schedule`` on the caller's own PostgreSQL connection
(psycopg 3 sync and async, SQLAlchemy 2 Session and AsyncSession) write in the caller's
transaction — the run exists exactly when the caller's order does. duetime's tables live in the
app's schema; the caller's connection keeps its own search path (its ``orders`` table lives in
another schema)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

from duetime import App, AsyncApp
from duetime.errors import NotFound, UnsupportedFeature, UsageError
from tests.waiting import signalled

pytestmark = pytest.mark.postgres


def _search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"-csearch_path={schema}"
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture
def shop_url(pg_url: str) -> str:
    """The caller's own schema (``orders``) in duetime's database, with its own search path."""
    schema = f"shop_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL("CREATE TABLE {}.orders (id int PRIMARY KEY)").format(sql.Identifier(schema))
        )
    return _search_path(pg_url, schema)


def _runs(pg_url: str, job: str = "ship") -> int:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.name = %s", (job,)
        ).fetchone()
    return int(row[0]) if row else 0


def _orders(shop_url: str) -> list[int]:
    with psycopg.connect(shop_url) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM orders ORDER BY id").fetchall()]


async def _app(pg_url: str) -> AsyncApp:
    app = AsyncApp(pg_url, migrate=True)
    await app.open()
    await app.schedule("ship", task="duetime.noop", cron="0 0 1 1 *")
    return app


async def test_a_committed_trigger_exists_and_a_rolled_back_one_never_does(
    pg_url: str, shop_url: str
) -> None:
    app = await _app(pg_url)
    try:
        async with await psycopg.AsyncConnection.connect(shop_url) as conn:
            await conn.execute("INSERT INTO orders VALUES (1)")
            run = await app.trigger("ship", payload={"order": 1}, connection=conn)
            # the caller's own names still resolve in its schema after duetime's statements
            await conn.execute("INSERT INTO orders VALUES (2)")
            assert _runs(pg_url) == 0  # not visible before the commit
            await conn.commit()
            assert (await app.run(run.id)).payload == {"order": 1}

            await conn.execute("INSERT INTO orders VALUES (3)")
            await app.trigger("ship", payload={"order": 3}, connection=conn)
            await conn.rollback()
        assert _orders(shop_url) == [1, 2]
        assert _runs(pg_url) == 1
    finally:
        await app.close()


def test_workers_hear_of_a_run_at_the_commit_and_never_of_a_rolled_back_one(
    pg_url: str, shop_url: str
) -> None:
    with App(pg_url, migrate=True) as app, psycopg.connect(pg_url, autocommit=True) as listener:
        app.schedule("ship", task="duetime.noop", cron="0 0 1 1 *")
        listener.execute("LISTEN duetime_runs")
        with psycopg.connect(shop_url) as conn:
            app.trigger("ship", connection=conn)
            conn.rollback()
            app.trigger("ship", connection=conn)
            conn.commit()
        listener.execute("NOTIFY duetime_runs, 'marker'")  # delivered after both, in order
        heard = []
        for note in listener.notifies():
            if note.payload == "marker":
                break
            heard.append(note.payload)
    assert heard == [""]  # the committed run's, once


async def test_a_duetime_error_leaves_the_callers_transaction_usable(
    pg_url: str, shop_url: str
) -> None:
    app = await _app(pg_url)
    try:
        async with await psycopg.AsyncConnection.connect(shop_url) as conn:
            await conn.execute("INSERT INTO orders VALUES (1)")
            with pytest.raises(NotFound):
                await app.trigger("no-such-job", connection=conn)
            await conn.execute("INSERT INTO orders VALUES (2)")
            await conn.commit()
        assert _orders(shop_url) == [1, 2]
    finally:
        await app.close()


async def test_schedule_in_the_callers_transaction(pg_url: str, shop_url: str) -> None:
    app = await _app(pg_url)
    try:
        async with await psycopg.AsyncConnection.connect(shop_url) as conn:
            async with conn.transaction(force_rollback=True):
                await app.schedule("kept", task="duetime.noop", cron="* * * * *", connection=conn)
            async with conn.transaction():
                await app.schedule("made", task="duetime.noop", cron="* * * * *", connection=conn)
        names = {job.name for job in (await app.jobs.find()).items}
        assert names == {"ship", "made"}
    finally:
        await app.close()


async def test_sqlalchemy_async_session(pg_url: str, shop_url: str) -> None:
    app = await _app(pg_url)
    engine = create_async_engine(shop_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        sessions = async_sessionmaker(engine)
        async with sessions() as session:
            await session.execute(text("INSERT INTO orders VALUES (1)"))
            await app.trigger("ship", connection=session)
            await session.commit()
        async with sessions() as session:
            await session.execute(text("INSERT INTO orders VALUES (2)"))
            await app.trigger("ship", connection=session)
            await session.rollback()
        assert _orders(shop_url) == [1]
        assert _runs(pg_url) == 1
    finally:
        await engine.dispose()
        await app.close()


def test_sync_app_with_psycopg_and_a_sqlalchemy_session(pg_url: str, shop_url: str) -> None:
    with App(pg_url, migrate=True) as app:
        app.schedule("ship", task="duetime.noop", cron="0 0 1 1 *")
        with psycopg.connect(shop_url) as conn:
            conn.execute("INSERT INTO orders VALUES (1)")
            app.trigger("ship", connection=conn)
            conn.commit()
            conn.execute("INSERT INTO orders VALUES (2)")
            app.trigger("ship", connection=conn)
            conn.rollback()
        engine = create_engine(shop_url.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            with Session(engine) as session:
                session.execute(text("INSERT INTO orders VALUES (3)"))
                app.trigger("ship", connection=session)
                session.commit()
            with Session(engine) as session:
                session.execute(text("INSERT INTO orders VALUES (4)"))
                app.trigger("ship", connection=session)
                session.rollback()
        finally:
            engine.dispose()
    assert _orders(shop_url) == [1, 3]
    assert _runs(pg_url) == 2


async def test_misuse_is_a_clear_error(pg_url: str, tmp_path: Any) -> None:
    app = await _app(pg_url)
    try:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            with pytest.raises(UsageError, match="autocommit"):
                await app.trigger("ship", connection=conn)
        with pytest.raises(UsageError, match="not a psycopg 3 connection"):
            await app.trigger("ship", connection=object())
    finally:
        await app.close()
    async with AsyncApp(str(tmp_path / "d.db"), migrate=True) as lite:
        await lite.schedule("ship", task="duetime.noop", cron="0 0 1 1 *")
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            with pytest.raises(UnsupportedFeature, match="PostgreSQL"):
                await lite.trigger("ship", connection=conn)


_ENQUEUE = textwrap.dedent(
    """
    import asyncio, sys
    import psycopg
    from duetime import AsyncApp

    async def main(app_url, shop_url, commit):
        async with AsyncApp(app_url) as app:
            async with await psycopg.AsyncConnection.connect(shop_url) as conn:
                await conn.execute("INSERT INTO orders VALUES (1)")
                run = await app.trigger("ship", connection=conn)
                if commit == "commit":
                    await conn.commit()
                print(run.id, flush=True)
                sys.stdin.readline()  # held open until the test kills this process

    asyncio.run(main(*sys.argv[1:]))
    """
)


def _enqueue_and_kill(pg_url: str, shop_url: str, commit: str) -> uuid.UUID:
    """A process that opens a transaction, enqueues, (commits,) and is SIGKILLed."""
    env = {**os.environ, "DUETIME_LOG_FORMAT": "text"}
    child = subprocess.Popen(
        [sys.executable, "-c", _ENQUEUE, pg_url, shop_url, commit],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, "the enqueuing process ended before it enqueued"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    return uuid.UUID(line.strip())


async def test_a_crash_before_commit_leaves_no_run_and_after_commit_a_worker_runs_it(
    pg_url: str, shop_url: str
) -> None:
    app = await _app(pg_url)
    try:
        _enqueue_and_kill(pg_url, shop_url, "no-commit")
        assert _orders(shop_url) == []
        assert _runs(pg_url) == 0

        ran = asyncio.Event()

        @app.task("ship.it")
        async def ship_it(ctx: Any, payload: Any) -> None:
            ran.set()

        await app.schedule("ship", task="ship.it", cron="0 0 1 1 *")
        run_id = await asyncio.to_thread(_enqueue_and_kill, pg_url, shop_url, "commit")
        assert _orders(shop_url) == [1]
        stop = asyncio.Event()
        worker = asyncio.create_task(app.worker().run(stop))
        try:
            await signalled(ran, what="the worker to run the committed run")
        finally:
            stop.set()
            await worker
        run = await app.run(run_id)
        assert run.state.value == "succeeded"
    finally:
        await app.close()
