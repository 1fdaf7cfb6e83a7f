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
from operator import attrgetter
from typing import Any, Protocol

import psycopg
from psycopg.rows import dict_row

from duetime import _json
from duetime._outbox import COMPLETION_EVENTS
from duetime.store.base import (
    RunCompletion,
    RunsCompleteParams,
)
from duetime.store.postgres import arrays
from duetime.store.postgres.arrays import PgArray
from duetime.store.postgres.pooling import Pooling

log = logging.getLogger("duetime.store")

CONNECT_TIMEOUT = 10


_COMPLETION_FIELDS = attrgetter(
    "run_id", "token", "next_state", "available_at", "reason", "error_class", "error_message",
    "traceback", "worker_id", "attempt", "claimed_at", "started_at", "outcome", "completes_job",
    "refund_attempt", "result",
)  # fmt: skip


def completion_columns(cs: Sequence[RunCompletion]) -> dict[str, PgArray]:
    """The ``runs_complete`` statement's input: one typed array per column, in ``cs``'s order
    (``unnest`` on the server; store/postgres/arrays.py builds them without a Python step per
    value where it can, docs/decisions/0015). A run's result is JSON text, cast by the
    statement."""
    columns = list(zip(*map(_COMPLETION_FIELDS, cs), strict=True)) or [()] * 16
    (
        run_id, token, next_state, available_at, reason, error_class, error_message, traceback,
        worker_id, number, claimed_at, started_at, outcome, completes_job, refund_attempt, result,
    ) = columns  # fmt: skip
    return {
        "run_id": arrays.uuids(run_id),
        "token": arrays.int8s(token),
        "next_state": arrays.texts(next_state),
        "available_at": arrays.instants(available_at),
        "reason": arrays.texts(reason),
        "error_class": arrays.texts(error_class),
        "error_message": arrays.texts(error_message),
        "traceback": arrays.texts(traceback),
        "worker_id": arrays.texts(worker_id),
        "number": arrays.int4s(number),
        "claimed_at": arrays.instants(claimed_at),
        "started_at": arrays.instants(started_at),
        "outcome": arrays.texts(outcome),
        "completes_job": arrays.bools(completes_job),
        "refund_attempt": arrays.bools(refund_attempt),
        "result": arrays.texts(result),
    }


def message_columns(cs: Sequence[RunCompletion]) -> dict[str, PgArray]:
    """``runs_complete_outbox``'s messages (``message_*``): one array per outbox column, an
    element per completion of ``cs`` that carries a message, with its attempt's token (the
    statement joins a message to its applied (run, token) pair). Target and headers are JSON
    by nature: ``jsonb`` elements."""
    sent = [(c.token, m) for c in cs if (m := c.outbox) is not None]
    return {
        "message_id": arrays.texts([m.message_id for _, m in sent]),
        "message_tenant": arrays.texts([m.tenant for _, m in sent]),
        "message_run_id": arrays.uuids([m.run_id for _, m in sent]),
        "message_token": arrays.int8s([token for token, _ in sent]),
        "message_attempt": arrays.int4s([m.attempt for _, m in sent]),
        "message_connection": arrays.texts([m.connection for _, m in sent]),
        "message_target": arrays.jsonbs([_json.dumps(dict(m.target)) for _, m in sent]),
        "message_body": arrays.texts([m.body for _, m in sent]),
        "message_headers": arrays.jsonbs([_json.dumps(dict(m.headers)) for _, m in sent]),
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
