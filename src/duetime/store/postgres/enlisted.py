"""A PostgreSQL store that writes in the caller's own transaction (transactional enqueue).

:meth:`PostgresStore.enlist` makes one for a connection the caller holds: a psycopg 3
``AsyncConnection`` or ``Connection``, or a SQLAlchemy 2 ``AsyncSession``/``Session`` (or
``AsyncConnection``/``Connection``) on the ``postgresql+psycopg`` driver. Every statement is
the store's own (``store/_sql.py`` over the dialect's ``queries/*.sql``); only the connection
surface differs:

- nothing here commits or rolls back the caller's transaction: a write scope (``_tx``,
  ``_write``) is a SAVEPOINT, released on success and rolled back on an error, so an error
  duetime raises (NotFound, Conflict) leaves the caller's transaction as it was;
- the caller's connection must be inside a transaction (an autocommit connection outside a
  ``transaction()`` block would commit each statement: :class:`UsageError`); a
  non-autocommit connection with none open starts one, as psycopg always does;
- each scope sets ``search_path`` to duetime's schema (the one the app's own store resolves
  its tables in: ``current_schema()`` of its pool) with ``set_config(…, true)`` and puts the
  caller's value back when it ends, so the caller's own unqualified names are untouched;
- the NOTIFY of new runs is part of the statement, so PostgreSQL delivers it at the caller's
  commit, and never for a rollback.

A sync connection is driven by blocking calls: the caller's thread (or the app's loop, for
the sync ``App``) waits for each statement, as it would for its own.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator
from typing import Any, Protocol

import psycopg
from psycopg import pq
from psycopg.rows import dict_row

from duetime.errors import UsageError
from duetime.store.postgres.store import _Q, PostgresStore, _params

_HOMES: weakref.WeakKeyDictionary[PostgresStore, tuple[str, str]] = weakref.WeakKeyDictionary()
"""Each app store's (schema, database), asked of its pool once."""


async def _home(parent: PostgresStore) -> tuple[str, str]:
    """Where the app's own store finds duetime's tables: the first schema of its search path
    that exists (its URL's ``options=-csearch_path=…``, else the server's default) and its
    database."""
    home = _HOMES.get(parent)
    if home is None:
        row = await parent._read_one("enlist_home")
        if row is None or row["schema"] is None:
            raise UsageError(
                "connection",
                "the app's database URL names no existing schema (search_path): migrate first",
            )
        home = _HOMES[parent] = (row["schema"], row["db"])
    return home


class _Link(Protocol):
    """The caller's connection, sync or async, as the enlisted store drives it."""

    raw: Any

    async def rows(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]: ...
    async def count(self, query: str, params: dict[str, Any]) -> int: ...
    def savepoint(self) -> contextlib.AbstractAsyncContextManager[None]: ...


