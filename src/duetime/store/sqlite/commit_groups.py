"""Group commit for the SQLite store: the write transactions of one process's store calls that
meet at its connection share one ``BEGIN IMMEDIATE`` … ``COMMIT``, so one fsync of the
write-ahead log (``synchronous = FULL``: several milliseconds on a disk) serves them all
(docs/decisions/0039).

Contract of :meth:`CommitGroups.write` (the store's ``_tx``):

- A call that finds no group open *leads* one: it takes the process lock (the one ``_read``
  takes too), begins, and runs its part. The calls that arrive meanwhile *join*: once the
  leader's part is done each runs its own part in a savepoint, one after another in the order
  they came, at most :data:`GROUP_MOST` of them; then the group commits once.
- Every call returns only after the commit: what it wrote is durable when it answers, and it
  raises if the commit failed (then nothing of the group was written).
- A joined part that raises is rolled back to its savepoint; the other parts stand. A leader
  whose part raises rolls the transaction back before anyone joined it; the calls waiting for
  their turn then lead transactions of their own — as do those after a part under which SQLite
  rolled the whole transaction back itself (an I/O error) or the store closed: that group's
  commit fails.
- Isolation is unchanged: the parts run one at a time inside one serializable transaction,
  each seeing the writes of those before it, as if they had committed one by one; other
  connections (other processes) see the whole group or nothing, and the group holds the
  database's write lock as one transaction did.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import aiosqlite

from duetime._aio import uncancellable

GROUP_MOST = 16
"""Calls that join one group at most (a bound on how long the leader's answer and the process
lock's other waiters — reads — wait for a commit)."""

BUSY_RETRIES = 50
"""Tries of ``BEGIN IMMEDIATE`` while another process holds the database's write lock."""

_SAVEPOINT = "duetime_call"

T = TypeVar("T")


@dataclass(eq=False, slots=True)
class _Seat:
    """A call waiting to join: ``turn`` is set True when the transaction is its to use, False
    when the group failed before its turn (it leads its own); it sets ``done`` when its part
    has ended."""

    turn: asyncio.Future[bool]
    done: asyncio.Future[None]


@dataclass(eq=False, slots=True)
class _Group:
    committed: asyncio.Future[None]
    seats: deque[_Seat] = field(default_factory=deque)
    joined: int = 0


class CommitGroups:
    """The write transactions of one store (one connection, one process lock)."""

    def __init__(self, lock: asyncio.Lock, *, most: int = GROUP_MOST) -> None:
        self._lock = lock
        self._most = most
        self._open: _Group | None = None
        self.commits = 0
        """Commits made (each serving one group)."""

    @contextlib.asynccontextmanager
    async def write(
        self, connection: Callable[[], aiosqlite.Connection]
    ) -> AsyncIterator[aiosqlite.Connection]:
        """One call's write transaction, shared with the calls it meets (module docstring)."""
        group = self._open
        if group is not None and group.joined < self._most:
            group.joined += 1
            loop = asyncio.get_running_loop()
            seat = _Seat(loop.create_future(), loop.create_future())
            group.seats.append(seat)
            if await _turn(seat):
                async with _joined(connection, seat, group) as conn:
                    yield conn
                return
        async with self._lock:
            conn = connection()
            # open to joiners from here: calls that come while it begins join it too
            group = self._open = _Group(asyncio.get_running_loop().create_future())
            try:
                if conn.in_transaction:
                    # left open by a holder cancelled mid-statement; it never reported success
                    await asyncio.shield(conn.execute("ROLLBACK"))
                await _begin(conn)
                yield conn
            except BaseException:
                self._open = None  # nobody joins a transaction being rolled back
                for seat in group.seats:  # they lead their own, once this lock is free
                    _settle(seat.turn, False)
                if conn.in_transaction:
                    await asyncio.shield(conn.execute("ROLLBACK"))
                raise
            if not group.seats:  # nobody joined: a lone transaction's commit, no task for it
                self._open = None
                try:
                    await asyncio.shield(conn.execute("COMMIT"))
                except sqlite3.Error:
                    await _abandon(conn)
                    raise
                self.commits += 1
                return
            # joined calls wait on it, and the process lock stays held until it ends
            await uncancellable(self._finish(conn, group), reraise=True)

    async def _finish(self, conn: aiosqlite.Connection, group: _Group) -> None:
        """The leader's part is done: the joined parts in turn, then the one commit."""
        try:
            while group.seats:
                seat = group.seats.popleft()
                if seat.turn.done():  # its caller was cancelled while it waited
                    continue
                if not _in_transaction(conn):
                    # SQLite rolled the whole transaction back under a part (an I/O error, out
                    # of memory), or the store closed: this commit fails, the rest lead
                    # transactions of their own
                    seat.turn.set_result(False)
                    continue
                seat.turn.set_result(True)
                await seat.done
        finally:
            self._open = None
        try:
            await conn.execute("COMMIT")
        except BaseException as exc:
            await _abandon(conn)
            group.committed.set_exception(exc)
            group.committed.exception()  # retrieved: the joined calls raise it themselves
            raise
        self.commits += 1
        group.committed.set_result(None)


async def _begin(conn: aiosqlite.Connection) -> None:
    """``BEGIN IMMEDIATE``, retried with backoff while another process holds the lock."""
    for attempt in range(BUSY_RETRIES):
        try:
            await conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            await asyncio.sleep(min(0.5, 0.01 * 2**attempt))
    raise sqlite3.OperationalError("database stayed locked; gave up")


async def _turn(seat: _Seat) -> bool:
    """Wait until the group's transaction is this call's (True) or the group failed (False).
    Cancelled meanwhile: a turn given already is handed back at once."""
    try:
        return await seat.turn
    except asyncio.CancelledError:
        if seat.turn.done() and not seat.turn.cancelled():
            _settle(seat.done, None)
        raise


@contextlib.asynccontextmanager
async def _joined(
    connection: Callable[[], aiosqlite.Connection], seat: _Seat, group: _Group
) -> AsyncIterator[aiosqlite.Connection]:
    """A joined call's part: in a savepoint, rolled back alone if it raises; its answer waits
    for the group's commit. Its turn ends however it ends (the store closed meanwhile too):
    the group's commit waits for it."""
    try:
        conn = connection()
        await conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            yield conn
        except BaseException:
            await asyncio.shield(_undo(conn))
            raise
        await conn.execute(f"RELEASE {_SAVEPOINT}")
    finally:
        _settle(seat.done, None)
    await asyncio.shield(group.committed)


async def _undo(conn: aiosqlite.Connection) -> None:
    if not _in_transaction(conn):  # SQLite rolled it all back already: the part's error stands
        return
    await conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
    await conn.execute(f"RELEASE {_SAVEPOINT}")


async def _abandon(conn: aiosqlite.Connection) -> None:
    """After a failed ``COMMIT`` (a deferred constraint, a full disk): a transaction SQLite
    left open is rolled back, so it holds no write lock and shows no read what was refused."""
    if _in_transaction(conn):
        with contextlib.suppress(sqlite3.Error):
            await conn.execute("ROLLBACK")


def _in_transaction(conn: aiosqlite.Connection) -> bool:
    """Whether ``conn`` is in a transaction (False once it is closed)."""
    try:
        return conn.in_transaction
    except ValueError:  # aiosqlite: "no active connection"
        return False


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
