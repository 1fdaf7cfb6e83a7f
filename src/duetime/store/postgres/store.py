"""The production store: PostgreSQL through psycopg 3 (async, pooled).

Concurrency: claims and due-job scans use ``FOR UPDATE SKIP LOCKED``; every transition is a
conditional UPDATE; the hot paths (claim, heartbeat, complete) are one statement per batch.
The database clock (``clock_timestamp()``) decides due checks and lease expiry. New runs are
announced with ``NOTIFY duetime_runs`` (one per transaction); :meth:`wait_for_runs` listens.
Broker runs' messages committed to the outbox are announced with ``NOTIFY duetime_outbox``;
:meth:`wait_for_outbox` listens (the relays of other processes: decision 0040).

Everything dialect-free is :class:`~duetime.store._sql.SQLStore`'s; this class supplies the
connection surface and what only PostgreSQL does: the pipelined start batch, the
one-statement completion, bulk COPY, LISTEN/NOTIFY, advisory locks, exactly-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from duetime import _json
from duetime._clock import Clock
from duetime._outbox import COMPLETION_EVENTS, START_EVENTS, STARTED_EVENTS
from duetime._redact import redact_url
from duetime._run_partitions import check_run_partitions
from duetime._types import ApiKey, Run
from duetime.errors import ConnectError, NodesStillRunning, SchemaError
from duetime.store._rows import NativeCodec, start_candidate_from_row
from duetime.store._sql import ClaimSteps, SQLStore
from duetime.store._sql_lifecycle import bulk_cap_check
from duetime.store._sql_outbox import completion_event_runs
from duetime.store._sql_surface import Answer
from duetime.store._values import CompletionKey, completion_answers, unique_completions
from duetime.store.base import (
    SCHEMA_VERSION,
    ApiKeyRevokeParams,
    BulkJob,
    JobsInsertManyParams,
    PlainBatch,
    RunCompletion,
    RunsCompleteParams,
    RunsStartParams,
)
from duetime.store.cancel_news import CHANNEL as CANCELS
from duetime.store.postgres import bulk_rows, hash_layout
from duetime.store.postgres._socket import has_unread_input
from duetime.store.postgres.key_news import KeyNews, connect_timeout
from duetime.store.postgres.longruns import (
    PostgresLongRuns,
    completion_columns,
    message_columns,
)
from duetime.store.postgres.partitions import PostgresAttemptPartitions
from duetime.store.postgres.pooling import Pooling
from duetime.store.sqlfile import Migration, load_queries

_C = NativeCodec()
log = logging.getLogger("duetime.store")
_Q = load_queries("postgres")
_FRESH_PLAN = "-- planned per execution"
_UNPREPARED = frozenset(name for name, text in _Q.items() if _FRESH_PLAN in text)
"""Statements never prepared (psycopg prepares one after its fifth run): the generic plan
PostgreSQL keeps for a prepared statement is built once, from the table as it was — a
workflow instance's few rows planned as a sequential scan, run in a loop over a 10,000-way
fan-out's items, took 18 s under the instance's lock (docs/decisions/0034)."""
OUTBOX = "duetime_outbox"
"""The channel a completion that inserted outbox rows notifies (queries/outbox.sql)."""
_MIGRATION_LOCK = 0x6475_6574  # advisory lock key: "duet"
_HASH_PARTITIONING = Migration(SCHEMA_VERSION, "runs_hash_partitions", "-- requires: nodes stopped")
"""The conversion to hash-partitioned runs, as the nodes-running check names it."""
_TRUSTED_FOR = 1.0
"""Seconds after its last use in which a pooled connection is handed out without a ping."""
_PERMANENT = (
    "does not exist",  # unknown role or database
    "authentication failed",
    "password",
    "pg_hba.conf",
    "invalid connection option",
    "invalid integer value",
    "invalid uri",
    "invalid sslmode",
    'missing "="',
)
"""Connection failures that waiting cannot fix (libpq gives no SQLSTATE before a session
exists: its message is all there is)."""


def connect_failure(url: str, exc: Exception) -> ConnectError:
    """The one-line :class:`ConnectError` for a failed connection to ``url``."""
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0]
    reason = first.rpartition(" failed: ")[2] if " failed: " in first else first
    reason = reason.replace("FATAL:", "").strip()
    permanent = isinstance(exc, psycopg.ProgrammingError) or any(
        marker in text.lower() for marker in _PERMANENT
    )
    return ConnectError(redact_url(url), reason, retryable=not permanent)


def _encode(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if isinstance(value, list | tuple):  # arrays (unnest, ANY)
        return [_encode(v) for v in value]
    return value


_COPY_PART = 500
"""Jobs encoded per write of a bulk COPY: the database parses one part while the next is
encoded, and the event loop gets a turn between parts."""


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _encode(v) for k, v in values.items()}


async def _configure_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """Every pooled connection: no JIT. duetime's statements are short OLTP queries; once
    statistics show a large backlog, the planner's estimate for the fair claim (a lateral scan
    per tenant group) passes jit_above_cost and compiling it takes seconds for a query that runs
    in milliseconds (docs/decisions/0005-priority-aging-at-claim-time.md). json/jsonb columns
    (payloads, checkpoints) are decoded with orjson, the library duetime encodes them with."""
    await conn.execute("SET jit = off")
    await _configure_pooled(conn)


async def _configure_pooled(conn: psycopg.AsyncConnection[Any]) -> None:
    """A connection through PgBouncer's transaction pooling: no session setting but the time
    zone, which PgBouncer tracks per client (``jit``: the role's, see :meth:`_check_jit`)."""
    # orjson's own loads: psycopg never hands a NULL to a loader, so _json.loads's None check
    # would only add a Python call per JSON value read (a claimed run's payload, …)
    set_json_loads(orjson.loads, conn)
    # UTC sessions: timestamps arrive in UTC already (nothing in duetime's SQL depends on the
    # session's zone; this only spares converting every instant read)
    await conn.execute("SET TimeZone = 'UTC'")


class PostgresStore(PostgresLongRuns, PostgresAttemptPartitions, SQLStore):
    dialect = "postgres"
    codec = _C
    notifies_in_statement = True
    audits_in_statement = True
    transient_errors: tuple[type[BaseException], ...] = (
        psycopg.OperationalError,
        psycopg.InterfaceError,
        PoolTimeout,
        OSError,
    )

    def __init__(
        self, url: str, *, clock: Clock | None = None, pooling: Pooling | None = None
    ) -> None:
        self.url = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self.clock = clock
        self.pooling = pooling or Pooling()
        self._pool_size = self.pooling.pool_size
        self._pool: AsyncConnectionPool | None = None
        self._listener: asyncio.Task[None] | None = None
        self._runs_event = asyncio.Event()
        self._outbox_event = asyncio.Event()
        self._listen_url = self.pooling.listen_target(self.url)
        """Where notifications are heard; None: nowhere (transaction pooling), poll."""
        self.key_news = KeyNews(self._listen_url or self.url)
        self._last_used: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = (
            weakref.WeakKeyDictionary()
        )

    # --- connection -----------------------------------------------------------------------

    async def _check_connection(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """The pool's check before it hands a connection out: a ping (one round trip) unless
        the connection answered a statement less than :data:`_TRUSTED_FOR` seconds ago and
        nothing has arrived on it since — on the hot paths that is every checkout, and the
        ping doubled their round trips. A server that ends a session (restart, failover,
        ``pg_terminate_backend``) sends a message and closes the socket: an idle pooled
        connection with anything to read is pinged (and replaced) before use."""
        used = self._last_used.get(conn)
        if (
            used is not None
            and time.monotonic() - used < _TRUSTED_FOR
            and not has_unread_input(conn)
        ):
            return
        await AsyncConnectionPool.check_connection(conn)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection, marked as answering when it goes back unbroken."""
        async with self.pool.connection() as conn:
            yield conn
            if not conn.broken:
                self._last_used[conn] = time.monotonic()

    async def open(self) -> None:
        """Connect once directly (a failure that waiting cannot fix ends here, at once, as a
        :class:`~duetime.errors.ConnectError`), then open the pool."""
        if self._pool is not None:
            return
        extra = self.pooling.connection_kwargs()
        connection_class = self.pooling.connection_class()
        try:
            first = await connection_class.connect(
                self.url, connect_timeout=connect_timeout(self.url), **extra
            )
        except (psycopg.Error, OSError) as exc:
            raise connect_failure(self.url, exc) from exc
        try:
            if self.pooling.transaction_pooling:
                await _check_jit(first)
        finally:
            await first.close()
        pool = AsyncConnectionPool(
            self.url,
            connection_class=connection_class,
            min_size=1,
            max_size=self._pool_size,
            open=False,
            # connect_timeout: a host that accepts TCP but never answers (a frozen primary in
            # a multi-host URL) is given up on and the next one tried, never waited on forever
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": connect_timeout(self.url),
                **extra,
            },
            reconnect_timeout=60,
            timeout=self.pooling.checkout_wait,
            # a connection broken by a server restart is replaced before use, not failed on
            check=self._check_connection,
            configure=(
                _configure_pooled if self.pooling.transaction_pooling else _configure_connection
            ),
        )
        try:
            await pool.open(wait=True, timeout=30)
        except PoolTimeout as exc:
            await pool.close()  # stop its reconnect attempts
            raise ConnectError(
                redact_url(self.url), "no connection within 30 s", retryable=True
            ) from exc
        except BaseException:
            await pool.close()
            raise
        self._pool = pool
        described = self.pooling.describe(self.url)
        if described is not None:
            log.info("%s", described)

    async def close(self) -> None:
        await self.key_news.close()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @property
    def pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise RuntimeError("store is not open: call await store.open() first")
        return self._pool

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._connection() as conn, conn.transaction():
            yield conn

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._connection() as conn:
            yield conn

    def _write(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """One writing statement: an autocommit pool connection (the statement is its own
        transaction; hot paths stay one round trip)."""
        return self._read()

    @contextlib.asynccontextmanager
    async def _claim_steps(self) -> AsyncIterator[ClaimSteps]:
        # the one-statement claim autocommits; the locked step is its own transaction. With
        # `started` run events on, the claim is a transaction too: its events commit with it
        fair = self._write if self._events_for(STARTED_EVENTS) is None else self._tx
        yield ClaimSteps(fair=fair, locked=self._tx)

    async def _all(
        self, conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any
    ) -> list[Any]:
        return await self._rows(conn, name, values, as_tuples=False)

    @staticmethod
    async def _rows(
        conn: psycopg.AsyncConnection[Any], name: str, values: dict[str, Any], *, as_tuples: bool
    ) -> list[Any]:
        """Run a statement and read all its rows: as the connection's rows, or as tuples."""
        prepare = False if name in _UNPREPARED else None
        cursor = await conn.execute(_Q[name], _params(values), prepare=prepare)
        if cursor.pgresult is None:  # pipelined, not answered yet: a nested block's exit syncs
            async with conn.pipeline():
                pass
        # the result's field count, not ``cursor.description``: that builds a Column object
        # per field (~110 µs for a run's 40 columns, as much as the statement's own round trip)
        result = cursor.pgresult
        if result is None or not result.nfields:
            return []
        if as_tuples:
            cursor.row_factory = tuple_row
        return await cursor.fetchall()

    @staticmethod
    async def _queue(
        conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any
    ) -> psycopg.AsyncCursor[Any]:
        """Send a statement; in pipeline mode its answer is awaited only when read."""
        return await conn.execute(_Q[name], _params(values))

    async def _send(
        self, conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any
    ) -> Answer:
        return (await self._queue(conn, name, **values)).fetchall

    async def _tuples(
        self, conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any
    ) -> list[Sequence[Any]]:
        return await self._rows(conn, name, values, as_tuples=True)

    async def _exec(self, conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any) -> int:
        prepare = False if name in _UNPREPARED else None
        cursor = await conn.execute(_Q[name], _params(values), prepare=prepare)
        if cursor.pgresult is None:  # pipelined, not answered yet: a nested block's exit syncs
            async with conn.pipeline():
                pass
        return cursor.rowcount

    async def _now(self, conn: psycopg.AsyncConnection[Any], now: datetime | None) -> datetime:
        if now is not None:
            return now
        if self.clock is not None:
            return self.clock.now()
        row = await self._one(conn, "db_now")
        return cast(datetime, row["now"])

    def _fixed_now(self, now: datetime | None) -> datetime | None:
        """``now`` for single statements: explicit, else a test clock, else the DB clock (None)."""
        if now is not None:
            return now
        return self.clock.now() if self.clock is not None else None

    def _records(self, rows: Sequence[dict[str, Any]]) -> str:
        return _json.dumps(list(rows))  # jsonb_to_recordset on the server

    async def _notify(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await self._exec(conn, "notify_runs")

    async def _materialize_plain(
        self, conn: psycopg.AsyncConnection[Any], values: dict[str, Any], *, leased: bool
    ) -> PlainBatch:
        # one statement: lock, insert, advance, count, NOTIFY (queries/materialize.sql)
        name = "runs_materialize_plain_leased" if leased else "runs_materialize_plain"
        rows = await self._all(conn, name, **values)
        made = tuple(
            (r["tenant"], r["task"], r["scheduled_for"], int(r["runs"]))
            for r in rows
            if r["runs"] is not None
        )
        return PlainBatch(jobs=int(rows[0]["jobs"]) if rows else 0, made=made)

    async def _announce_cancels(
        self, conn: psycopg.AsyncConnection[Any], ids: list[uuid.UUID]
    ) -> None:
        # delivered at commit to every listener, this process's included (_listen)
        await self._exec(conn, "runs_cancels_notify", ids=ids)

    async def _lock_keys(self, conn: psycopg.AsyncConnection[Any], keys: list[str]) -> bool:
        await self._exec(conn, "overlap_keys_lock", keys=keys)
        return True

    async def _attempts_insert(
        self,
        conn: psycopg.AsyncConnection[Any],
        runs: Sequence[Run],
        outcome: str,
        message: str,
        now: datetime,
    ) -> None:
        await self._exec(
            conn,
            "attempts_insert",
            run_id=[r.id for r in runs],
            token=[r.token for r in runs],
            job_id=[r.job_id for r in runs],
            tenant=[r.tenant for r in runs],
            number=[r.attempt for r in runs],
            worker_id=[r.lease_owner or "?" for r in runs],
            claimed_at=[r.claimed_at or now for r in runs],
            started_at=[r.started_at for r in runs],
            finished_at=[now for _ in runs],
            outcome=[outcome for _ in runs],
            error_class=[None for _ in runs],
            error_message=[message for _ in runs],
        )

    # --- notifications --------------------------------------------------------------------

    async def wait_for_runs(self, timeout: float) -> bool:
        """Wait until a NOTIFY says new runs exist (True) or ``timeout`` passes (False)."""
        self._ensure_listener()
        return await super().wait_for_runs(timeout)

    async def wait_for_outbox(self, timeout: float) -> bool:
        """Wait until a NOTIFY says outbox rows were committed (True) or ``timeout`` passes."""
        self._ensure_listener()
        return await super().wait_for_outbox(timeout)

    async def wait_for_cancels(
        self, epoch: int, timeout: float
    ) -> tuple[int, frozenset[uuid.UUID] | None]:
        """Wait for a NOTIFY on ``duetime_cancels`` (store/cancel_news.py)."""
        self._ensure_listener()
        return await super().wait_for_cancels(epoch, timeout)

    def _ensure_listener(self) -> None:
        """Start listening, unless there is nowhere to (transaction pooling without a listen
        URL): then nothing is heard and callers wait out their timeout — they poll."""
        if self._listen_url is None:
            return
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(
                self._listen(self._listen_url), name="duetime-listen"
            )

    async def _listen(self, url: str) -> None:
        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    url, autocommit=True, connect_timeout=connect_timeout(url)
                )
                async with conn:
                    await conn.execute("LISTEN duetime_runs")
                    await conn.execute(f"LISTEN {CANCELS}")
                    await conn.execute(f"LISTEN {OUTBOX}")
                    backoff = 0.1
                    # we may have missed some while (re)connecting
                    self._runs_event.set()
                    self._outbox_event.set()
                    self.cancel_news.heard(None)
                    async for note in conn.notifies():
                        if note.channel == CANCELS:
                            self._heard_cancel(note.payload)
                        elif note.channel == OUTBOX:
                            self._outbox_event.set()
                        else:
                            self._runs_event.set()
            except (psycopg.OperationalError, OSError):
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _heard_cancel(self, payload: str) -> None:
        try:
            self.cancel_news.heard([uuid.UUID(payload)])
        except ValueError:  # not ours: check every run
            self.cancel_news.heard(None)

    def api_keys_epoch(self) -> int | None:
        # nothing heard without a listening connection: every key is read again
        return None if self._listen_url is None else self.key_news.epoch()

    async def api_key_revoke(self, params: ApiKeyRevokeParams) -> ApiKey:
        try:
            return await super().api_key_revoke(params)
        finally:  # after the commit (or a failure that may follow one): cached keys are stale
            self.key_news.changed()

    async def enlist(self, connection: object) -> Any:
        """This store's statements in the caller's transaction (``enlisted.py``)."""
        from duetime.store.postgres.enlisted import EnlistedStore  # a subclass of this one

        return await EnlistedStore.of(self, connection)

    # --- schema ---------------------------------------------------------------------------

    async def migrate(self, *, alive_within: float = 60.0) -> int:
        async with self._tx() as conn:
            await _require_server_version(conn)
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS duetime_migrations (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
            cursor = await conn.execute(
                "SELECT coalesce(max(version), 0) AS v FROM duetime_migrations"
            )
            row = await cursor.fetchone()
            current = int(row["v"]) if row else 0
            pending = self._migrations_after(current)
            await _refuse_running_nodes(conn, pending, alive_within)
            for migration in pending:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO duetime_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
                current = migration.version
        return current

    async def runs_partition_by_key(self, count: int, *, alive_within: float = 60.0) -> bool:
        """Convert ``runs`` to ``count`` partitions by its job partition key (the opt-in
        layout of ``hash_layout.py``; docs/decisions/0033), every row kept, in one
        transaction under the migration lock. Offline: NodesStillRunning while a process
        heartbeated within ``alive_within`` seconds. False when ``runs`` already has
        ``count`` partitions; SchemaError unless the schema is migrated."""
        check_run_partitions(count)
        async with self._tx() as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if await self._schema_version(conn) != SCHEMA_VERSION:
                raise SchemaError("migrate the database first, then partition runs")
            if await hash_layout.runs_partition_count(conn) == count:
                return False
            await _refuse_running_nodes(conn, [_HASH_PARTITIONING], alive_within)
            return await hash_layout.partition_runs(conn, count)

    # --- bulk -----------------------------------------------------------------------------

    async def jobs_insert_many(self, params: JobsInsertManyParams) -> int:
        if not params.jobs:
            return 0
        if params.expect_new:
            try:
                async with self._tx() as conn:
                    await bulk_cap_check(self, conn, params.jobs)
                    now = await self._now(conn, params.now)
                    await self._copy_jobs(conn, "jobs", params.jobs, now)
                return len(params.jobs)
            except psycopg.errors.UniqueViolation:
                pass  # a name exists after all: the staging path below leaves it alone
        async with self._tx() as conn:
            await bulk_cap_check(self, conn, params.jobs)
            now = await self._now(conn, params.now)
            await conn.execute(_Q["jobs_bulk_stage"])
            await self._copy_jobs(conn, "duetime_jobs_in", params.jobs, now)
            return await self._exec(conn, "jobs_bulk_insert")

    @staticmethod
    async def _copy_jobs(
        conn: psycopg.AsyncConnection[Any], table: str, jobs: Sequence[BulkJob], now: datetime
    ) -> None:
        """COPY ``jobs`` into ``table`` (``jobs`` or its staging copy) as one text stream."""
        copy_sql = sql.SQL(_Q["jobs_bulk_copy"]).format(
            table=sql.Identifier(table),
            columns=sql.SQL(", ").join(sql.Identifier(n) for n in bulk_rows.columns(jobs[0].shape)),
        )
        lines = bulk_rows.Lines(now)
        async with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for first in range(0, len(jobs), _COPY_PART):
                part = jobs[first : first + _COPY_PART]
                await copy.write("".join([lines.line(job) for job in part]))

    # --- runs: the worker's path ----------------------------------------------------------

    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        # each (run, token) once, sorted by id: concurrent batches lock their rows in one order
        runs = sorted(dict.fromkeys(params.runs))
        if not runs:
            return set()
        # pipelined: statements whose answers are not needed yet travel with the next one that
        # is waited for: the keyed path's three reads share one round trip, its writes travel
        # with the commit (psycopg's transaction block still syncs on entry and exit)
        judged: list[Answer] = []
        async with self._connection() as conn, conn.pipeline(), conn.transaction():
            rows = await self._all(
                conn,
                "runs_start",
                ids=[r[0] for r in runs],
                tokens=[r[1] for r in runs],
                now=self._fixed_now(params.now),
                lease_ttl=params.lease_ttl,
            )
            started = {r["id"] for r in rows if r["concurrency_key"] is None}
            keyed = {
                r["id"]: r["concurrency_key"] for r in rows if r["concurrency_key"] is not None
            }
            if keyed:
                started |= await self._start_keyed(
                    conn,
                    [r for r in runs if r[0] in keyed],
                    sorted(set(keyed.values())),
                    params.now,
                    params.lease_ttl,
                    judged,
                )
            events = self._run_event_values(
                [r[0] for r in runs], START_EVENTS, self._fixed_now(params.now)
            )
            if events is not None:  # after the starts and skips, in their transaction
                await self._queue(conn, "outbox_run_events", **events)
        for answer in judged:  # answered with the commit
            started.update(r["id"] for r in await answer())
        return started

    async def _start_keyed(
        self,
        conn: psycopg.AsyncConnection[Any],
        runs: list[tuple[uuid.UUID, int]],
        keys: list[str],
        now: datetime | None,
        lease_ttl: float | None,
        judged: list[Answer],
    ) -> set[uuid.UUID]:
        """The runs of a start batch that have an overlap key, in the caller's pipelined
        transaction: lock every key of the batch at once (in one order: a batch never holds one
        key while waiting for another), lock the runs and read their policies, count each key's
        started runs (one round trip for the three), then judge them (``_start_judged``: the
        verdicts' writes queued). Returns the runs started here; the answer of the statement
        starting the rest is appended to ``judged``, to be read after the commit."""
        ids, tokens = [r[0] for r in runs], [r[1] for r in runs]
        await self._queue(conn, "overlap_keys_lock", keys=keys)
        info = await self._queue(
            conn, "runs_start_keyed_info", ids=ids, tokens=tokens, now=self._fixed_now(now)
        )
        counts = await self._queue(conn, "runs_started_by_key", keys=keys)
        rows = await info.fetchall()
        counted = await counts.fetchall()
        eligible = [start_candidate_from_row(r, self.codec) for r in rows if r["eligible"]]
        if not eligible:
            return set()
        started, answer = await self._start_judged(conn, eligible, counted, now, lease_ttl)
        if answer is not None:
            judged.append(answer)
        return started

    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]:
        if not params.completions:
            return []
        cs, first = unique_completions(params.completions)
        if self._events_for(COMPLETION_EVENTS) is not None or any(
            c.workflow is not None for c in cs
        ):
            return await self._runs_complete_planned(params, cs, first)
        # one statement a chunk, autocommitted: broker runs' messages go with it
        async with self._read() as conn:
            applied, _ = await self._complete(
                conn, params.tenant, self._fixed_now(params.now), cs, planned=False
            )
        return completion_answers(params.completions, first, applied)

    async def _complete(
        self,
        conn: psycopg.AsyncConnection[Any],
        tenant: str | None,
        now: datetime | None,
        cs: list[RunCompletion],
        *,
        planned: bool,
    ) -> tuple[set[CompletionKey], datetime | None]:
        """The completion statement over ``cs``, a statement per :func:`result_chunks` chunk:
        ``runs_complete``, or ``runs_complete_outbox`` for a chunk with broker runs' messages
        (inserted by the statement itself, for the attempts it applied) and for every chunk
        when ``planned`` (the caller's transaction goes on: the statement answers with its
        instant, which the later chunks and the caller then use). Returns the (run, token)
        pairs applied (``_values.CompletionKey``: the id's integer) and that instant (``now``
        as given when nothing answered it)."""
        applied: set[CompletionKey] = set()
        for chunk in result_chunks(cs):
            if not (planned or any(c.outbox is not None for c in chunk)):
                rows = await self._all(
                    conn, "runs_complete", tenant=tenant, now=now, **completion_columns(chunk)
                )
            else:
                rows = await self._all(
                    conn,
                    "runs_complete_outbox",
                    tenant=tenant,
                    now=now,
                    **message_columns(chunk),
                    **completion_columns(chunk),
                )
                if planned:  # its first row: the statement's instant, whether or not any ended
                    now = rows[0]["now"]
            applied.update((r["run_id"].int, r["token"]) for r in rows if r["run_id"] is not None)
        return applied, now

    async def _runs_complete_planned(
        self,
        params: RunsCompleteParams,
        cs: list[RunCompletion],
        first: dict[CompletionKey, int],
    ) -> list[bool]:
        """A batch with workflow runs, or any batch while run events are on: the completion
        statement (with the broker runs' outbox rows), then the workflow engine's plan of the
        runs it ended and the run events, in one transaction at the statement's instant (a
        step's children, a broker run's message, a run's event exist exactly when its end
        does: docs/decisions/0020, 0026, 0031)."""
        async with self._tx() as conn:
            applied, now = await self._complete(
                conn, params.tenant, self._fixed_now(params.now), cs, planned=True
            )
            assert now is not None  # answered by the statement
            ended = [c for c in cs if (c.run_id.int, c.token) in applied]
            await self._workflows_advance(conn, ended, now)
            await self._run_events(conn, completion_event_runs(ended), COMPLETION_EVENTS, now)
        return completion_answers(params.completions, first, applied)


"""A node whose heartbeat is younger than this counts as running (its heartbeat is every 10 s)."""


RESULT_CHUNK_BYTES = 64 * 1024 * 1024
"""Results one ``runs_complete`` statement carries at most: they travel in one array value,
and PostgreSQL holds a value of at most 1 GB (a batch of big results takes several
statements)."""


def result_chunks(cs: list[RunCompletion]) -> list[list[RunCompletion]]:
    """``cs`` in order, cut where the results carried would pass :data:`RESULT_CHUNK_BYTES`
    (one chunk, the batch itself, in the common case of small or no results)."""
    if sum(len(c.result) for c in cs if c.result is not None) <= RESULT_CHUNK_BYTES:
        return [cs]
    chunks: list[list[RunCompletion]] = [[]]
    carried = 0
    for c in cs:
        size = len(c.result) if c.result is not None else 0
        if chunks[-1] and carried + size > RESULT_CHUNK_BYTES:
            chunks.append([])
            carried = 0
        chunks[-1].append(c)
        carried += size
    return chunks


MIN_SERVER_VERSION = 150000
"""PostgreSQL 15: the schema uses ``UNIQUE NULLS NOT DISTINCT`` (migration 013)."""


async def _require_server_version(conn: psycopg.AsyncConnection[Any]) -> None:
    """Raise :class:`SchemaError` on a server older than :data:`MIN_SERVER_VERSION`, before any
    migration starts (a migration would fail half-way through on a syntax error)."""
    problem = server_version_problem(conn.info.server_version)
    if problem is not None:
        raise SchemaError(problem)


async def _check_jit(conn: psycopg.AsyncConnection[Any]) -> None:
    """Through transaction pooling ``SET jit = off`` would hold for one transaction at best:
    the role (or database) must turn it off; warn when it has not (``_configure_connection``
    says why it matters)."""
    cursor = await conn.execute("SELECT current_setting('jit') AS jit")
    row = await cursor.fetchone()
    if row is not None and row[0] == "on":
        log.warning(
            "jit is on for this role: turn it off for duetime's role (ALTER ROLE … SET jit = "
            "off; docs/howto/pgbouncer.md) — under load the fair claim can take seconds to compile"
        )


def server_version_problem(version: int) -> str | None:
    """What is wrong with a server of ``version`` (``server_version_num``), or None."""
    if version >= MIN_SERVER_VERSION:
        return None
    major, minor = divmod(version, 10000)
    return f"duetime needs PostgreSQL 15 or newer; this server is PostgreSQL {major}.{minor}"


async def _refuse_running_nodes(
    conn: psycopg.AsyncConnection[Any], pending: Sequence[Migration], alive_within: float
) -> None:
    """Raise :class:`NodesStillRunning` if a pending migration needs the previous release
    stopped and a process of it has heartbeated within ``alive_within`` seconds (inside the
    migration's transaction): a node (``duetime`` process) or a worker embedded in an
    application (the installation's own workers; a tenant's remote worker reaches the
    database only through the API's nodes)."""
    stopping = next((m for m in pending if m.stops_nodes), None)
    if stopping is None:
        return
    cursor = await conn.execute(
        "SELECT to_regclass('nodes') IS NOT NULL AS nodes, "
        "to_regclass('workers') IS NOT NULL AS workers"
    )
    known = await cursor.fetchone()
    running: list[str] = []
    if known is not None and known["nodes"]:
        cursor = await conn.execute(
            "SELECT host, pid, roles FROM nodes WHERE heartbeat_at > clock_timestamp() "
            "- make_interval(secs => %s) ORDER BY host, pid",
            (alive_within,),
        )
        running += [
            f"{r['host']}:{r['pid']} ({', '.join(r['roles'])})" for r in await cursor.fetchall()
        ]
    if known is not None and known["workers"]:
        # `tenant` came with v6: read through to_jsonb so an older schema reads too
        cursor = await conn.execute(
            "SELECT DISTINCT w.host, w.pid FROM workers w "
            "WHERE w.heartbeat_at > clock_timestamp() - make_interval(secs => %s) "
            "AND coalesce(to_jsonb(w) ->> 'tenant', '') = '' ORDER BY w.host, w.pid",
            (alive_within,),
        )
        nodes = {entry.split(" ", 1)[0] for entry in running}
        running += [
            f"{r['host']}:{r['pid']} (embedded worker)"
            for r in await cursor.fetchall()
            if f"{r['host']}:{r['pid']}" not in nodes
        ]
    if running:
        raise NodesStillRunning(f"{stopping.version:03d}_{stopping.name}", running)