class _AsyncLink:
    def __init__(self, raw: psycopg.AsyncConnection[Any]) -> None:
        self.raw = raw

    async def rows(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async with self.raw.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(query, params)
            result = cursor.pgresult
            return await cursor.fetchall() if result is not None and result.nfields else []

    async def count(self, query: str, params: dict[str, Any]) -> int:
        async with self.raw.cursor() as cursor:
            await cursor.execute(query, params)
            return cursor.rowcount

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        async with self.raw.transaction():
            yield


class _SyncLink:
    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    async def rows(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.raw.cursor(row_factory=dict_row) as cursor:
            cursor.execute(query, params)
            result = cursor.pgresult
            return cursor.fetchall() if result is not None and result.nfields else []

    async def count(self, query: str, params: dict[str, Any]) -> int:
        with self.raw.cursor() as cursor:
            cursor.execute(query, params)
            return cursor.rowcount

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        with self.raw.transaction():
            yield


async def _link(connection: object) -> _Link:
    """The psycopg connection under ``connection`` (psycopg itself, or SQLAlchemy's session or
    connection on the psycopg driver). Raises UsageError for anything else."""
    if isinstance(connection, psycopg.AsyncConnection):
        return _AsyncLink(connection)
    if isinstance(connection, psycopg.Connection):
        return _SyncLink(connection)
    if type(connection).__module__.startswith("sqlalchemy."):
        return await _link(await _sqlalchemy_driver_connection(connection))
    raise UsageError(
        "connection",
        f"{type(connection).__name__} is not a psycopg 3 connection or a SQLAlchemy 2 session "
        "(transactional enqueue needs PostgreSQL through psycopg 3)",
    )


async def _sqlalchemy_driver_connection(connection: object) -> object:
    """The DBAPI connection of a SQLAlchemy session or connection, its transaction begun."""
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.orm import Session

    if isinstance(connection, AsyncSession):
        connection = await connection.connection()
    if isinstance(connection, AsyncConnection):
        raw = await connection.get_raw_connection()
        return raw.driver_connection
    if isinstance(connection, Session):
        connection = connection.connection()
    if isinstance(connection, Connection):
        return connection.connection.driver_connection
    raise UsageError(
        "connection", f"{type(connection).__name__} is not a SQLAlchemy Session or Connection"
    )


class EnlistedStore(PostgresStore):
    """The store's statements on the caller's connection, inside the caller's transaction
    (see the module docstring). Meant for the writes of one call — a trigger, a schedule —
    made by :meth:`PostgresStore.enlist`; never opened or closed."""

    def __init__(self, parent: PostgresStore, link: _Link, schema: str, database: str) -> None:
        super().__init__(parent.url, clock=parent.clock)
        self._link = link
        self._schema = schema
        self._database = database

    @classmethod
    async def of(cls, parent: PostgresStore, connection: object) -> EnlistedStore:
        """The enlisted store of ``parent`` (an open app store) on ``connection``. Raises
        UsageError for a connection of another kind, or in autocommit outside a
        transaction."""
        schema, database = await _home(parent)
        link = await _link(connection)
        raw = link.raw
        if raw.autocommit and raw.info.transaction_status == pq.TransactionStatus.IDLE:
            raise UsageError(
                "connection",
                "the connection is in autocommit mode outside a transaction: each statement "
                "would commit on its own; enqueue inside `with conn.transaction():`",
            )
        return cls(parent, link, schema, database)

    async def open(self) -> None:
        raise UsageError("open", "an enlisted store lives on the caller's connection")

    async def close(self) -> None:
        return None  # nothing of its own: the connection is the caller's

    @contextlib.asynccontextmanager
    async def _scope(self, savepoint: bool) -> AsyncIterator[_Link]:
        row = (await self._link.rows(_Q["enlist_enter"], {"path": _quoted(self._schema)}))[0]
        if row["db"] != self._database:
            await self._link.rows(_Q["enlist_leave"], {"path": row["old"]})
            raise UsageError(
                "connection",
                f"the connection is to database {row['db']!r}; duetime's tables are in "
                f"{self._database!r} (the app's database URL)",
            )
        try:
            if savepoint:
                async with self._link.savepoint():
                    yield self._link
            else:
                yield self._link
        finally:
            if self._link.raw.info.transaction_status != pq.TransactionStatus.INERROR:
                await self._link.rows(_Q["enlist_leave"], {"path": row["old"]})

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[Any]:
        async with self._scope(savepoint=True) as link:
            yield link

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[Any]:
        async with self._scope(savepoint=False) as link:
            yield link

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        async with self._scope(savepoint=True) as link:
            yield link

    def _write(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._tx()

    async def _all(self, conn: Any, name: str, /, **values: Any) -> list[Any]:
        link: _Link = conn
        return await link.rows(_Q[name], _params(values))

    async def _exec(self, conn: Any, name: str, /, **values: Any) -> int:
        link: _Link = conn
        return await link.count(_Q[name], _params(values))


def _quoted(schema: str) -> str:
    """``schema`` as one quoted identifier for ``search_path``."""
    return '"' + schema.replace('"', '""') + '"'
