"""The embedded store: one SQLite file, WAL mode, durable commits.

Concurrency: every write runs in ``BEGIN IMMEDIATE`` (one writer at a time across every
process sharing the file; others wait up to ``busy_timeout`` and are retried), so each
store method is one serializable transaction. Within a process one connection is shared and
guarded by a lock. SQLite shares the host clock: ``now`` defaults to ``clock.now()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite

from duetime import _json
from duetime._clock import Clock, SystemClock
from duetime._types import (
    ApiKey,
    Attempt,
    Job,
    JobStatus,
    Leadership,
    NodeInfo,
    OverlapPolicy,
    Page,
    Run,
    RunState,
    RunTrigger,
    TenantLimits,
    TenantQueueStats,
    WorkerInfo,
)
from duetime.errors import Conflict, NotFound, SchemaError, UnsupportedFeature
from duetime.store import _rows
from duetime.store._fairness import Aging, overlap_keys, plan_locked_claim
from duetime.store._overlap import StartVerdict, decide_start
from duetime.store._rows import SQLiteCodec, to_micros
from duetime.store._values import (
    PENDING_END_STATE,
    STATUS_MOVES,
    completion_answers,
    job_values,
    new_webhook_secret,
    planned_run_values,
    trigger_run_values,
    unique_completions,
)
from duetime.store.base import (
    SCHEMA_VERSION,
    ApiKeyCreateParams,
    ApiKeyListParams,
    ApiKeyRevokeParams,
    ApiKeyTouchParams,
    ClaimedRun,
    HistoryPruneParams,
    JobListParams,
    JobRef,
    JobSetStatusParams,
    JobsInsertManyParams,
    JobUpsertParams,
    LeaderElectParams,
    LeaderFence,
    LeasesReapParams,
    MaterializeResult,
    PlannedSkip,
    ReapResult,
    RunCancelParams,
    RunListParams,
    RunReplayParams,
    RunsClaimParams,
    RunsCompleteParams,
    RunsHeartbeatParams,
    RunsMaterializeParams,
    RunsMisfireParams,
    RunsStartParams,
    RunStartParams,
    RunTriggerParams,
    TenantLimitsSetParams,
)
from duetime.store.sqlfile import load_migrations, load_queries
from duetime.store.sqlite.longruns import SQLiteLongRuns
from duetime.store.sqlite.observability import SQLiteObservability

_C = SQLiteCodec()
_Q = load_queries("sqlite")
_BUSY_RETRIES = 50


def _us(at: datetime | None) -> int | None:
    return None if at is None else to_micros(at)


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_micros(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    return value


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _encode(v) for k, v in values.items()}


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path``, ``sqlite://rel/path``, or a plain path."""
    for prefix in ("sqlite:///", "sqlite://"):
        if url.startswith(prefix):
            rest = url[len(prefix) :]
            return "/" + rest if prefix == "sqlite:///" and not rest.startswith("/") else rest
    return url


