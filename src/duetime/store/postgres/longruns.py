"""PostgreSQL: exactly-once transactions.

An exactly-once attempt gets its own connection (outside the pool, so a long handler holding a
transaction never starves the worker's claims and heartbeats) with a transaction open on it.
Through PgBouncer's transaction pooling that transaction holds one server connection for the
attempt's whole length (docs/howto/pgbouncer.md).
The handler writes through savepoints (:meth:`PostgresExactlyOnceTx.block`); the worker then
writes the attempt's fenced completion — the same ``runs_complete`` statement as the batched
path — on that connection and commits. If the fenced write matches nothing, the attempt is
stale: everything is rolled back, so its effect is never applied, and the stale attempt is
recorded afterwards on a pool connection.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg.rows import dict_row

from duetime import _json
from duetime._outbox import COMPLETION_EVENTS
from duetime.store.base import (
    RunCompletion,
    RunsCompleteParams,
)
from duetime.store.postgres.pooling import Pooling

log = logging.getLogger("duetime.store")

CONNECT_TIMEOUT = 10


def completion_columns(cs: Sequence[RunCompletion]) -> dict[str, str]:
    """The ``runs_complete`` statement's input: one JSON array of records, one per completion
    (``jsonb_to_recordset`` on the server; one orjson call here: an array per column cost
    ~10 µs a run to encode, docs/decisions/0015)."""
    return {
        "batch": _json.dumps(
            [
                {
                    "run_id": c.run_id,
                    "token": c.token,
                    "next_state": c.next_state,
                    "available_at": c.available_at,
                    "reason": c.reason,
                    "error_class": c.error_class,
                    "error_message": c.error_message,
                    "traceback": c.traceback,
                    "worker_id": c.worker_id,
                    "number": c.attempt,
                    "claimed_at": c.claimed_at,
                    "started_at": c.started_at,
                    "outcome": c.outcome,
                    "completes_job": c.completes_job,
                    "refund_attempt": c.refund_attempt,
                    "result": c.result,
                }
                for c in cs
            ]
        )
    }


class _Host(Protocol):
    """What the mixin needs from :class:`~duetime.store.postgres.store.PostgresStore`."""

    url: str
    pooling: Pooling

    def _read(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...
    async def _all(
        self, conn: psycopg.AsyncConnection[Any], name: str, /, **v: Any
    ) -> list[Any]: ...

    def _fixed_now(self, now: datetime | None) -> datetime | None: ...
    async def _run_events(
        self,
        conn: psycopg.AsyncConnection[Any],
        ids: Sequence[uuid.UUID],
        kinds: frozenset[str],
        now: datetime | None,
    ) -> None: ...
    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]: ...


class PostgresLongRuns:
    """Mixed into PostgresStore: exactly-once transactions (the other long-run methods are
    :class:`~duetime.store._sql.SQLStore`'s)."""

    async def exactly_once_begin(self: _Host) -> PostgresExactlyOnceTx:
        conn = await self.pooling.connection_class().connect(
            self.url,
            autocommit=True,
            row_factory=dict_row,
            connect_timeout=CONNECT_TIMEOUT,
            # through transaction pooling a statement prepared here would outlive the attempt
            # on the server session PgBouncer hands to the next client
            **self.pooling.connection_kwargs(),
        )
        try:
            await conn.execute("BEGIN")
        except BaseException:
            await conn.close()
            raise
        return PostgresExactlyOnceTx(self, conn)


class PostgresExactlyOnceTx:
    """One exactly-once attempt's transaction (see the module docstring)."""

    def __init__(self, store: _Host, conn: psycopg.AsyncConnection[Any]) -> None:
        self._store = store
        self._conn = conn
        self._ended = False

    @property
    def connection(self) -> psycopg.AsyncConnection[Any]:
        return self._conn

    @contextlib.asynccontextmanager
    async def block(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._ended:
            raise RuntimeError("this exactly-once transaction has already ended")
        # inside the open transaction psycopg makes this a savepoint
        async with self._conn.transaction():
            yield self._conn

    async def complete(self, completion: RunCompletion) -> bool:
        if self._ended:
            raise RuntimeError("this exactly-once transaction has already ended")
        self._ended = True
        try:
            rows = await self._store._all(
                self._conn,
                "runs_complete",
                tenant=None,
                now=self._store._fixed_now(None),
                **completion_columns([completion]),
            )
            applied = bool(rows)  # only the applied completions come back
            if applied:
                if not completion.refund_attempt:
                    await self._store._run_events(
                        self._conn, [completion.run_id], COMPLETION_EVENTS, None
                    )
                cursor = await self._conn.execute("COMMIT")
                if cursor.statusmessage != "COMMIT":  # an aborted transaction "commits" as ROLLBACK
                    raise psycopg.OperationalError(
                        f"exactly-once transaction did not commit ({cursor.statusmessage})"
                    )
        finally:
            if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await self._quiet(self._conn.execute("ROLLBACK"))
            await self._quiet(self._conn.close())
        if not applied:
            # the fenced write matched nothing: the effect was rolled back with it; record the
            # attempt as stale like the batched path does
            await self._store.runs_complete(RunsCompleteParams([completion]))
        return applied

    async def rollback(self) -> None:
        if self._ended:
            return
        self._ended = True
        if not self._conn.closed:
            await self._quiet(self._conn.execute("ROLLBACK"))
        await self._quiet(self._conn.close())

    @staticmethod
    async def _quiet(awaitable: Any) -> None:
        try:
            await awaitable
        except Exception as exc:  # the connection may be gone; closing it is what matters
            log.debug("exactly-once transaction cleanup: %s", exc)
