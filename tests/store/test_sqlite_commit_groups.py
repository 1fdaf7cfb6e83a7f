"""SQLite's group commit (store/sqlite/commit_groups.py, decision 0039): the write calls of one
process that meet at the connection share one transaction and one commit; each answers only
once the commit is done; a joined call that fails is rolled back alone."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from storekit import claim, completion, job_params, running_run, s, scheduled_run

from duetime._clock import FrozenClock
from duetime._types import RunState
from duetime.store.base import RunsCompleteParams, RunsStartParams
from duetime.store.sqlite.commit_groups import CommitGroups
from duetime.store.sqlite.store import SQLiteStore


@pytest.fixture
async def sqlite(tmp_path: Path, t0: datetime) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(str(tmp_path / "d.db"), clock=FrozenClock(t0))
    await store.open()
    await store.migrate()
    yield store
    await store.close()


async def _trace(store: SQLiteStore) -> list[str]:
    """Every statement the store's connection runs from now on (its first word or two)."""
    seen: list[str] = []

    def note(statement: str) -> None:
        words = statement.split()
        seen.append(" ".join(words[:2]) if words[0] in ("BEGIN", "ROLLBACK") else words[0])

    await store.conn.set_trace_callback(note)
    return seen


async def _leading(
    store: SQLiteStore, job: str, at: datetime
) -> tuple[asyncio.Task[None], asyncio.Event]:
    """A transaction that inserts the job ``job``, then holds its group open: the write calls
    made meanwhile wait to join it. Returns once it holds the group: its task, and the event
    that lets it end (and commit)."""
    hold, joined = asyncio.Event(), asyncio.Event()

    async def leader() -> None:
        async with store.transaction() as tx:
            await tx.job_insert(job_params(job, next_fire_at=at))
            joined.set()
            await hold.wait()

    leading = asyncio.create_task(leader())
    await joined.wait()
    return leading, hold


def _state(path: str, run_id: Any) -> str:
    """The run's state as another connection sees it (what was committed)."""
    with sqlite3.connect(path) as other:
        row = other.execute("SELECT state FROM runs WHERE id = ?", (str(run_id),)).fetchone()
    return str(row[0])


async def test_a_start_a_completion_and_a_claim_that_meet_share_one_commit(
    sqlite: SQLiteStore, t0: datetime
) -> None:
    ahead = await scheduled_run(sqlite, t0 + s(5), "ahead")
    [held] = await claim(sqlite, t0, lookahead=10.0)  # claimed ahead: its start comes later
    assert held.run.id == ahead.id
    assert held.run.started_at is None
    done = await running_run(sqlite, t0, "done")
    due = await scheduled_run(sqlite, t0, "due")
    seen = await _trace(sqlite)
    answered: list[str] = []

    async def call(name: str, work: Any) -> Any:
        result = await work
        answered.append(f"{name} answered after {seen.count('COMMIT')} commits")
        return result

    started, applied, claimed = await asyncio.gather(
        call("start", sqlite.runs_start(RunsStartParams([(held.run.id, held.run.token)]))),
        call("complete", sqlite.runs_complete(RunsCompleteParams([completion(done)], now=t0))),
        call("claim", claim(sqlite, t0)),
    )

    assert started == {held.run.id}
    assert applied == [True]
    assert [c.run.id for c in claimed] == [due.id]
    # one BEGIN and one COMMIT for the three calls (each its own transaction: three of each);
    # the two that joined ran in savepoints
    assert seen.count("BEGIN IMMEDIATE") == 1
    assert seen.count("COMMIT") == 1
    assert seen.count("SAVEPOINT") == seen.count("RELEASE") == 2
    # no call answered before the commit that made its writes durable
    assert sorted(answered) == [
        f"{n} answered after 1 commits" for n in ("claim", "complete", "start")
    ]
    for run_id, state in (
        (held.run.id, "running"),
        (done.run.id, "succeeded"),
        (due.id, "running"),
    ):
        assert _state(sqlite.path, run_id) == state