class SQLiteStore(SQLiteLongRuns, SQLiteObservability):
    dialect = "sqlite"
    transient_errors: tuple[type[BaseException], ...] = (sqlite3.OperationalError,)

    def __init__(self, url: str, *, clock: Clock | None = None) -> None:
        self.path = sqlite_path(url)
        self.clock = clock or SystemClock()
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()
        self._runs_event = asyncio.Event()

    # --- connection and transactions ----------------------------------------------------------

    async def open(self) -> None:
        if self._conn is not None:
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=30)
        conn.row_factory = sqlite3.Row
        await conn.execute("PRAGMA busy_timeout = 30000")
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")
        self._conn = conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    @property
    def conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise RuntimeError("store is not open: call await store.open() first")
        return self._conn

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, retried while another process holds the lock."""
        async with self._lock:
            conn = self.conn
            if conn.in_transaction:
                # left open by a holder cancelled mid-statement; it never reported success
                await asyncio.shield(conn.execute("ROLLBACK"))
            for attempt in range(_BUSY_RETRIES):
                try:
                    await conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    await asyncio.sleep(min(0.5, 0.01 * 2**attempt))
            else:
                raise sqlite3.OperationalError("database stayed locked; gave up")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    await asyncio.shield(conn.execute("ROLLBACK"))
                raise
            await asyncio.shield(conn.execute("COMMIT"))

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            yield self.conn

    async def _all(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> list[Any]:
        cursor = await conn.execute(_Q[name], _params(values))
        rows = await cursor.fetchall()
        await cursor.close()
        return list(rows)

    async def _one(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> Any | None:
        rows = await self._all(conn, name, **values)
        return rows[0] if rows else None

    async def _exec(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> int:
        cursor = await conn.execute(_Q[name], _params(values))
        count = cursor.rowcount
        await cursor.close()
        return count

    def _now(self, now: datetime | None) -> datetime:
        return now if now is not None else self.clock.now()

    async def db_now(self) -> datetime:
        return self.clock.now()

    async def wait_for_runs(self, timeout: float) -> bool:
        """Wait until this process created runs (True) or ``timeout`` passes (False).

        SQLite has no NOTIFY: other processes sharing the file are seen by polling."""
        try:
            await asyncio.wait_for(self._runs_event.wait(), timeout)
        except TimeoutError:
            return False
        self._runs_event.clear()
        return True

    # --- schema ---------------------------------------------------------------------------

    async def migrate(self) -> int:
        async with self._tx() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS duetime_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
            )
            cursor = await conn.execute("SELECT coalesce(max(version), 0) FROM duetime_migrations")
            row = await cursor.fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise SchemaError(
                    f"database schema is v{current}; this duetime knows up to v{SCHEMA_VERSION}"
                )
            for migration in load_migrations("sqlite"):
                if migration.version <= current:
                    continue
                for statement in _split_statements(migration.sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO duetime_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, to_micros(self.clock.now())),
                )
                current = migration.version
        return current

    async def schema_version(self) -> int | None:
        async with self._read() as conn:
            cursor = await conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'duetime_migrations'"
            )
            if await cursor.fetchone() is None:
                return None
            cursor = await conn.execute("SELECT max(version) FROM duetime_migrations")
            row = await cursor.fetchone()
            return None if row is None or row[0] is None else int(row[0])

    async def check_schema(self) -> None:
        version = await self.schema_version()
        if version is None:
            raise SchemaError("database has no duetime schema: run `duetime migrate`")
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"database schema is v{version}; this duetime knows up to v{SCHEMA_VERSION}"
            )
        if version < SCHEMA_VERSION:
            raise SchemaError(f"database schema is v{version}: run `duetime migrate`")

    # --- jobs -----------------------------------------------------------------------------

    async def _job_row(self, conn: aiosqlite.Connection, ref: JobRef) -> Any:
        if ref.id is not None:
            row = await self._one(conn, "job_get_by_id", tenant=ref.tenant, id=ref.id)
        else:
            row = await self._one(conn, "job_get_by_name", tenant=ref.tenant, name=ref.name)
        if row is None:
            raise NotFound(f"job {ref.id or ref.name!s} not found")
        return row

    async def job_upsert(self, params: JobUpsertParams) -> tuple[Job, bool]:
        now = self.clock.now()
        async with self._tx() as conn:
            existing = await self._one(
                conn, "job_get_by_name", tenant=params.tenant, name=params.name
            )
            if existing is None:
                values = job_values(params, params.job_id, params.schedule, params.next_fire_at)
                row = await self._one(conn, "job_insert", **values, now=now)
                return _rows.job_from_row(row, _C), True
            if params.create_only:
                raise Conflict(f"a job named {params.name!r} already exists")
            old = _rows.job_from_row(existing, _C)
            if params.equivalent(old.schedule):
                schedule, next_fire_at, status = old.schedule, old.next_fire_at, old.status
            else:
                schedule, next_fire_at = params.schedule, params.next_fire_at
                status = JobStatus.ACTIVE if old.status is JobStatus.COMPLETED else old.status
                await self._exec(
                    conn,
                    "runs_end_pending",
                    job_id=old.id,
                    state=RunState.SKIPPED,
                    reason="schedule_changed",
                    include_manual=False,
                    now=now,
                )
            values = job_values(params, old.id, schedule, next_fire_at)
            row = await self._one(conn, "job_update", **values, status=status, now=now)
            return _rows.job_from_row(row, _C), False

    async def job_get(self, ref: JobRef) -> Job:
        async with self._read() as conn:
            return _rows.job_from_row(await self._job_row(conn, ref), _C)

    async def job_list(self, params: JobListParams) -> Page[Job]:
        async with self._read() as conn:
            rows = await self._all(
                conn,
                "job_list",
                tenant=params.tenant,
                status=None if params.status is None else str(params.status),
                name_prefix=params.name_prefix,
                tag=params.tag,
                after_name=params.after_name,
                limit=params.limit + 1,
            )
        jobs = [_rows.job_from_row(r, _C) for r in rows[: params.limit]]
        cursor = jobs[-1].name if len(rows) > params.limit else None
        return Page(jobs, cursor)

    async def job_set_status(self, params: JobSetStatusParams) -> Job:
        now = self._now(params.now)
        async with self._tx() as conn:
            current = _rows.job_from_row(await self._job_row(conn, params.job), _C)
            allowed_from = STATUS_MOVES.get(params.status, frozenset())
            if current.status is params.status:
                return current
            if current.status not in allowed_from:
                raise Conflict(
                    f"job {current.name!r} is {current.status}; cannot become {params.status}"
                )
            row = await self._one(
                conn,
                "job_set_status",
                id=current.id,
                status=str(params.status),
                next_fire_at=params.next_fire_at if params.status is JobStatus.ACTIVE else None,
                from_states=_json.dumps([str(s) for s in allowed_from]),
                now=now,
            )
            if row is None:
                raise Conflict(f"job {current.name!r} changed concurrently; try again")
            if params.status in PENDING_END_STATE:
                state, reason = PENDING_END_STATE[params.status]
                await self._exec(
                    conn,
                    "runs_end_pending",
                    job_id=current.id,
                    state=state,
                    reason=reason,
                    include_manual=params.status is JobStatus.CANCELLED,
                    now=now,
                )
            return _rows.job_from_row(row, _C)

    async def job_delete(self, ref: JobRef) -> None:
        async with self._tx() as conn:
            row = await self._job_row(conn, ref)
            await self._exec(conn, "job_delete", id=row["id"])

    # --- bulk -----------------------------------------------------------------------------

    async def jobs_insert_many(self, params: JobsInsertManyParams) -> int:
        if not params.jobs:
            return 0
        now = to_micros(self._now(params.now))
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
            cursor = await conn.executemany(statement, rows)
            inserted = cursor.rowcount
            await cursor.close()
        return inserted

    # --- runs: materialize, trigger -------------------------------------------------------

    async def runs_materialize(self, params: RunsMaterializeParams) -> MaterializeResult:
        now = self._now(params.now)
        until = now + timedelta(seconds=params.horizon)
        low, high = params.partitions or (0, 255)
        created = skips = 0
        async with self._tx() as conn:
            rows = await self._all(
                conn,
                "jobs_due",
                until=until,
                limit=params.limit,
                partition_low=low,
                partition_high=high,
            )
            jobs = [_rows.job_from_row(r, _C) for r in rows]
            for job in jobs:
                plan = params.planner(job, now, until)
                for planned in plan.runs:
                    row = await self._one(
                        conn, "run_insert", **planned_run_values(job, planned), now=now
                    )
                    created += row is not None
                for skip in plan.skips:
                    await self._exec(
                        conn,
                        "skip_insert",
                        job_id=job.id,
                        first_at=skip.first,
                        last_at=skip.last,
                        count=skip.count,
                        reason=skip.reason,
                        now=now,
                    )
                    skips += 1
                await self._exec(conn, "job_advance", id=job.id, next_fire_at=plan.next_fire_at)
        if created:
            self._runs_event.set()
        return MaterializeResult(jobs=len(jobs), runs_created=created, skips=skips, now=now)

    async def run_trigger(self, params: RunTriggerParams) -> tuple[Run, bool]:
        now = self._now(params.now)
        async with self._tx() as conn:
            job = _rows.job_from_row(await self._job_row(conn, params.job), _C)
            if job.status is JobStatus.CANCELLED:
                raise Conflict(f"job {job.name!r} is cancelled; it cannot be triggered")
            if params.idempotency_key is not None:
                row = await self._one(
                    conn, "run_get_by_key", job_id=job.id, idempotency_key=params.idempotency_key
                )
                if row is not None:
                    if row["request_hash"] != params.request_hash:
                        raise Conflict(
                            f"idempotency key {params.idempotency_key!r} was used with a "
                            "different request"
                        )
                    return _rows.run_from_row(row, _C), False
            row = await self._one(
                conn, "run_insert", **trigger_run_values(job, params, now), now=now
            )
            assert row is not None, "a fresh idempotency key cannot conflict"
        self._runs_event.set()
        return _rows.run_from_row(row, _C), True

    # --- runs: the worker's path ----------------------------------------------------------

    async def runs_claim(self, params: RunsClaimParams) -> list[ClaimedRun]:
        if not params.tasks or (params.queues is not None and not params.queues):
            return []
        aging = Aging(params.priority_aging, params.priority_aging_cap)
        async with self._tx() as conn:
            now = self._now(params.now)  # read under the lock: start buckets refill monotonically
            rows = await self._claim_fair(conn, params, now, aging, params.limit, only_fast=False)
            if len(rows) < params.limit:
                # runs a quota or an overlap key limits; what a quota or a busy key keeps
                # from its share goes to the others
                locked, found = await self._claim_locked(
                    conn, params, now, aging, params.limit - len(rows)
                )
                rows += locked
                if found and len(rows) < params.limit:
                    rows += await self._claim_fair(
                        conn, params, now, aging, params.limit - len(rows), only_fast=True
                    )
        claimed = [_rows.claimed_from_row(r, _C) for r in rows]
        claimed.sort(key=lambda c: (c.run.available_at, -c.run.priority))
        return claimed

    async def _claim_fair(
        self,
        conn: aiosqlite.Connection,
        params: RunsClaimParams,
        now: datetime,
        aging: Aging,
        limit: int,
        *,
        only_fast: bool,
    ) -> list[Any]:
        return await self._all(
            conn,
            "runs_claim_fair",
            worker_id=params.worker_id,
            lease_expires_at=now + timedelta(seconds=params.lease_ttl),
            now=now,
            until=now + timedelta(seconds=params.lookahead),
            tasks=_json.dumps(list(params.tasks)),
            limit=limit,
            tenant=params.tenant,
            queues=None if params.queues is None else _json.dumps(list(params.queues)),
            aging_us=aging.interval_us,
            aging_cap=aging.cap,
            only_fast=only_fast,
        )

    async def _claim_locked(
        self,
        conn: aiosqlite.Connection,
        params: RunsClaimParams,
        now: datetime,
        aging: Aging,
        capacity: int,
    ) -> tuple[list[Any], bool]:
        """Claim runs a quota or an overlap key limits (inside the claim's transaction): count
        what runs per tenant and key, decide (store/_fairness.py), record the start buckets.
        Returns the claimed rows and whether there were candidates at all."""
        found = await self._all(
            conn,
            "runs_claim_locked_candidates",
            until=now + timedelta(seconds=params.lookahead),
            tasks=_json.dumps(list(params.tasks)),
            tenant=params.tenant,
            queues=None if params.queues is None else _json.dumps(list(params.queues)),
            limit=capacity * 4,
        )
        if not found:
            return [], False
        candidates = [_rows.locked_candidate_from_row(r, _C, now) for r in found]
        keys = overlap_keys([c for _, c in candidates])
        limited = sorted({r["tenant"] for r in found if r["limited"]})
        counted = await self._all(conn, "runs_running_by_key", keys=_json.dumps(keys))
        quota_rows = await self._all(conn, "tenant_quotas", tenants=_json.dumps(limited))
        plan = plan_locked_claim(
            candidates,
            weights={r["tenant"]: r["weight"] for r in found},
            in_flight={r["tenant"]: r["running"] for r in found},
            running={r["concurrency_key"]: r["running"] for r in counted},
            quotas={
                q.tenant: q for q in (_rows.tenant_quota_from_row(r, _C, now) for r in quota_rows)
            },
            capacity=capacity,
            now=now,
            aging=aging,
        )
        decision = plan.decision
        for key in sorted(decision.replace_keys):
            await self._replace_running(conn, key, None, now)
        if decision.skip:
            await self._exec(
                conn, "runs_skip_overlap", ids=_json.dumps([str(i) for i in decision.skip]), now=now
            )
        buckets = plan.buckets()
        if buckets:
            await conn.executemany(
                _Q["tenant_buckets_set"],
                [{"tenant": t, "tokens": tokens, "now": to_micros(now)} for t, tokens in buckets],
            )
        if not decision.claim:
            return [], True
        claimed = await self._all(
            conn,
            "runs_claim_ids",
            ids=_json.dumps([str(i) for i in decision.claim]),
            worker_id=params.worker_id,
            lease_expires_at=now + timedelta(seconds=params.lease_ttl),
            now=now,
        )
        return claimed, True

    async def runs_misfire(self, params: RunsMisfireParams) -> int:
        async with self._tx() as conn:
            return await self._exec(
                conn, "runs_misfire", now=self._now(params.now), limit=params.limit
            )

    async def run_start(self, params: RunStartParams) -> bool:
        started = await self.runs_start(
            RunsStartParams(
                [(params.run_id, params.token)], now=params.now, lease_ttl=params.lease_ttl
            )
        )
        return params.run_id in started

    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        runs = sorted(dict.fromkeys(params.runs))  # each (run, token) once
        if not runs:
            return set()
        now = self._now(params.now)
        expires = None if params.lease_ttl is None else now + timedelta(seconds=params.lease_ttl)
        by_id = {str(run_id): run_id for run_id, _ in runs}
        batch = _json.dumps([[str(run_id), token] for run_id, token in runs])
        async with self._tx() as conn:
            keyed = {r["id"] for r in await self._all(conn, "runs_start_keyed", runs=batch)}
            rows = await self._all(
                conn, "runs_start", runs=batch, now=now, lease_expires_at=expires
            )
            started = {by_id[r["id"]] for r in rows}
            for run_id, token in runs:  # runs with an overlap key, one by one
                if str(run_id) in keyed and await self._start_one(
                    conn, run_id, token, now, expires
                ):
                    started.add(run_id)
        return started

    async def _start_one(
        self,
        conn: aiosqlite.Connection,
        run_id: uuid.UUID,
        token: int,
        now: datetime,
        lease_expires_at: datetime | None,
    ) -> bool:
        """run_start of one run in the caller's transaction; a run with an overlap key is
        judged by its policy (skipped, deferred, or replacing the key's running runs)."""
        info = await self._one(conn, "run_start_overlap_info", id=run_id, token=token)
        if info is not None:
            counted = await self._one(
                conn, "runs_started_of_key", key=info["concurrency_key"], id=run_id
            )
            verdict = decide_start(
                OverlapPolicy(info["overlap_policy"]),
                RunTrigger(info["trigger"]),
                info["max_concurrency"],
                counted["running"],
            )
            if verdict is StartVerdict.SKIP or verdict is StartVerdict.DEFER:
                query = "run_start_skip" if verdict is StartVerdict.SKIP else "run_start_defer"
                await self._exec(conn, query, id=run_id, token=token, now=now)
                return False
            if verdict is StartVerdict.REPLACE:
                await self._replace_running(conn, info["concurrency_key"], run_id, now)
        return (
            await self._exec(
                conn,
                "run_start",
                id=run_id,
                token=token,
                now=now,
                lease_expires_at=lease_expires_at,
            )
            == 1
        )

    async def _replace_running(
        self, conn: aiosqlite.Connection, key: str, keep: uuid.UUID | None, now: datetime
    ) -> None:
        """Cancel the running runs of ``key`` (but ``keep``), recording their attempts."""
        for row in await self._all(conn, "runs_running_of_keys", keys=_json.dumps([key])):
            victim = _rows.run_from_row(row, _C)
            if victim.id == keep:
                continue
            if await self._exec(conn, "run_replace", id=victim.id, token=victim.token, now=now):
                await self._exec(
                    conn,
                    "attempt_record",
                    run_id=victim.id,
                    token=victim.token,
                    number=victim.attempt,
                    worker_id=victim.lease_owner or "?",
                    claimed_at=victim.claimed_at or now,
                    started_at=victim.started_at,
                    outcome="cancelled",
                    error_class=None,
                    error_message="replaced by a newer run",
                    now=now,
                )

    async def runs_heartbeat(self, params: RunsHeartbeatParams) -> set[uuid.UUID]:
        now = self._now(params.now)
        expires = now + timedelta(seconds=params.lease_ttl)
        kept: set[uuid.UUID] = set()
        async with self._tx() as conn:
            for run_id, token in params.runs:
                row = await self._one(
                    conn,
                    "run_heartbeat",
                    id=run_id,
                    token=token,
                    worker_id=params.worker_id,
                    lease_expires_at=expires,
                )
                if row is not None:
                    kept.add(run_id)
        return kept

    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]:
        if not params.completions:
            return []
        now = self._now(params.now)
        cs, first = unique_completions(params.completions)
        batch = _json.dumps(
            [
                [str(c.run_id), c.token, str(c.next_state), _encode(c.available_at), c.reason,
                 c.error_class, c.error_message, int(c.refund_attempt)]
                for c in cs
            ]
        )  # fmt: skip
        async with self._tx() as conn:
            rows = await self._all(conn, "runs_complete", batch=batch, now=now)
            done = {(r["id"], r["token"]): r["job_id"] for r in rows}
            applied = [(str(c.run_id), c.token) in done for c in cs]
            records = _json.dumps(
                [
                    [str(c.run_id), c.token, c.attempt, c.worker_id, _encode(c.claimed_at),
                     _encode(c.started_at), str(c.outcome) if ok else "stale", c.error_class,
                     c.error_message]
                    for c, ok in zip(cs, applied, strict=True)
                ]
            )  # fmt: skip
            await self._exec(conn, "attempts_record", records=records, now=now)
            ended = [
                done[(str(c.run_id), c.token)]
                for c, ok in zip(cs, applied, strict=True)
                if ok and c.completes_job and c.next_state.terminal
            ]
            if ended:
                await self._exec(conn, "jobs_complete_many", ids=_json.dumps(ended), now=now)
        ok_pairs = {(c.run_id, c.token) for c, ok in zip(cs, applied, strict=True) if ok}
        return completion_answers(params.completions, first, ok_pairs)

    async def leases_reap(self, params: LeasesReapParams) -> ReapResult:
        now = self._now(params.now)
        rescheduled = dead = 0
        reaped: list[tuple[str, str, str]] = []
        async with self._tx() as conn:
            if not await self._holds(conn, params.leader, now):
                return ReapResult(0, 0)
            rows = await self._all(conn, "leases_expired", now=now, limit=params.limit)
            for row in rows:
                claimed = _rows.claimed_from_row(row, _C)
                run = claimed.run
                next_state, reason = _rows.lease_lost_decision(run, claimed.delivery)
                changed = await self._exec(
                    conn,
                    "run_reap",
                    id=run.id,
                    token=run.token,
                    next_state=str(next_state),
                    reason=reason,
                    now=now,
                )
                if not changed:
                    continue
                reaped.append((run.tenant, run.task, str(next_state)))
                await self._exec(
                    conn,
                    "attempt_record",
                    run_id=run.id,
                    token=run.token,
                    number=run.attempt,
                    worker_id=run.lease_owner or "?",
                    claimed_at=run.claimed_at or now,
                    started_at=run.started_at,
                    outcome="lost",
                    error_class=None,
                    error_message="lease expired",
                    now=now,
                )
                if next_state is RunState.DEAD:
                    dead += 1
                    if claimed.one_shot and run.trigger is RunTrigger.SCHEDULE:
                        await self._exec(conn, "job_complete", id=run.job_id, now=now)
                else:
                    rescheduled += 1
        if rescheduled:
            self._runs_event.set()
        return ReapResult(rescheduled=rescheduled, dead=dead, reaped=tuple(reaped))

    # --- runs: reading and operator actions -----------------------------------------------

    async def run_get(self, tenant: str, run_id: uuid.UUID) -> Run:
        async with self._read() as conn:
            row = await self._one(conn, "run_get", tenant=tenant, id=run_id)
        if row is None:
            raise NotFound(f"run {run_id} not found")
        return _rows.run_from_row(row, _C)

    async def run_get_claimed(self, tenant: str, run_id: uuid.UUID) -> ClaimedRun:
        async with self._read() as conn:
            row = await self._one(conn, "run_get", tenant=tenant, id=run_id)
        if row is None:
            raise NotFound(f"run {run_id} not found")
        return _rows.claimed_from_row(row, _C)

    async def runs_list(self, params: RunListParams) -> Page[Run]:
        before_at, before_id = params.before or (None, None)
        async with self._read() as conn:
            rows = await self._all(
                conn,
                "runs_list",
                tenant=params.tenant,
                job_id=params.job_id,
                state=None if params.state is None else str(params.state),
                before_at=before_at,
                before_id=before_id,
                limit=params.limit + 1,
            )
        runs = [_rows.run_from_row(r, _C) for r in rows[: params.limit]]
        cursor = None
        if len(rows) > params.limit:
            cursor = f"{to_micros(runs[-1].scheduled_for)}.{runs[-1].id}"
        return Page(runs, cursor)

    async def attempts_list(self, tenant: str, run_id: uuid.UUID) -> list[Attempt]:
        async with self._read() as conn:
            rows = await self._all(conn, "attempts_list", tenant=tenant, run_id=run_id)
        return [_rows.attempt_from_row(r, _C) for r in rows]

    async def runs_replay(self, params: RunReplayParams) -> list[uuid.UUID]:
        now = self._now(params.now)
        run_ids = None if params.run_ids is None else _json.dumps([str(i) for i in params.run_ids])
        async with self._tx() as conn:
            rows = await self._all(
                conn,
                "runs_replay",
                tenant=params.tenant,
                job_id=params.job_id,
                run_ids=run_ids,
                max_attempts=params.max_attempts,
                limit=params.limit,
                now=now,
            )
        if rows:
            self._runs_event.set()
        return [uuid.UUID(r["id"]) for r in rows]

    async def run_cancel(self, params: RunCancelParams) -> Run:
        now = self._now(params.now)
        async with self._tx() as conn:
            before = await self._one(conn, "run_get", tenant=params.tenant, id=params.run_id)
            if before is None:
                raise NotFound(f"run {params.run_id} not found")
            row = await self._one(
                conn, "run_cancel", tenant=params.tenant, id=params.run_id, now=now
            )
            if row is None:
                raise Conflict(
                    f"run {params.run_id} is {before['state']}; only scheduled or "
                    "running runs can be cancelled"
                )
            if before["state"] == RunState.RUNNING:
                prior = _rows.run_from_row(before, _C)
                await self._exec(
                    conn,
                    "attempt_record",
                    run_id=prior.id,
                    token=prior.token,
                    number=prior.attempt,
                    worker_id=prior.lease_owner or "?",
                    claimed_at=prior.claimed_at or now,
                    started_at=prior.started_at,
                    outcome="cancelled",
                    error_class=None,
                    error_message="cancelled",
                    now=now,
                )
            return _rows.run_from_row(row, _C)

    async def skips_list(self, tenant: str, job_id: uuid.UUID) -> list[PlannedSkip]:
        async with self._read() as conn:
            rows = await self._all(conn, "skips_list", tenant=tenant, job_id=job_id)
        return [_rows.skip_from_row(r, _C) for r in rows]

    # --- leadership, nodes, retention ------------------------------------------------------

    async def _holds(
        self, conn: aiosqlite.Connection, fence: LeaderFence | None, now: datetime
    ) -> bool:
        if fence is None:
            return True
        row = await self._one(conn, "leader_holds", node_id=fence.node_id, term=fence.term, now=now)
        return row is not None

    async def leader_elect(self, params: LeaderElectParams) -> Leadership | None:
        now = self._now(params.now)
        async with self._tx() as conn:
            row = await self._one(
                conn,
                "leader_elect",
                node_id=params.node_id,
                now=now,
                expires_at=now + timedelta(seconds=params.ttl),
            )
        return None if row is None else _rows.leadership_from_row(row, _C)

    async def leader_resign(self, fence: LeaderFence) -> None:
        async with self._tx() as conn:
            await self._exec(
                conn, "leader_resign", node_id=fence.node_id, term=fence.term, now=self.clock.now()
            )

    async def leader_get(self) -> Leadership | None:
        async with self._read() as conn:
            row = await self._one(conn, "leader_get")
        return None if row is None else _rows.leadership_from_row(row, _C)

    async def node_register(self, node: NodeInfo) -> None:
        async with self._tx() as conn:
            await self._exec(
                conn,
                "node_upsert",
                id=node.id,
                host=node.host,
                pid=node.pid,
                roles=_json.dumps(list(node.roles)),
                partitions=node.partitions,
                started_at=node.started_at,
                now=node.heartbeat_at,
            )

    async def node_heartbeat(self, node_id: str, now: datetime | None = None) -> None:
        async with self._tx() as conn:
            await self._exec(conn, "node_heartbeat", id=node_id, now=self._now(now))

    async def node_unregister(self, node_id: str) -> None:
        async with self._tx() as conn:
            await self._exec(conn, "node_delete", id=node_id)

    async def nodes_list(self) -> list[NodeInfo]:
        async with self._read() as conn:
            rows = await self._all(conn, "nodes_list")
        return [_rows.node_from_row(r, _C) for r in rows]

    async def nodes_prune(self, before: datetime) -> int:
        async with self._tx() as conn:
            nodes = await self._exec(conn, "nodes_prune", before=before)
            workers = await self._exec(conn, "workers_prune", before=before)
        return nodes + workers

    async def history_prune(self, params: HistoryPruneParams) -> int:
        async with self._tx() as conn:
            if not await self._holds(conn, params.leader, self.clock.now()):
                return 0
            runs = await self._exec(
                conn, "history_prune_runs", before=params.before, limit=params.limit
            )
            await self._exec(conn, "history_prune_skips", before=params.before, limit=params.limit)
        return runs

    # --- workers --------------------------------------------------------------------------

    async def worker_register(self, worker: WorkerInfo) -> None:
        async with self._tx() as conn:
            await self._exec(
                conn,
                "worker_upsert",
                id=worker.id,
                host=worker.host,
                pid=worker.pid,
                tasks=_json.dumps(list(worker.tasks)),
                queues=_json.dumps(list(worker.queues)),
                started_at=worker.started_at,
                now=worker.heartbeat_at,
            )
            for task in worker.tasks:
                await self._exec(conn, "known_task_upsert", task=task, now=worker.heartbeat_at)

    async def worker_heartbeat(self, worker_id: str, now: datetime | None = None) -> None:
        async with self._tx() as conn:
            await self._exec(conn, "worker_heartbeat", id=worker_id, now=self._now(now))

    async def worker_unregister(self, worker_id: str) -> None:
        async with self._tx() as conn:
            await self._exec(conn, "worker_delete", id=worker_id)

    async def workers_list(self) -> list[WorkerInfo]:
        async with self._read() as conn:
            rows = await self._all(conn, "workers_list")
        return [_rows.worker_from_row(r, _C) for r in rows]

    async def tasks_known(self, tasks: Sequence[str]) -> set[str]:
        async with self._read() as conn:
            rows = await self._all(conn, "tasks_known", tasks=_json.dumps(list(tasks)))
        return {r["task"] for r in rows}

    # --- tenants --------------------------------------------------------------------------

    async def tenant_secret(self, tenant: str) -> str:
        async with self._read() as conn:
            row = await self._one(conn, "tenant_secret_get", tenant=tenant)
        if row is not None:
            return str(row["webhook_secret"])
        async with self._tx() as conn:
            await self._exec(
                conn,
                "tenant_secret_insert",
                tenant=tenant,
                secret=new_webhook_secret(),
                now=self.clock.now(),
            )
            row = await self._one(conn, "tenant_secret_get", tenant=tenant)
        return str(row["webhook_secret"])

    async def tenant_limits_set(self, params: TenantLimitsSetParams) -> TenantLimits:
        async with self._tx() as conn:
            row = await self._one(
                conn,
                "tenant_limits_upsert",
                tenant=params.tenant,
                secret=new_webhook_secret(),
                max_in_flight=params.max_in_flight,
                max_starts_per_second=params.max_starts_per_second,
                weight=params.weight,
                now=self._now(params.now),
            )
        return _rows.tenant_limits_from_row(row)

    async def tenant_limits_get(self, tenant: str) -> TenantLimits:
        async with self._read() as conn:
            row = await self._one(conn, "tenant_limits_get", tenant=tenant)
        return TenantLimits(tenant) if row is None else _rows.tenant_limits_from_row(row)

    async def tenant_limits_list(self) -> list[TenantLimits]:
        async with self._read() as conn:
            rows = await self._all(conn, "tenant_limits_list")
        return [_rows.tenant_limits_from_row(r) for r in rows]

    async def tenant_stats(self, now: datetime | None = None) -> list[TenantQueueStats]:
        async with self._read() as conn:
            rows = await self._all(conn, "tenant_stats", now=self._now(now))
            quota_rows = await self._all(conn, "tenant_quota_states")
        return _rows.tenant_stats_from_rows(rows, quota_rows, _C)

    # --- api keys -------------------------------------------------------------------------

    async def api_key_create(self, params: ApiKeyCreateParams) -> ApiKey:
        async with self._tx() as conn:
            row = await self._one(
                conn,
                "api_key_insert",
                id=params.id,
                tenant=params.tenant,
                role=str(params.role),
                name=params.name,
                prefix=params.prefix,
                key_hash=params.key_hash,
                now=self._now(params.now),
            )
        return _rows.api_key_from_row(row, _C)

    async def api_key_get_by_hash(self, key_hash: str) -> ApiKey | None:
        async with self._read() as conn:
            row = await self._one(conn, "api_key_get_by_hash", key_hash=key_hash)
        return None if row is None else _rows.api_key_from_row(row, _C)

    async def api_keys_list(self, params: ApiKeyListParams) -> list[ApiKey]:
        async with self._read() as conn:
            rows = await self._all(
                conn,
                "api_keys_list",
                tenant=params.tenant,
                include_revoked=int(params.include_revoked),
            )
        return [_rows.api_key_from_row(r, _C) for r in rows]

    async def api_key_revoke(self, params: ApiKeyRevokeParams) -> ApiKey:
        async with self._tx() as conn:
            row = await self._one(
                conn,
                "api_key_revoke",
                id=params.id,
                tenant=params.tenant,
                now=self._now(params.now),
            )
        if row is None:
            raise NotFound(f"API key {params.id} not found")
        return _rows.api_key_from_row(row, _C)

    async def api_key_touch(self, params: ApiKeyTouchParams) -> None:
        now = self._now(params.now)
        async with self._tx() as conn:
            await self._exec(
                conn,
                "api_key_touch",
                id=params.id,
                now=now,
                since=now - timedelta(seconds=params.every),
            )

    async def exactly_once_supported(self) -> None:
        raise UnsupportedFeature("exactly_once delivery needs PostgreSQL; SQLite cannot provide it")


def _split_statements(sql: str) -> list[str]:
    """Split a migration into statements (migrations hold no ``;`` inside literals)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
