"""The embedded store: one SQLite file, WAL mode, durable commits.

Concurrency: every write runs in ``BEGIN IMMEDIATE`` (one writer at a time across every
process sharing the file; others wait up to ``busy_timeout`` and are retried), so each
store method is one serializable transaction — or a savepoint of one, when write calls of
this process meet and share a commit (``commit_groups.py``: each answered once the commit is
durable). Within a process one connection is shared and guarded by a lock. SQLite shares the
host clock: ``now`` defaults to ``clock.now()``.

Everything dialect-free is :class:`~duetime.store._sql.SQLStore`'s; this class supplies the
connection surface (lists travel as JSON text, instants as integer microseconds) and what
differs: migrations, the start batch, completion, bulk insert, no exactly-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import aiosqlite

from duetime import _json
from duetime._clock import Clock, SystemClock
from duetime._outbox import COMPLETION_EVENTS, START_EVENTS
from duetime._types import Run
from duetime.errors import ConnectError, UnsupportedFeature
from duetime.store._rows import EPOCH, SQLiteCodec, start_candidate_from_row, to_micros
from duetime.store._sql import ClaimSteps, SQLStore
from duetime.store._sql_lifecycle import bulk_cap_check
from duetime.store._sql_outbox import completion_event_runs
from duetime.store._values import completion_answers, job_values, unique_completions
from duetime.store.base import (
    JobsInsertManyParams,
    PlainBatch,
    RunsCompleteParams,
    RunsStartParams,
)
from duetime.store.sqlfile import load_queries
from duetime.store.sqlite.commit_groups import CommitGroups

_C = SQLiteCodec()
_Q = load_queries("sqlite")
RUN_COLUMNS = (
    "id", "job_id", "tenant", "job_name", "task", "queue", "payload", "scheduled_for",
    "available_at", "priority", "max_attempts", "backoff_base", "backoff_factor", "backoff_cap",
    "timeout_s", "delivery", "one_shot", "trigger", "idempotency_key", "request_hash", "target",
    "concurrency_key", "misfire_at", "retry_rules", "origin",
)  # fmt: skip
"""The run values (store/_values.py) ``runs_insert_values`` binds, in its column order."""
_RUNS_PER_INSERT = 1000
"""Runs per ``runs_insert_values`` statement: SQLite binds at most 32,766 parameters."""


def _encode(value: Any) -> Any:
    """A parameter as SQLite keeps it: instants and durations as integer microseconds, ids
    as text, lists (PostgreSQL's arrays) as JSON text."""
    if isinstance(value, datetime):
        return to_micros(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if isinstance(value, list | tuple):
        return _json.dumps([_encode(v) for v in value])
    return value


def _json_value(value: Any) -> Any:
    """A value inside a JSON parameter (``json_each``): encoded as a column would be."""
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return _encode(value)


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _encode(v) for k, v in values.items()}


@functools.lru_cache(maxsize=8)
def _runs_values_statement(runs: int) -> str:
    """``runs_insert_values`` for ``runs`` runs."""
    row = "(" + ", ".join("?" * len(RUN_COLUMNS)) + ")"
    return _Q["runs_insert_values"].format(
        columns=", ".join(RUN_COLUMNS), values=", ".join([row] * runs)
    )


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path``, ``sqlite://rel/path``, or a plain path."""
    for prefix in ("sqlite:///", "sqlite://"):
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            return "/" + rest if prefix == "sqlite:///" and not rest.startswith("/") else rest
    return url


class SQLiteStore(SQLStore):
    dialect = "sqlite"
    codec = _C
    notifies_in_statement = False
    transient_errors: tuple[type[BaseException], ...] = (sqlite3.OperationalError,)

    def __init__(self, url: str, *, clock: Clock | None = None, create: bool = True) -> None:
        self.path = sqlite_path(url)
        self.create = create
        self.clock: Clock = clock or SystemClock()
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._groups = CommitGroups(self._lock)
        self._runs_event = asyncio.Event()
        self._outbox_event = asyncio.Event()  # never set: no NOTIFY (the relays poll)

    # --- connection and transactions ----------------------------------------------------------

    async def open(self) -> None:
        if self._conn is not None:
            return
        where = self.path if self.path == ":memory:" else self._check_path()
        try:
            conn = await aiosqlite.connect(where, isolation_level=None, timeout=30)
        except sqlite3.Error as exc:
            raise ConnectError(self.path, str(exc), retryable=False) from exc
        try:
            conn.row_factory = sqlite3.Row
            await conn.execute("PRAGMA busy_timeout = 30000")
            await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA synchronous = FULL")
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException as exc:
            await conn.close()  # its thread would keep the process alive
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            ):
                raise ConnectError(
                    self.path, f"not a SQLite database ({exc})", retryable=False
                ) from exc
            raise
        self._conn = conn

    def _check_path(self) -> str:
        """What to open for :attr:`path`. A directory is one clear error. A missing file: with
        ``create`` its missing directories are made; without, a missing directory is an error
        and a missing file in an existing one reads as an empty database (opened in memory:
        nothing is created)."""
        path = Path(self.path)
        if path.is_dir():
            raise ConnectError(self.path, "is a directory, not a database file", retryable=False)
        if path.exists():
            return self.path
        if not self.create:
            if not path.parent.is_dir():
                raise ConnectError(self.path, f"no such directory: {path.parent}", retryable=False)
            return ":memory:"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConnectError(self.path, str(exc), retryable=False) from exc
        return self.path

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise RuntimeError("store is not open: call await store.open() first")
        return self._conn

    def _tx(self) -> contextlib.AbstractAsyncContextManager[aiosqlite.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (retried while another process holds the lock),
        shared with the other calls of this process that meet it: one commit for the group,
        each call answered once it is durable (store/sqlite/commit_groups.py)."""
        return self._groups.write(lambda: self.conn)

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            yield self.conn

    def _write(self) -> contextlib.AbstractAsyncContextManager[aiosqlite.Connection]:
        """One writing statement: its own ``BEGIN IMMEDIATE`` transaction."""
        return self._tx()

    @contextlib.asynccontextmanager
    async def _claim_steps(self) -> AsyncIterator[ClaimSteps]:
        # one transaction for the whole claim: BEGIN IMMEDIATE is the locked step's lock
        async with self._tx() as conn:
            here = lambda: contextlib.nullcontext(conn)  # noqa: E731
            yield ClaimSteps(fair=here, locked=here)

    async def _all(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> list[Any]:
        # one trip to the connection's thread (execute, fetchall and close are three): each
        # trip waits for the event loop's turn while the process lock is held
        return list(await conn.execute_fetchall(_Q[name], _params(values)))

    async def _audit_insert(self, conn: aiosqlite.Connection, values: dict[str, Any]) -> None:
        # one trip to the connection's thread (execute, then close, are two): the audit record
        # follows every trigger (docs/decisions/0021)
        await conn.execute_fetchall(_Q["audit_insert"], _params(values))

    async def _exec(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> int:
        # one trip, as _all; the rows changed are the connection's running total's growth (the
        # process lock is held, so no other statement of this connection runs meanwhile; the
        # schema has no triggers, whose changes the total would count and rowcount would not —
        # nor would it count the rows an ON DELETE CASCADE removes: job_delete's and
        # workflow_instances_prune's counts include them, and no caller reads those)
        before = conn.total_changes
        await conn.execute_fetchall(_Q[name], _params(values))
        return conn.total_changes - before

    async def _now(self, conn: aiosqlite.Connection, now: datetime | None) -> datetime:
        return now if now is not None else self.clock.now()

    def _fixed_now(self, now: datetime | None) -> datetime:
        return now if now is not None else self.clock.now()

    def _records(self, rows: Sequence[dict[str, Any]]) -> str:
        return _json.dumps([{k: _json_value(v) for k, v in row.items()} for row in rows])

    async def _runs_insert_rows(
        self, conn: aiosqlite.Connection, rows: Sequence[dict[str, Any]], now: datetime
    ) -> list[Any]:
        inserted: list[Any] = []
        for start in range(0, len(rows), _RUNS_PER_INSERT):
            chunk = rows[start : start + _RUNS_PER_INSERT]
            params = [to_micros(now)]
            params += [_encode(row[column]) for row in chunk for column in RUN_COLUMNS]
            inserted += await conn.execute_fetchall(_runs_values_statement(len(chunk)), params)
        return inserted

    async def _materialize_plain(
        self, conn: aiosqlite.Connection, values: dict[str, Any], *, leased: bool
    ) -> PlainBatch:
        # the runs, then the same jobs advanced (queries/materialize.sql), in one BEGIN IMMEDIATE
        suffix = "_leased" if leased else ""
        rows = await self._all(conn, f"runs_materialize_plain{suffix}", **values)
        jobs = await self._exec(conn, f"jobs_advance_plain{suffix}", **values)
        counted = Counter((r["tenant"], r["task"], r["scheduled_for"]) for r in rows)
        made = tuple(
            (t, k, EPOCH + timedelta(microseconds=at), n) for (t, k, at), n in counted.items()
        )
        if rows:
            await self._notify(conn)
        return PlainBatch(jobs=jobs, made=made)

    async def _notify(self, conn: aiosqlite.Connection) -> None:
        # no NOTIFY: wake this process's waiters (a waiter's claim then waits for the lock,
        # so it reads after the commit); other processes poll
        self._runs_event.set()

    async def _lock_keys(self, conn: aiosqlite.Connection, keys: list[str]) -> bool:
        return False  # BEGIN IMMEDIATE already holds the whole database

    async def _attempts_insert(
        self,
        conn: aiosqlite.Connection,
        runs: Sequence[Run],
        outcome: str,
        message: str,
        now: datetime,
    ) -> None:
        for run in runs:
            await self._exec(
                conn,
                "attempt_record",
                run_id=run.id,
                token=run.token,
                number=run.attempt,
                worker_id=run.lease_owner or "?",
                claimed_at=run.claimed_at or now,
                started_at=run.started_at,
                outcome=outcome,
                error_class=None,
                error_message=message,
                now=now,
            )

    async def db_now(self) -> datetime:
        return self.clock.now()  # the host clock: no connection needed

    # --- schema ---------------------------------------------------------------------------

    async def migrate(self, *, alive_within: float = 60.0) -> int:
        async with self._tx() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS duetime_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
            )
            cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM duetime_migrations")
            row = await cursor.fetchone()
            current = int(row[0]) if row else 0
            for migration in self._migrations_after(current):
                for statement in _split_statements(migration.sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO duetime_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, to_micros(self.clock.now())),
                )
                current = migration.version
        return current

    # --- bulk -----------------------------------------------------------------------------

    async def jobs_insert_many(self, params: JobsInsertManyParams) -> int:
        if not params.jobs:
            return 0
        now = to_micros(self._fixed_now(params.now))
        extra = {"status": "active", "created_at": now, "updated_at": now}
        rows = [
            {
                **_params(job_values(job.shape, job.job_id, job.schedule, job.next_fire_at)),
                "name": job.name,
                "payload": job.payload,
                "metadata": job.metadata,
                "partition_key": job.partition,
                **extra,
            }
            for job in params.jobs
        ]
        names = list(rows[0])
        statement = _Q["jobs_bulk_insert"].format(
            columns=", ".join(names), values=", ".join(f":{n}" for n in names)
        )
        async with self._tx() as conn:
            await bulk_cap_check(self, conn, params.jobs)
            cursor = await conn.executemany(statement, rows)
            inserted = cursor.rowcount
            await cursor.close()
        return inserted

    # --- runs: the worker's path ----------------------------------------------------------

    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        runs = sorted(dict.fromkeys(params.runs))  # each (run, token) once
        if not runs:
            return set()
        by_id = {str(run_id): run_id for run_id, _ in runs}
        async with self._tx() as conn:
            now = self._fixed_now(params.now)  # read under the lock: one instant per batch
            keyed = await self._all(conn, "runs_start_keyed_info", runs=runs, now=now)
            rows = await self._all(
                conn, "runs_start", runs=runs, now=now, lease_ttl=params.lease_ttl
            )
            started = {by_id[r["id"]] for r in rows}
            if keyed:
                started |= await self._start_keyed(conn, keyed, now, params.lease_ttl)
            await self._run_events(conn, [r[0] for r in runs], START_EVENTS, now)
        return started

    async def _start_keyed(
        self,
        conn: aiosqlite.Connection,
        rows: list[Any],
        now: datetime,
        lease_ttl: float | None,
    ) -> set[uuid.UUID]:
        """The runs of a start batch that have an overlap key (``runs_start_keyed_info`` rows,
        in id order), in the caller's transaction: each key's started runs counted once, then
        judged (``_start_judged``). Returns the runs started."""
        eligible = [start_candidate_from_row(r, _C) for r in rows if r["eligible"]]
        if not eligible:
            return set()
        keys = sorted({c.key for c in eligible})
        counted = await self._all(conn, "runs_started_by_key", keys=keys)
        started, judged = await self._start_judged(conn, eligible, counted, now, lease_ttl)
        if judged is not None:
            started.update(_C.uuid(r["id"]) for r in await judged())
        return started

    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]:
        if not params.completions:
            return []
        now = self._fixed_now(params.now)
        cs, first = unique_completions(params.completions)
        batch = _json.dumps(
            [
                [str(c.run_id), c.token, str(c.next_state), _encode(c.available_at), c.reason,
                 c.error_class, c.error_message, int(c.refund_attempt), c.result]
                for c in cs
            ]
        )  # fmt: skip
        async with self._tx() as conn:
            rows = await self._all(
                conn, "runs_complete", batch=batch, now=now, tenant=params.tenant
            )
            done = {(r["id"], r["token"]): r["job_id"] for r in rows}
            applied = [(str(c.run_id), c.token) in done for c in cs]
            records = _json.dumps(
                [
                    [str(c.run_id), c.token, c.attempt, c.worker_id, _encode(c.claimed_at),
                     _encode(c.started_at), str(c.outcome) if ok else "stale", c.error_class,
                     c.error_message, c.traceback]
                    for c, ok in zip(cs, applied, strict=True)
                ]
            )  # fmt: skip
            await self._exec(
                conn, "attempts_record", records=records, now=now, tenant=params.tenant
            )
            ended = [
                done[(str(c.run_id), c.token)]
                for c, ok in zip(cs, applied, strict=True)
                if ok and c.completes_job and c.next_state.terminal
            ]
            if ended:
                await self._exec(conn, "jobs_complete", ids=ended, now=now)
            if any(c.workflow is not None or c.outbox is not None for c in cs):
                planned = [c for c, ok in zip(cs, applied, strict=True) if ok]
                await self._workflows_advance(conn, planned, now)
                await self._outbox_insert(conn, planned, now)
            if self.run_events is not None:
                applied_cs = [c for c, ok in zip(cs, applied, strict=True) if ok]
                await self._run_events(
                    conn, completion_event_runs(applied_cs), COMPLETION_EVENTS, now
                )
        ok_pairs = {(c.run_id.int, c.token) for c, ok in zip(cs, applied, strict=True) if ok}
        return completion_answers(params.completions, first, ok_pairs)

    async def exactly_once_begin(self) -> NoReturn:
        raise UnsupportedFeature(
            "exactly_once delivery needs PostgreSQL; SQLite cannot commit a handler's writes "
            "with the run's completion"
        )

    async def exactly_once_supported(self) -> None:
        raise UnsupportedFeature("exactly_once delivery needs PostgreSQL; SQLite cannot provide it")


def _split_statements(sql: str) -> list[str]:
    """Split a migration into statements (migrations hold no ``;`` inside literals)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