async def _complete_beside_a_failure(
    sqlite: SQLiteStore, t0: datetime, *, failure_first: bool
) -> list[str]:
    """A completion and a transaction that inserts the job ``never`` and then fails, gathered:
    with ``failure_first`` the failing transaction begins first (and yields once after its
    insert, so the completion comes and waits to join it); else the completion does. Checks
    what holds either way: the completion is applied and committed once, the failure is
    raised to its own caller, the job was never written. Returns the statements traced."""
    done = await running_run(sqlite, t0, "done")
    seen = await _trace(sqlite)

    async def insert_then_fail() -> None:
        async with sqlite.transaction() as tx:
            assert await tx.job_insert(job_params("never", next_fire_at=t0)) is not None
            if failure_first:
                await asyncio.sleep(0)
            raise RuntimeError("the call's own failure")

    completing = sqlite.runs_complete(RunsCompleteParams([completion(done)], now=t0))
    calls = (insert_then_fail(), completing) if failure_first else (completing, insert_then_fail())
    results = await asyncio.gather(*calls, return_exceptions=True)
    failed, applied = results if failure_first else results[::-1]

    assert applied == [True]
    assert isinstance(failed, RuntimeError)
    assert seen.count("COMMIT") == 1
    assert _state(sqlite.path, done.run.id) == "succeeded"
    with sqlite3.connect(sqlite.path) as other:
        assert other.execute("SELECT count(*) FROM jobs WHERE name = 'never'").fetchone() == (0,)
    return seen


async def test_a_joined_call_that_fails_is_rolled_back_alone(
    sqlite: SQLiteStore, t0: datetime
) -> None:
    seen = await _complete_beside_a_failure(sqlite, t0, failure_first=False)

    assert seen.count("ROLLBACK TO") == 1  # its savepoint only


async def test_when_the_leader_fails_the_calls_waiting_to_join_commit_on_their_own(
    sqlite: SQLiteStore, t0: datetime
) -> None:
    seen = await _complete_beside_a_failure(sqlite, t0, failure_first=True)

    assert seen.count("ROLLBACK") == 1
    assert "SAVEPOINT" not in seen  # the completion led a transaction of its own


async def test_a_call_cancelled_while_waiting_to_join_leaves_the_group_going(
    sqlite: SQLiteStore, t0: datetime
) -> None:
    first = await running_run(sqlite, t0, "first")
    second = await running_run(sqlite, t0, "second")

    def complete(claimed: Any) -> Any:
        return sqlite.runs_complete(RunsCompleteParams([completion(claimed)], now=t0))

    leading, hold = await _leading(sqlite, "kept", t0)
    cancelled = asyncio.create_task(complete(first))
    kept = asyncio.create_task(complete(second))
    await asyncio.sleep(0)  # both are waiting for their turn now
    cancelled.cancel()
    hold.set()
    await asyncio.wait_for(asyncio.gather(leading, kept), 10.0)

    assert cancelled.cancelled()
    assert kept.result() == [True]
    assert _state(sqlite.path, second.run.id) == "succeeded"
    assert _state(sqlite.path, first.run.id) == "running"  # its completion was never written
    with sqlite3.connect(sqlite.path) as other:
        assert other.execute("SELECT count(*) FROM jobs WHERE name = 'kept'").fetchone() == (1,)
    # the store goes on: the cancelled completion, written again, applies
    assert await complete(first) == [True]
    assert (await sqlite.run_get(first.run.tenant, first.run.id)).state is RunState.SUCCEEDED


