"""The production store: PostgreSQL through psycopg 3 (async, pooled).

Concurrency: claims and due-job scans use ``FOR UPDATE SKIP LOCKED``; every transition is a
conditional UPDATE; the hot paths (claim, heartbeat, complete) are one statement per batch.
The database clock (``clock_timestamp()``) decides due checks and lease expiry. New runs are
announced with ``NOTIFY duetime_runs`` (one per transaction); :meth:`wait_for_runs` listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString, cast

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from duetime import _json
from duetime._clock import Clock
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
from duetime.errors import Conflict, NotFound, SchemaError
from duetime.store import _rows
from duetime.store._fairness import Aging, overlap_keys, plan_locked_claim, tenant_lock_key
from duetime.store._overlap import StartCandidate, StartVerdict, decide_start, plan_starts
from duetime.store._rows import NativeCodec, to_micros
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
    BulkJob,
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
from duetime.store.postgres import bulk_rows
from duetime.store.postgres.longruns import PostgresLongRuns, completion_columns
from duetime.store.postgres.observability import PostgresObservability
from duetime.store.sqlfile import load_migrations, load_queries

_C = NativeCodec()
_Q = load_queries("postgres")
_MIGRATION_LOCK = 0x6475_6574  # advisory lock key: "duet"


def _encode(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    return value


_COPY_PART = 500
"""Jobs encoded per write of a bulk COPY: the database parses one part while the next is
encoded, and the event loop gets a turn between parts."""


def _params(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _encode(v) for k, v in values.items()}


def _columns(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, list[Any]]:
    """Rows of values → one array per column, for ``unnest`` inserts."""
    return {name: [_encode(row[name]) for row in rows] for name in names}


async def _configure_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """Every pooled connection: no JIT. duetime's statements are short OLTP queries; once
    statistics show a large backlog, the planner's estimate for the fair claim (a lateral scan
    per tenant group) passes jit_above_cost and compiling it takes seconds for a query that runs
    in milliseconds (docs/decisions/0005-priority-aging-at-claim-time.md). json/jsonb columns
    (payloads, checkpoints) are decoded with orjson, the library duetime encodes them with."""
    set_json_loads(_json.loads, conn)
    # UTC sessions: timestamps arrive in UTC already (nothing in duetime's SQL depends on the
    # session's zone; this only spares converting every instant read)
    await conn.execute("SET jit = off")
    await conn.execute("SET TimeZone = 'UTC'")


class PostgresStore(PostgresLongRuns, PostgresObservability):
    dialect = "postgres"
    transient_errors: tuple[type[BaseException], ...] = (
        psycopg.OperationalError,
        psycopg.InterfaceError,
        PoolTimeout,
        OSError,
    )

    def __init__(self, url: str, *, clock: Clock | None = None, pool_size: int = 10) -> None:
        self.url = url.replace("postgresql+psycopg://", "postgresql://", 1)
        self.clock = clock
        self._pool_size = pool_size
        self._pool: AsyncConnectionPool | None = None
        self._listener: asyncio.Task[None] | None = None
        self._runs_event = asyncio.Event()

    # --- connection -----------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        pool = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self._pool_size,
            open=False,
            kwargs={"autocommit": True, "row_factory": dict_row},
            reconnect_timeout=60,
            # a connection broken by a server restart is replaced before use, not failed on
            check=AsyncConnectionPool.check_connection,
            configure=_configure_connection,
        )
        try:
            await pool.open(wait=True, timeout=30)
        except BaseException:
            await pool.close()  # stop its reconnect attempts
            raise
        self._pool = pool

    async def close(self) -> None:
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
        async with self.pool.connection() as conn, conn.transaction():
            yield conn

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self.pool.connection() as conn:
            yield conn

    @staticmethod
    async def _all(conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any) -> list[Any]:
        cursor = await conn.execute(cast(LiteralString, _Q[name]), _params(values))
        if cursor.pgresult is None:  # pipelined, not answered yet: a nested block's exit syncs
            async with conn.pipeline():
                pass
        return await cursor.fetchall() if cursor.description else []

    async def _one(self, conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any) -> Any:
        rows = await self._all(conn, name, **values)
        return rows[0] if rows else None

    @staticmethod
    async def _queue(
        conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any
    ) -> psycopg.AsyncCursor[Any]:
        """Send a statement; in pipeline mode its answer is awaited only when read."""
        return await conn.execute(cast(LiteralString, _Q[name]), _params(values))

    @staticmethod
    async def _exec(conn: psycopg.AsyncConnection[Any], name: str, /, **values: Any) -> int:
        cursor = await conn.execute(cast(LiteralString, _Q[name]), _params(values))
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

    async def db_now(self) -> datetime:
        async with self._read() as conn:
            return await self._now(conn, None)

    # --- notifications --------------------------------------------------------------------

    async def wait_for_runs(self, timeout: float) -> bool:
        """Wait until a NOTIFY says new runs exist (True) or ``timeout`` passes (False)."""
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._listen(), name="duetime-listen")
        try:
            await asyncio.wait_for(self._runs_event.wait(), timeout)
        except TimeoutError:
            return False
        self._runs_event.clear()
        return True

    async def _listen(self) -> None:
        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                async with conn:
                    await conn.execute("LISTEN duetime_runs")
                    backoff = 0.1
                    self._runs_event.set()  # we may have missed some while (re)connecting
                    async for _ in conn.notifies():
                        self._runs_event.set()
            except (psycopg.OperationalError, OSError):
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    # --- schema ---------------------------------------------------------------------------

    async def migrate(self) -> int:
        async with self._tx() as conn:
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
            if current > SCHEMA_VERSION:
                raise SchemaError(
                    f"database schema is v{current}; this duetime knows up to v{SCHEMA_VERSION}"
                )
            for migration in load_migrations("postgres"):
                if migration.version <= current:
                    continue
                await conn.execute(cast(LiteralString, migration.sql))
                await conn.execute(
                    "INSERT INTO duetime_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
                current = migration.version
        return current

    async def schema_version(self) -> int | None:
        async with self._read() as conn:
            cursor = await conn.execute("SELECT to_regclass('duetime_migrations') AS t")
            row = await cursor.fetchone()
            if row is None or row["t"] is None:
                return None
            cursor = await conn.execute("SELECT max(version) AS v FROM duetime_migrations")
            row = await cursor.fetchone()
            return None if row is None or row["v"] is None else int(row["v"])

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

    async def _job_row(
        self, conn: psycopg.AsyncConnection[Any], ref: JobRef, *, lock: bool = False
    ) -> Any:
        if ref.id is not None:
            name = "job_lock_by_id" if lock else "job_get_by_id"
            row = await self._one(conn, name, tenant=ref.tenant, id=ref.id)
        else:
            name = "job_lock_by_name" if lock else "job_get_by_name"
            row = await self._one(conn, name, tenant=ref.tenant, name=ref.name)
        if row is None:
            raise NotFound(f"job {ref.id or ref.name!s} not found")
        return row

    async def job_upsert(self, params: JobUpsertParams) -> tuple[Job, bool]:
        async with self._tx() as conn:
            now = await self._now(conn, None)
            values = job_values(params, params.job_id, params.schedule, params.next_fire_at)
            row = await self._one(conn, "job_insert", **values, now=now)
            if row is not None:
                return _rows.job_from_row(row, _C), True
            if params.create_only:
                raise Conflict(f"a job named {params.name!r} already exists")
            existing = await self._job_row(
                conn, JobRef(tenant=params.tenant, name=params.name), lock=True
            )
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
                    state=str(RunState.SKIPPED),
                    reason="schedule_changed",
                    include_manual=False,
                    now=now,
                )
            values = job_values(params, old.id, schedule, next_fire_at)
            row = await self._one(conn, "job_update", **values, status=str(status), now=now)
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
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            current = _rows.job_from_row(await self._job_row(conn, params.job, lock=True), _C)
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
                from_states=[str(s) for s in allowed_from],
                now=now,
            )
            if params.status in PENDING_END_STATE:
                state, reason = PENDING_END_STATE[params.status]
                await self._exec(
                    conn,
                    "runs_end_pending",
                    job_id=current.id,
                    state=str(state),
                    reason=reason,
                    include_manual=params.status is JobStatus.CANCELLED,
                    now=now,
                )
            return _rows.job_from_row(row, _C)

    async def job_delete(self, ref: JobRef) -> None:
        async with self._tx() as conn:
            row = await self._job_row(conn, ref, lock=True)
            await self._exec(conn, "job_delete", id=row["id"])

    # --- bulk -----------------------------------------------------------------------------

    async def jobs_insert_many(self, params: JobsInsertManyParams) -> int:
        if not params.jobs:
            return 0
        if params.expect_new:
            try:
                async with self._tx() as conn:
                    now = await self._now(conn, params.now)
                    await self._copy_jobs(conn, "jobs", params.jobs, now)
                return len(params.jobs)
            except psycopg.errors.UniqueViolation:
                pass  # a name exists after all: the staging path below leaves it alone
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            await conn.execute(cast(LiteralString, _Q["jobs_bulk_stage"]))
            await self._copy_jobs(conn, "duetime_jobs_in", params.jobs, now)
            return await self._exec(conn, "jobs_bulk_insert")

    @staticmethod
    async def _copy_jobs(
        conn: psycopg.AsyncConnection[Any], table: str, jobs: Sequence[BulkJob], now: datetime
    ) -> None:
        """COPY ``jobs`` into ``table`` (``jobs`` or its staging copy) as one text stream."""
        copy_sql = sql.SQL(cast(LiteralString, _Q["jobs_bulk_copy"])).format(
            table=sql.Identifier(table),
            columns=sql.SQL(", ").join(sql.Identifier(n) for n in bulk_rows.columns(jobs[0].shape)),
        )
        lines = bulk_rows.Lines(now)
        async with conn.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for first in range(0, len(jobs), _COPY_PART):
                part = jobs[first : first + _COPY_PART]
                await copy.write("".join([lines.line(job) for job in part]))

    # --- runs: materialize, trigger -------------------------------------------------------

    async def runs_materialize(self, params: RunsMaterializeParams) -> MaterializeResult:
        low, high = params.partitions or (0, 255)
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            until = now + timedelta(seconds=params.horizon)
            rows = await self._all(
                conn,
                "jobs_due",
                until=until,
                limit=params.limit,
                partition_low=low,
                partition_high=high,
            )
            jobs = [_rows.job_from_row(r, _C) for r in rows]
            run_rows: list[dict[str, Any]] = []
            skip_rows: list[dict[str, Any]] = []
            advances: list[tuple[uuid.UUID, datetime | None]] = []
            for job in jobs:
                plan = params.planner(job, now, until)
                run_rows.extend(planned_run_values(job, p) for p in plan.runs)
                skip_rows.extend(
                    {
                        "job_id": job.id,
                        "first_at": s.first,
                        "last_at": s.last,
                        "count": s.count,
                        "reason": s.reason,
                    }
                    for s in plan.skips
                )
                advances.append((job.id, plan.next_fire_at))
            created = 0
            if run_rows:
                inserted = await self._all(
                    conn, "runs_insert", batch=_json.dumps(run_rows), now=now
                )
                created = len(inserted)
                if created:
                    await self._exec(conn, "notify_runs")
            if skip_rows:
                await self._exec(
                    conn,
                    "skips_insert",
                    now=now,
                    **_columns(skip_rows, ["job_id", "first_at", "last_at", "count", "reason"]),
                )
            if advances:
                await self._exec(
                    conn,
                    "jobs_advance",
                    ids=[a[0] for a in advances],
                    next_fire_ats=[a[1] for a in advances],
                )
        return MaterializeResult(
            jobs=len(jobs), runs_created=created, skips=len(skip_rows), now=now
        )

    async def run_trigger(self, params: RunTriggerParams) -> tuple[Run, bool]:
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            job = _rows.job_from_row(await self._job_row(conn, params.job), _C)
            if job.status is JobStatus.CANCELLED:
                raise Conflict(f"job {job.name!r} is cancelled; it cannot be triggered")
            values = trigger_run_values(job, params, now)
            inserted = await self._all(conn, "runs_insert", batch=_json.dumps([values]), now=now)
            if inserted:
                await self._exec(conn, "notify_runs")
                row = await self._one(conn, "run_get", tenant=job.tenant, id=inserted[0]["id"])
                return _rows.run_from_row(row, _C), True
            row = await self._one(
                conn, "run_get_by_key", job_id=job.id, idempotency_key=params.idempotency_key
            )
            if row is None:  # pragma: no cover - only a conflicting key reaches here
                raise Conflict("run could not be created; try again")
            if row["request_hash"] != params.request_hash:
                raise Conflict(
                    f"idempotency key {params.idempotency_key!r} was used with a different request"
                )
            return _rows.run_from_row(row, _C), False

    # --- runs: the worker's path ----------------------------------------------------------

    async def runs_claim(self, params: RunsClaimParams) -> list[ClaimedRun]:
        if not params.tasks or (params.queues is not None and not params.queues):
            return []
        aging = Aging(params.priority_aging, params.priority_aging_cap)
        rows = await self._claim_fair(params, aging, params.limit, only_fast=False)
        # the locked step: runs of limited tenants and runs with an overlap key, when the
        # one-statement claim left room and saw some (or claimed nothing, so could not say);
        # what a quota or a busy key keeps from its share goes to the others
        if len(rows) < params.limit and (not rows or rows[0]["deferred"]):
            locked, found = await self._claim_locked(params, aging, params.limit - len(rows))
            rows += locked
            if found and len(rows) < params.limit:
                rows += await self._claim_fair(
                    params, aging, params.limit - len(rows), only_fast=True
                )
        claimed = [_rows.claimed_from_row(r, _C) for r in rows]
        claimed.sort(key=lambda c: (c.run.available_at, -c.run.priority))
        return claimed

    async def _claim_fair(
        self, params: RunsClaimParams, aging: Aging, limit: int, *, only_fast: bool
    ) -> list[Any]:
        async with self._read() as conn:
            return await self._all(
                conn,
                "runs_claim_fair",
                worker_id=params.worker_id,
                lease_ttl=params.lease_ttl,
                lookahead=params.lookahead,
                tasks=list(params.tasks),
                limit=limit,
                now=self._fixed_now(params.now),
                tenant=params.tenant,
                queues=None if params.queues is None else list(params.queues),
                aging_us=aging.interval_us,
                aging_cap=aging.cap,
                only_fast=only_fast,
            )

    async def _claim_locked(
        self, params: RunsClaimParams, aging: Aging, capacity: int
    ) -> tuple[list[Any], bool]:
        """Claim runs a quota or an overlap key limits: lock candidates (SKIP LOCKED), take an
        advisory lock per limited tenant and per key, count in a fresh statement, decide
        (store/_fairness.py), record the tenants' start buckets. Returns the claimed rows and
        whether there were candidates at all."""
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            found = await self._all(
                conn,
                "runs_claim_locked_candidates",
                now=now,
                lookahead=params.lookahead,
                tasks=list(params.tasks),
                tenant=params.tenant,
                queues=None if params.queues is None else list(params.queues),
                limit=capacity * 4,
            )
            if not found:
                return [], False
            candidates = [_rows.locked_candidate_from_row(r, _C, now) for r in found]
            keys = overlap_keys([c for _, c in candidates])
            limited = sorted({r["tenant"] for r in found if r["limited"]})
            await self._exec(
                conn, "overlap_keys_lock", keys=keys + [tenant_lock_key(t) for t in limited]
            )
            # the clock once the locks are ours: later than every claim that held them before,
            # so start buckets refill monotonically and starts are stamped when they happen
            now = await self._now(conn, params.now)
            counted = await self._all(conn, "runs_running_by_key", keys=keys) if keys else []
            quota_rows = await self._all(conn, "tenant_quotas", tenants=limited) if limited else []
            plan = plan_locked_claim(
                candidates,
                weights={r["tenant"]: r["weight"] for r in found},
                in_flight={r["tenant"]: r["running"] for r in found},
                running={r["concurrency_key"]: r["running"] for r in counted},
                quotas={
                    q.tenant: q
                    for q in (_rows.tenant_quota_from_row(r, _C, now) for r in quota_rows)
                },
                capacity=capacity,
                now=now,
                aging=aging,
            )
            decision = plan.decision
            if decision.replace_keys:
                await self._replace(conn, sorted(decision.replace_keys), now)
            if decision.skip:
                await self._exec(conn, "runs_skip_overlap", ids=decision.skip, now=now)
            buckets = plan.buckets()
            if buckets:
                await self._exec(
                    conn,
                    "tenant_buckets_set",
                    tenants=[b[0] for b in buckets],
                    tokens=[b[1] for b in buckets],
                    now=now,
                )
            if not decision.claim:
                return [], True
            claimed = await self._all(
                conn,
                "runs_claim_ids",
                ids=decision.claim,
                worker_id=params.worker_id,
                lease_ttl=params.lease_ttl,
                now=now,
            )
            return claimed, True

    async def _replace(
        self,
        conn: psycopg.AsyncConnection[Any],
        keys: list[str],
        now: datetime,
        *,
        keep: uuid.UUID | None = None,
    ) -> None:
        """Cancel the running runs of ``keys`` (but ``keep``), recording their attempts."""
        victims = [
            _rows.run_from_row(r, _C)
            for r in await self._all(conn, "runs_running_of_keys", keys=keys)
            if r["id"] != keep
        ]
        for run in victims:
            if await self._exec(conn, "run_replace", id=run.id, token=run.token, now=now):
                await self._exec(
                    conn,
                    "attempts_insert",
                    run_id=[run.id],
                    token=[run.token],
                    job_id=[run.job_id],
                    tenant=[run.tenant],
                    number=[run.attempt],
                    worker_id=[run.lease_owner or "?"],
                    claimed_at=[run.claimed_at or now],
                    started_at=[run.started_at],
                    finished_at=[now],
                    outcome=["cancelled"],
                    error_class=[None],
                    error_message=["replaced by a newer run"],
                )

    async def runs_misfire(self, params: RunsMisfireParams) -> int:
        async with self._read() as conn:
            rows = await self._all(
                conn, "runs_misfire", now=self._fixed_now(params.now), limit=params.limit
            )
        return len(rows)

    async def run_start(self, params: RunStartParams) -> bool:
        started = await self.runs_start(
            RunsStartParams(
                [(params.run_id, params.token)], now=params.now, lease_ttl=params.lease_ttl
            )
        )
        return params.run_id in started

    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        # each (run, token) once, sorted by id: concurrent batches lock their rows in one order
        runs = sorted(dict.fromkeys(params.runs))
        if not runs:
            return set()
        # pipelined: statements whose answers are not needed yet travel with the next one that
        # is waited for: the keyed path's three reads share one round trip, its writes travel
        # with the commit (psycopg's transaction block still syncs on entry and exit)
        judged: list[psycopg.AsyncCursor[Any]] = []
        async with self.pool.connection() as conn, conn.pipeline(), conn.transaction():
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
        for cursor in judged:  # answered with the commit
            started.update(r["id"] for r in await cursor.fetchall())
        return started

    async def _start_keyed(
        self,
        conn: psycopg.AsyncConnection[Any],
        runs: list[tuple[uuid.UUID, int]],
        keys: list[str],
        now: datetime | None,
        lease_ttl: float | None,
        judged: list[psycopg.AsyncCursor[Any]],
    ) -> set[uuid.UUID]:
        """The runs of a start batch that have an overlap key, in the caller's pipelined
        transaction: lock every key of the batch at once (in one order: a batch never holds one
        key while waiting for another), lock the runs and read their policies, count each key's
        started runs (one round trip for the three), judge the batch in order
        (store/_overlap.py ``plan_starts``) and queue the verdicts' writes, one statement each.
        Returns the runs started here; the cursor of the statement starting the rest is
        appended to ``judged``, to be read after the commit. Keys with a ``replace`` run go
        through the one-run path."""
        ids, tokens = [r[0] for r in runs], [r[1] for r in runs]
        await self._queue(conn, "overlap_keys_lock", keys=keys)
        info = await self._queue(
            conn, "runs_start_keyed_info", ids=ids, tokens=tokens, now=self._fixed_now(now)
        )
        counts = await self._queue(conn, "runs_started_by_key", keys=keys)
        rows = await info.fetchall()
        counted = await counts.fetchall()
        eligible = [r for r in rows if r["eligible"]]
        if not eligible:
            return set()
        plan = plan_starts(
            [
                StartCandidate(
                    r["id"],
                    r["token"],
                    r["concurrency_key"],
                    OverlapPolicy(r["overlap_policy"]),
                    RunTrigger(r["trigger"]),
                    r["max_concurrency"],
                )
                for r in eligible
            ],
            {r["concurrency_key"]: r["running"] for r in counted},
        )
        for query, verdict in (("runs_start_skip", plan.skip), ("runs_start_defer", plan.defer)):
            if verdict:
                ids = [c.id for c in verdict]
                await self._queue(conn, query, ids=ids, now=self._fixed_now(now))
        if plan.start:
            judged.append(
                await self._queue(
                    conn,
                    "runs_start_judged",
                    ids=[c.id for c in plan.start],
                    now=self._fixed_now(now),
                    lease_ttl=lease_ttl,
                )
            )
        started: set[uuid.UUID] = set()
        for c in plan.replace:
            if await self._start_one(conn, c.id, c.token, now, lease_ttl):
                started.add(c.id)
        return started

    async def _start_one(
        self,
        conn: psycopg.AsyncConnection[Any],
        run_id: uuid.UUID,
        token: int,
        now: datetime | None,
        lease_ttl: float | None,
    ) -> bool:
        """run_start of one run in the caller's transaction; a run with an overlap key is
        judged under its key's lock (skipped, deferred, or replacing the key's running runs)."""
        info = await self._one(conn, "run_start_overlap_info", id=run_id, token=token)
        if info is not None:
            at = await self._now(conn, now)
            key = info["concurrency_key"]
            await self._exec(conn, "overlap_keys_lock", keys=[key])
            counted = await self._one(conn, "runs_started_of_key", key=key, id=run_id)
            verdict = decide_start(
                OverlapPolicy(info["overlap_policy"]),
                RunTrigger(info["trigger"]),
                info["max_concurrency"],
                counted["running"],
            )
            if verdict is StartVerdict.SKIP or verdict is StartVerdict.DEFER:
                query = "run_start_skip" if verdict is StartVerdict.SKIP else "run_start_defer"
                await self._exec(conn, query, id=run_id, token=token, now=at)
                return False
            if verdict is StartVerdict.REPLACE:
                await self._replace(conn, [key], at, keep=run_id)
        row = await self._one(
            conn,
            "run_start",
            id=run_id,
            token=token,
            now=self._fixed_now(now),
            lease_ttl=lease_ttl,
        )
        return row is not None

    async def runs_heartbeat(self, params: RunsHeartbeatParams) -> set[uuid.UUID]:
        if not params.runs:
            return set()
        runs = sorted(params.runs)  # rows locked in id order, as runs_start does: no deadlock
        async with self._read() as conn:
            rows = await self._all(
                conn,
                "runs_heartbeat",
                worker_id=params.worker_id,
                lease_ttl=params.lease_ttl,
                ids=[r[0] for r in runs],
                tokens=[r[1] for r in runs],
                now=self._fixed_now(params.now),
            )
        return {r["id"] for r in rows}

    async def runs_complete(self, params: RunsCompleteParams) -> list[bool]:
        if not params.completions:
            return []
        cs, first = unique_completions(params.completions)
        async with self._read() as conn:
            rows = await self._all(
                conn,
                "runs_complete",
                now=self._fixed_now(params.now),
                **completion_columns(cs),
            )
        applied = {(r["run_id"], r["token"]) for r in rows if r["applied"]}
        return completion_answers(params.completions, first, applied)

    async def leases_reap(self, params: LeasesReapParams) -> ReapResult:
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            if not await self._holds(conn, params.leader, now):
                return ReapResult(0, 0)
            rows = await self._all(conn, "leases_expired", now=now, limit=params.limit)
            if not rows:
                return ReapResult(0, 0)
            claimed = [_rows.claimed_from_row(r, _C) for r in rows]
            decisions = [_rows.lease_lost_decision(c.run, c.delivery) for c in claimed]
            await self._exec(
                conn,
                "runs_reap",
                now=now,
                id=[c.run.id for c in claimed],
                token=[c.run.token for c in claimed],
                next_state=[str(d[0]) for d in decisions],
                reason=[d[1] for d in decisions],
            )
            runs = [c.run for c in claimed]
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
                outcome=["lost" for _ in runs],
                error_class=[None for _ in runs],
                error_message=["lease expired" for _ in runs],
            )
            finished_jobs = [
                c.run.job_id
                for c, d in zip(claimed, decisions, strict=True)
                if d[0] is RunState.DEAD and c.one_shot and c.run.trigger is RunTrigger.SCHEDULE
            ]
            if finished_jobs:
                await self._exec(conn, "jobs_complete", ids=finished_jobs, now=now)
            rescheduled = sum(1 for d in decisions if d[0] is RunState.SCHEDULED)
            if rescheduled:
                await self._exec(conn, "notify_runs")
        reaped = tuple(
            (c.run.tenant, c.run.task, str(d[0])) for c, d in zip(claimed, decisions, strict=True)
        )
        return ReapResult(rescheduled=rescheduled, dead=len(decisions) - rescheduled, reaped=reaped)

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
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            rows = await self._all(
                conn,
                "runs_replay",
                tenant=params.tenant,
                job_id=params.job_id,
                run_ids=None if params.run_ids is None else list(params.run_ids),
                max_attempts=params.max_attempts,
                limit=params.limit,
                now=now,
            )
            if rows:
                await self._exec(conn, "notify_runs")
        return [r["id"] for r in rows]

    async def run_cancel(self, params: RunCancelParams) -> Run:
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            before = await self._one(conn, "run_lock", tenant=params.tenant, id=params.run_id)
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
                    "attempts_insert",
                    run_id=[prior.id],
                    token=[prior.token],
                    job_id=[prior.job_id],
                    tenant=[prior.tenant],
                    number=[prior.attempt],
                    worker_id=[prior.lease_owner or "?"],
                    claimed_at=[prior.claimed_at or now],
                    started_at=[prior.started_at],
                    finished_at=[now],
                    outcome=["cancelled"],
                    error_class=[None],
                    error_message=["cancelled"],
                )
            return _rows.run_from_row(row, _C)

    async def skips_list(self, tenant: str, job_id: uuid.UUID) -> list[PlannedSkip]:
        async with self._read() as conn:
            rows = await self._all(conn, "skips_list", tenant=tenant, job_id=job_id)
        return [_rows.skip_from_row(r, _C) for r in rows]

    # --- leadership, nodes, retention ------------------------------------------------------

    async def _holds(
        self, conn: psycopg.AsyncConnection[Any], fence: LeaderFence | None, now: datetime
    ) -> bool:
        """Inside a transaction: True if ``fence`` still leads; locks the leader row (FOR
        SHARE) so a takeover waits until this transaction ends."""
        if fence is None:
            return True
        row = await self._one(conn, "leader_hold", node_id=fence.node_id, term=fence.term, now=now)
        return row is not None

    async def leader_elect(self, params: LeaderElectParams) -> Leadership | None:
        async with self._read() as conn:
            row = await self._one(
                conn,
                "leader_elect",
                node_id=params.node_id,
                ttl=params.ttl,
                now=self._fixed_now(params.now),
            )
        return None if row is None else _rows.leadership_from_row(row, _C)

    async def leader_resign(self, fence: LeaderFence) -> None:
        async with self._read() as conn:
            await self._exec(
                conn,
                "leader_resign",
                node_id=fence.node_id,
                term=fence.term,
                now=self._fixed_now(None),
            )

    async def leader_get(self) -> Leadership | None:
        async with self._read() as conn:
            row = await self._one(conn, "leader_get")
        return None if row is None else _rows.leadership_from_row(row, _C)

    async def node_register(self, node: NodeInfo) -> None:
        async with self._read() as conn:
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
        async with self._read() as conn:
            await self._exec(conn, "node_heartbeat", id=node_id, now=self._fixed_now(now))

    async def node_unregister(self, node_id: str) -> None:
        async with self._read() as conn:
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
            now = await self._now(conn, None)
            if not await self._holds(conn, params.leader, now):
                return 0
            runs = await self._exec(
                conn, "history_prune_runs", before=params.before, limit=params.limit
            )
            await self._exec(conn, "history_prune_skips", before=params.before, limit=params.limit)
        return runs

    # --- workers --------------------------------------------------------------------------

    async def worker_register(self, worker: WorkerInfo) -> None:
        async with self._tx() as conn:
            now = worker.heartbeat_at
            await self._exec(
                conn,
                "worker_upsert",
                id=worker.id,
                host=worker.host,
                pid=worker.pid,
                tasks=_json.dumps(list(worker.tasks)),
                queues=_json.dumps(list(worker.queues)),
                started_at=worker.started_at,
                now=now,
            )
            if worker.tasks:
                await self._exec(
                    conn, "known_tasks_upsert", tasks=sorted(set(worker.tasks)), now=now
                )

    async def worker_heartbeat(self, worker_id: str, now: datetime | None = None) -> None:
        async with self._read() as conn:
            await self._exec(conn, "worker_heartbeat", id=worker_id, now=self._fixed_now(now))

    async def worker_unregister(self, worker_id: str) -> None:
        async with self._read() as conn:
            await self._exec(conn, "worker_delete", id=worker_id)

    async def workers_list(self) -> list[WorkerInfo]:
        async with self._read() as conn:
            rows = await self._all(conn, "workers_list")
        return [_rows.worker_from_row(r, _C) for r in rows]

    async def tasks_known(self, tasks: Sequence[str]) -> set[str]:
        async with self._read() as conn:
            rows = await self._all(conn, "tasks_known", tasks=list(tasks))
        return {r["task"] for r in rows}

    # --- tenants --------------------------------------------------------------------------

    async def tenant_secret(self, tenant: str) -> str:
        async with self._read() as conn:
            row = await self._one(conn, "tenant_secret_get", tenant=tenant)
            if row is None:
                await self._exec(
                    conn,
                    "tenant_secret_insert",
                    tenant=tenant,
                    secret=new_webhook_secret(),
                    now=self._fixed_now(None),
                )
                row = await self._one(conn, "tenant_secret_get", tenant=tenant)
        return str(row["webhook_secret"])

    async def tenant_limits_set(self, params: TenantLimitsSetParams) -> TenantLimits:
        async with self._read() as conn:
            row = await self._one(
                conn,
                "tenant_limits_upsert",
                tenant=params.tenant,
                secret=new_webhook_secret(),
                max_in_flight=params.max_in_flight,
                max_starts_per_second=params.max_starts_per_second,
                weight=params.weight,
                now=self._fixed_now(params.now),
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
            rows = await self._all(conn, "tenant_stats", now=self._fixed_now(now))
            quota_rows = await self._all(conn, "tenant_quota_states")
        return _rows.tenant_stats_from_rows(rows, quota_rows, _C)

    # --- api keys -------------------------------------------------------------------------

    async def api_key_create(self, params: ApiKeyCreateParams) -> ApiKey:
        async with self._read() as conn:
            row = await self._one(
                conn,
                "api_key_insert",
                id=params.id,
                tenant=params.tenant,
                role=str(params.role),
                name=params.name,
                prefix=params.prefix,
                key_hash=params.key_hash,
                now=self._fixed_now(params.now),
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
                include_revoked=params.include_revoked,
            )
        return [_rows.api_key_from_row(r, _C) for r in rows]

    async def api_key_revoke(self, params: ApiKeyRevokeParams) -> ApiKey:
        async with self._read() as conn:
            row = await self._one(
                conn,
                "api_key_revoke",
                id=params.id,
                tenant=params.tenant,
                now=self._fixed_now(params.now),
            )
        if row is None:
            raise NotFound(f"API key {params.id} not found")
        return _rows.api_key_from_row(row, _C)

    async def api_key_touch(self, params: ApiKeyTouchParams) -> None:
        async with self._read() as conn:
            await self._exec(
                conn,
                "api_key_touch",
                id=params.id,
                every=params.every,
                now=self._fixed_now(params.now),
            )