async def test_closing_the_store_while_a_call_waits_to_join_answers_every_call(
    sqlite: SQLiteStore, t0: datetime
) -> None:
    done = await running_run(sqlite, t0, "done")
    leading, hold = await _leading(sqlite, "lost", t0)
    waiting = asyncio.create_task(
        sqlite.runs_complete(RunsCompleteParams([completion(done)], now=t0))
    )
    await asyncio.sleep(0)  # it waits for its turn in the leader's group
    await sqlite.close()
    hold.set()
    # each call fails (the connection is gone) instead of the group waiting for ever (holding
    # the process lock, deaf to cancels)
    _, pending = await asyncio.wait((leading, waiting), timeout=10.0)

    assert not pending
    assert isinstance(leading.exception(), Exception)
    assert isinstance(waiting.exception(), Exception)
    assert _state(sqlite.path, done.run.id) == "running"
    with sqlite3.connect(sqlite.path) as other:
        assert other.execute("SELECT count(*) FROM jobs WHERE name = 'lost'").fetchone() == (0,)


async def test_a_part_that_loses_the_transaction_takes_no_later_part_with_it(
    tmp_path: Path,
) -> None:
    """SQLite rolls the whole transaction back on some errors (I/O, memory, an interrupt): the
    parts after it must not run outside any transaction (each savepoint then commits on its
    own) nor be told of the group's failure; every call that answers has its rows written, and
    no call that raised has any."""
    path = str(tmp_path / "g.db")
    conn = await aiosqlite.connect(path, isolation_level=None)
    await conn.execute("CREATE TABLE t (name TEXT)")
    groups = CommitGroups(asyncio.Lock())
    joined, hold = asyncio.Event(), asyncio.Event()

    async def call(name: str) -> None:
        async with groups.write(lambda: conn) as tx:
            await tx.execute("INSERT INTO t VALUES (?)", (name,))
            if name == "leader":
                joined.set()
                await hold.wait()
            if name == "losing":
                await tx.execute("ROLLBACK")  # what SQLite does itself on such an error
                raise sqlite3.OperationalError("disk I/O error")

    try:
        calls = [asyncio.create_task(call("leader"))]
        await joined.wait()
        calls += [asyncio.create_task(call(name)) for name in ("losing", "after")]
        await asyncio.sleep(0)  # both are waiting for their turn now
        hold.set()
        answers = await asyncio.gather(*calls, return_exceptions=True)
        with sqlite3.connect(path) as other:
            written = {row[0] for row in other.execute("SELECT name FROM t")}
    finally:
        await conn.close()

    answered = {
        name for name, a in zip(("leader", "losing", "after"), answers, strict=True) if a is None
    }
    assert written == answered, answers


@pytest.mark.parametrize("joined", [False, True])
async def test_a_commit_that_fails_fails_every_part_and_leaves_nothing_open(
    tmp_path: Path, joined: bool
) -> None:
    """A commit refused (here a deferred foreign key, checked at COMMIT): every call of the
    group raises, none of it is written, and no transaction is left open holding the
    database's write lock (nor showing this process's reads what was refused)."""
    path = str(tmp_path / "g.db")
    conn = await aiosqlite.connect(path, isolation_level=None)
    await conn.execute("PRAGMA foreign_keys = ON")
    await conn.execute("CREATE TABLE p (id INTEGER PRIMARY KEY)")
    await conn.execute(
        "CREATE TABLE c (p INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED, name TEXT)"
    )
    groups = CommitGroups(asyncio.Lock())
    ready, hold = asyncio.Event(), asyncio.Event()

    async def call(name: str, parent: int) -> None:
        async with groups.write(lambda: conn) as tx:
            await tx.execute("INSERT INTO c VALUES (?, ?)", (parent, name))
            if name == "leader":
                ready.set()
                await hold.wait()

    try:
        calls = [asyncio.create_task(call("leader", 7))]  # no parent 7: refused at COMMIT
        await ready.wait()
        if joined:
            calls.append(asyncio.create_task(call("joined", 7)))
            await asyncio.sleep(0)  # it waits for its turn now
        hold.set()
        answers = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(a, sqlite3.IntegrityError) for a in answers), answers
        assert not conn.in_transaction
        with sqlite3.connect(path, timeout=0) as other:
            other.execute("BEGIN IMMEDIATE")  # the write lock is free
            assert other.execute("SELECT count(*) FROM c").fetchone() == (0,)
    finally:
        await conn.close()
