"""One SQL store for both dialects: every method whose SQL differs only in spelling is written
here once, over a small connection surface each dialect supplies (the way Oban's SQLite engine
delegates to the basic engine and overrides only what differs).

What a dialect supplies (``store/sqlite/store.py``, ``store/postgres/store.py``; declared
in ``store/_sql_surface.py``, with the one-statement helpers ``_read_all`` … ``_write_exec``):

- ``_tx()`` a write transaction; ``_read()`` a connection for reads; ``_write()`` a connection
  for one writing statement that is its own transaction (PostgreSQL: an autocommit pool
  connection; SQLite: ``BEGIN IMMEDIATE``).
- ``_all`` / ``_exec`` run a named query of the dialect's ``queries/*.sql`` with its parameter
  encoding: lists travel as arrays (PostgreSQL) or as JSON text (SQLite); ``_records`` encodes a
  batch of records as one JSON array for both. ``_send`` sends one whose rows are read later
  (queued in PostgreSQL's pipeline; run at once on SQLite).
- the clock: ``_now(conn, now)`` (inside a transaction: the caller's, a test clock's, or the
  database's) and ``_fixed_now(now)`` (for one statement: None lets PostgreSQL's SQL read its
  own clock; SQLite always answers with the host clock).
- row locks: ``_lock_keys`` (PostgreSQL: advisory locks per overlap key and tenant; SQLite:
  nothing, ``BEGIN IMMEDIATE`` already holds the database) and the ``job_lock_*`` /
  ``run_lock`` queries (``FOR UPDATE``, or a plain read on SQLite).
- ``_claim_steps()``: where the claim's one-statement and locked steps run (PostgreSQL: each
  on its own connection; SQLite: both in one transaction).
- ``_notify`` (NOTIFY, or this process's event), ``_attempts_insert`` (one array statement, or
  one row at a time), and what has no counterpart: migrations, the start batch (pipelined on
  PostgreSQL; its keyed runs are judged here, ``_start_judged``), completion, the reaper's
  batch, bulk COPY, LISTEN, exactly-once.

Query names are the same in both dialects but for the gaps listed, each with its reason, in
``tests/store/test_query_names.py``. Policies (who is claimed, what a status move does, where a
lost lease goes) are in ``duetime.policies``; this module applies them in transactions.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime import _audit, _json
from duetime._clock import Clock
from duetime._outbox import (
    CANCEL_EVENTS,
    END_EVENTS,
    REAP_EVENTS,
    REPLAY_EVENTS,
    SKIP_EVENTS,
    STARTED_EVENTS,
)
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
    Schedule,
    StoredCalendar,
    TenantLimits,
    TenantQueueStats,
    WorkerInfo,
)
from duetime.errors import Conflict, NotFound, SchemaError, UnsupportedFeature
from duetime.policies.fairness import Aging, overlap_keys, plan_locked_claim, tenant_lock_key
from duetime.policies.overlap import (
    StartCandidate,
    StartVerdict,
    decide_start,
    plan_starts,
    replacing_keys,
)
from duetime.policies.status import PENDING_END_STATE, STATUS_MOVES, lease_lost_decision
from duetime.store import _rows
from duetime.store._rows import Codec, to_micros
from duetime.store._sql_audit import SQLAudit, ordered_id
from duetime.store._sql_calendars import SQLCalendars
from duetime.store._sql_lifecycle import (
    SQLLifecycle,
    jobs_cap_check,
    move_columns,
    pause_expected,
)
from duetime.store._sql_monitoring import SQLObservability
from duetime.store._sql_outbox import SQLOutbox
from duetime.store._sql_partitions import SQLPartitionLeases
from duetime.store._sql_surface import Answer
from duetime.store._sql_targets import SQLTargets
from duetime.store._sql_workflow_watch import SQLWorkflowWatch
from duetime.store._sql_workflows import SQLWorkflows
from duetime.store._values import (
    job_values,
    new_webhook_secret,
    planned_run_values,
    trigger_run_values,
)
from duetime.store.base import (
    SCHEMA_VERSION,
    ApiKeyCreateParams,
    ApiKeyListParams,
    ApiKeyRevokeParams,
    ApiKeyTouchParams,
    AttemptPartitionsChange,
    AttemptPartitionsParams,
    ClaimedRun,
    HistoryPruneParams,
    JobListParams,
    JobRef,
    JobsDueParams,
    JobSetStatusParams,
    JobUpsertParams,
    LeaderElectParams,
    LeaderFence,
    LeasesReapParams,
    PlainBatch,
    PlannedRun,
    PlannedSkip,
    ReapResult,
    RunCancelParams,
    RunCheckpointParams,
    RunIdPrefixParams,
    RunListParams,
    RunProgressParams,
    RunReplayParams,
    RunsClaimParams,
    RunsHeartbeatParams,
    RunsMisfireParams,
    RunsStartParams,
    RunStartParams,
    RunTriggerParams,
    TenantLimitsSetParams,
)
from duetime.store.cancel_news import CancelNews
from duetime.store.sqlfile import Migration, load_migrations
from duetime.workflows.definition import WORKFLOW_TASK


class SQLStore(
    SQLLifecycle,
    SQLAudit,
    SQLCalendars,
    SQLWorkflows,
    SQLWorkflowWatch,
    SQLObservability,
    SQLOutbox,
    SQLTargets,
    SQLPartitionLeases,
):
    """The dialect-free part of both stores. Subclasses set ``dialect`` and ``codec`` and
    implement the connection surface (see the module docstring)."""

    dialect: str
    codec: Codec
    clock: Clock | None
    transient_errors: tuple[type[BaseException], ...]
    _runs_event: asyncio.Event
    _outbox_event: asyncio.Event
    _claims_wide = False
    """Whether the last fair claim read many times its batch (see ``_claim_fair``)."""

    # --- the rest of the dialect's surface (``_tx`` … ``_now``: SQLSurface) ------------------

    def _fixed_now(self, now: datetime | None) -> datetime | None:
        raise NotImplementedError

    def _records(self, rows: Sequence[dict[str, Any]]) -> str:
        raise NotImplementedError

    async def _runs_insert_rows(
        self, conn: Any, rows: Sequence[dict[str, Any]], now: datetime
    ) -> list[Any]:
        """``runs_insert`` of ``rows`` (store/_values.py's run values) in the caller's
        transaction: the rows (id, job_id) of the runs that were new."""
        return await self._all(conn, "runs_insert", batch=self._records(rows), now=now)

    async def _materialize_plain(
        self, conn: Any, values: dict[str, Any], *, leased: bool
    ) -> PlainBatch:
        """The set path's statements (``runs_materialize_plain``, or its ``_leased`` form) in
        the caller's transaction, new runs announced with the commit; ``values`` bound."""
        raise NotImplementedError

    notifies_in_statement: bool
    """True where a statement that makes runs wakes the workers itself (PostgreSQL's
    ``pg_notify`` in the statement); else the store calls :meth:`_notify` after it."""

    async def _notify(self, conn: Any) -> None:
        raise NotImplementedError

    _cancel_news: CancelNews | None = None

    @property
    def cancel_news(self) -> CancelNews:
        """Runs asked to stop, as this process heard (store/cancel_news.py)."""
        if self._cancel_news is None:
            self._cancel_news = CancelNews()
        return self._cancel_news

    async def wait_for_cancels(
        self, epoch: int, timeout: float
    ) -> tuple[int, frozenset[uuid.UUID] | None]:
        return await self.cancel_news.wait(epoch, timeout)

    async def _announce_cancels(self, conn: Any, ids: list[uuid.UUID]) -> None:
        """Tell the workers holding ``ids`` that they must stop (in the caller's transaction).
        Here: this process's news (SQLite: a reader waits for the lock, so it reads after the
        commit); PostgreSQL sends NOTIFY."""
        self.cancel_news.heard(ids)

    async def _lock_keys(self, conn: Any, keys: list[str]) -> bool:
        """Serialize this transaction with others on ``keys`` (overlap keys, tenants) until
        it ends. True when that may have waited (the caller reads the clock again)."""
        raise NotImplementedError

    def _claim_steps(self) -> contextlib.AbstractAsyncContextManager[ClaimSteps]:
        raise NotImplementedError

    async def _attempts_insert(
        self, conn: Any, runs: Sequence[Run], outcome: str, message: str, now: datetime
    ) -> None:
        """Record the attempt of each of ``runs`` (running, taken over) as ``outcome``."""
        raise NotImplementedError

    # --- shared helpers -----------------------------------------------------------------

    async def db_now(self) -> datetime:
        async with self._read() as conn:
            return await self._now(conn, None)

    async def check_schema(self) -> None:
        version = await self.schema_version()
        if version is None:
            raise SchemaError("database has no duetime schema: run `duetime migrate`")
        _refuse_newer(version)
        if version < SCHEMA_VERSION:
            raise SchemaError(f"database schema is v{version}: run `duetime migrate`")

    async def runs_partition_by_key(self, count: int, *, alive_within: float = 60.0) -> bool:
        raise SchemaError(f"{self.dialect} has no partitioned layout of runs: PostgreSQL only")

    async def schema_version(self) -> int | None:
        async with self._read() as conn:
            return await self._schema_version(conn)

    async def _schema_version(self, conn: Any) -> int | None:
        """The newest migration applied, read on ``conn``; None before the first migration."""
        if await self._one(conn, "migrations_table") is None:
            return None
        row = await self._one(conn, "schema_version")
        return None if row is None or row["v"] is None else int(row["v"])

    def _migrations_after(self, current: int) -> list[Migration]:
        """The dialect's migrations a database at version ``current`` lacks, in order; a
        schema newer than this code is refused."""
        _refuse_newer(current)
        return [m for m in load_migrations(self.dialect) if m.version > current]

    # --- new runs announced -----------------------------------------------------------------

    async def wait_for_runs(self, timeout: float) -> bool:
        """Wait until new runs are announced (True) or ``timeout`` passes (False): PostgreSQL's
        listener sets the event on NOTIFY; SQLite has no NOTIFY, so only runs this process
        created set it (other processes sharing the file are seen by polling)."""
        try:
            await asyncio.wait_for(self._runs_event.wait(), timeout)
        except TimeoutError:
            return False
        self._runs_event.clear()
        return True

    async def wait_for_outbox(self, timeout: float) -> bool:
        """Wait until another process announces committed outbox rows (True) or ``timeout``
        passes (False): PostgreSQL's listener sets the event on NOTIFY ``duetime_outbox``;
        SQLite has no NOTIFY and hears nothing (its relays poll)."""
        try:
            await asyncio.wait_for(self._outbox_event.wait(), timeout)
        except TimeoutError:
            return False
        self._outbox_event.clear()
        return True

    # --- the unit of work ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[SQLTransaction]:
        """One write transaction for a service that decides between reads and writes (the
        materializer's planner, registration's schedule comparison): committed when the block
        ends, rolled back if it raises. The call's pending audit entry, if any, is its last
        statement."""
        async with self._tx() as conn:
            yield SQLTransaction(self, conn)
            await self._audit(conn)

    async def enlist(self, connection: object) -> Any:
        """Transactional enqueue is PostgreSQL's (``store/postgres/enlisted.py``)."""
        raise UnsupportedFeature(
            "transactional enqueue (a caller's connection) needs the PostgreSQL store"
        )

    # --- jobs -----------------------------------------------------------------------------

    async def _job_row(self, conn: Any, ref: JobRef, *, lock: bool = False) -> Any:
        if ref.id is not None:
            name = "job_lock_by_id" if lock else "job_get_by_id"
            row = await self._one(conn, name, tenant=ref.tenant, id=ref.id)
        else:
            name = "job_lock_by_name" if lock else "job_get_by_name"
            row = await self._one(conn, name, tenant=ref.tenant, name=ref.name)
        if row is None:
            raise NotFound(f"job {ref.id or ref.name!s} not found")
        return row

    async def job_get(self, ref: JobRef) -> Job:
        async with self._read() as conn:
            return _rows.job_from_row(await self._job_row(conn, ref), self.codec)

    async def job_list(self, params: JobListParams) -> Page[Job]:
        return await self._read_page(
            "job_list",
            params.limit,
            lambda r: _rows.job_from_row(r, self.codec),
            lambda job: job.name,
            tenant=params.tenant,
            status=None if params.status is None else str(params.status),
            name_prefix=params.name_prefix,
            name_until=_names_after_prefix(params.name_prefix),
            tag=params.tag,
            after_name=params.after_name,
        )

    async def job_set_status(self, params: JobSetStatusParams) -> Job:
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            row = await self._job_row(conn, params.job, lock=True)
            current = _rows.job_from_row(row, self.codec)
            allowed_from = STATUS_MOVES.get(params.status, frozenset())
            if current.status is params.status or not pause_expected(current, params):
                return await self._pause_note_again(conn, current, params, now)
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
                **move_columns(params),
            )
            if row is None:
                raise Conflict(f"job {current.name!r} changed concurrently; try again")
            await self._job_moved(conn, current, params, now)
            if params.status in PENDING_END_STATE:
                state, reason = PENDING_END_STATE[params.status]
                cancel = params.status is JobStatus.CANCELLED
                withdrawn = 0
                if not cancel:  # paused: runs not yet due are withdrawn (decision 0019)
                    withdrawn = await self._exec(
                        conn,
                        "runs_withdraw_pending",
                        job_id=current.id,
                        now=params.withdraw_after or now,
                    )
                await self._end_runs(
                    conn,
                    "runs_end_pending",
                    END_EVENTS,
                    now,
                    job_id=current.id,
                    state=str(state),
                    reason=reason,
                    include_manual=cancel,
                )
                if withdrawn and current.max_runs is not None:
                    # runs withdrawn before their instant do not count against max_runs
                    await self._exec(conn, "jobs_uncount_runs", id=current.id, count=withdrawn)
                    row = await self._job_row(conn, params.job)
            _audit.note(
                subject_id=current.id,
                subject_name=current.name,
                change={
                    "before": {"status": str(current.status)},
                    "after": {"status": str(params.status)},
                },
            )
            await self._audit(conn)
            return _rows.job_from_row(row, self.codec)

    async def job_delete(self, ref: JobRef) -> None:
        """The job, its runs, their attempts and its skip records, in one transaction. No
        foreign key cascades from runs to attempts (decision 0010): the runs go first (waiting
        for a completion that holds one), then, in a statement of its own that sees what such a
        completion recorded, their attempts."""
        async with self._tx() as conn:
            row = await self._job_row(conn, ref, lock=True)
            runs = await self._all(conn, "job_delete_runs", id=row["id"])
            if runs:
                await self._exec(conn, "job_delete_attempts", ids=[r["id"] for r in runs])
            await self._exec(conn, "job_delete", id=row["id"])
            _audit.note(subject_id=self.codec.uuid(row["id"]), subject_name=row["name"])
            await self._audit(conn)

    # --- runs: trigger --------------------------------------------------------------------

    async def run_trigger(self, params: RunTriggerParams) -> tuple[Run, bool]:
        """A manual run: one statement (one round trip) in the common case; a job missing or
        cancelled, or an idempotency key already used, goes through a transaction that says
        which (and returns the key's run)."""
        made = await self._run_trigger_one_statement(params)
        if made is not None:
            return made, True
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            job = _rows.job_from_row(await self._job_row(conn, params.job), self.codec)
            if job.status is JobStatus.CANCELLED:
                raise Conflict(f"job {job.name!r} is cancelled; it cannot be triggered")
            values = trigger_run_values(job, params, now)
            inserted = await self._all(conn, "runs_insert", batch=self._records([values]), now=now)
            if inserted:
                await self._notify(conn)
                _audit.note(
                    subject_id=job.id, subject_name=job.name, change={"run": str(values["id"])}
                )
                await self._audit(conn)
                row = await self._one(conn, "run_get", tenant=job.tenant, id=values["id"])
                return _rows.run_from_row(row, self.codec), True
            row = await self._one(
                conn, "run_get_by_key", job_id=job.id, idempotency_key=params.idempotency_key
            )
            if row is None:  # pragma: no cover - only a conflicting key reaches here
                raise Conflict("run could not be created; try again")
            if row["request_hash"] != params.request_hash:
                raise Conflict(
                    f"idempotency key {params.idempotency_key!r} was used with a different request"
                )
            return _rows.run_from_row(row, self.codec), False

    async def _run_trigger_one_statement(self, params: RunTriggerParams) -> Run | None:
        run_id = uuid.uuid4()
        ref = params.job
        values: dict[str, Any] = {
            "tenant": ref.tenant,
            "id": run_id,
            "payload": params.payload,
            "priority": params.priority,
            "idempotency_key": params.idempotency_key or f"auto:{run_id}",
            "request_hash": params.request_hash,
            "now": self._fixed_now(params.now),
        }
        if ref.id is not None:
            name, values["job_id"] = "run_trigger_by_id", ref.id
        else:
            name, values["job_name"] = "run_trigger_by_name", ref.name
        entry = _audit.take() if self.audits_in_statement else None
        if entry is not None:
            name += "_audited"
            values.update(audit_id=ordered_id(), audit_actor=entry.actor, audit_action=entry.action)
        async with self._write() as conn:
            row = await self._one(conn, name, **values)
            if row is None:
                if entry is not None:  # no run made: the transaction that says why may make it
                    entry.taken = False
                return None
            if not self.notifies_in_statement:
                await self._notify(conn)
            if not self.audits_in_statement and _audit.pending() is not None:
                job_id = self.codec.uuid(row["job_id"])
                run = {"run": str(run_id)}
                _audit.note(subject_id=job_id, subject_name=row["job_name"], change=run)
                await self._audit(conn)
        return _rows.run_from_row(row, self.codec)

    # --- runs: the worker's path ----------------------------------------------------------

    async def runs_claim(self, params: RunsClaimParams) -> list[ClaimedRun]:
        if not params.tasks or (params.queues is not None and not params.queues):
            return []
        aging = Aging(params.priority_aging, params.priority_aging_cap)
        async with self._claim_steps() as steps:
            async with steps.fair() as conn:
                rows = await self._claim_fair(
                    conn, params, aging, params.limit, only_fast=False, share=True
                )
                if 0 < len(rows) < params.limit and _claim_flag(rows[0], "capped", absent=False):
                    # a group yielded its whole share and may hold more: the rest of the
                    # batch from every group, as far as it goes
                    rows += await self._claim_fair(
                        conn, params, aging, params.limit - len(rows), only_fast=False
                    )
                if self.run_events is not None:
                    await self._claim_events(conn, rows, params.now)
            # the locked step: runs of limited tenants and runs with an overlap key, when the
            # one-statement claim left room and saw some (or claimed nothing, so could not
            # say); what a quota or a busy key keeps from its share goes to the others
            if len(rows) < params.limit and (
                not rows or _claim_flag(rows[0], "deferred", absent=True)
            ):
                async with steps.locked() as conn:
                    locked, found = await self._claim_locked(
                        conn, params, aging, params.limit - len(rows)
                    )
                    if self.run_events is not None:
                        await self._claim_events(conn, locked, params.now)
                rows += locked
                if found and len(rows) < params.limit:
                    async with steps.fair() as conn:
                        more = await self._claim_fair(
                            conn, params, aging, params.limit - len(rows), only_fast=True
                        )
                        if self.run_events is not None:
                            await self._claim_events(conn, more, params.now)
                        rows += more
        decode, codec = _rows.claimed_from_tuple, self.codec
        claimed = [decode(r, codec) for r in rows]
        claimed.sort(key=lambda c: (c.run.available_at, -c.run.priority))
        return claimed

    async def _claim_events(
        self, conn: Any, rows: list[Sequence[Any]], now: datetime | None
    ) -> None:
        """In a claim step's transaction: the ``started`` events of the runs it started at
        once (those claimed ahead report theirs when ``runs_start`` starts them)."""
        started = [self.codec.uuid(r[_ID]) for r in rows if r[_STARTED_AT] is not None]
        await self._run_events(conn, started, STARTED_EVENTS, self._fixed_now(now))

    async def _claim_fair(
        self,
        conn: Any,
        params: RunsClaimParams,
        aging: Aging,
        limit: int,
        *,
        only_fast: bool,
        share: bool = False,
    ) -> list[Sequence[Any]]:
        """The one-statement claim: rows of ``_rows.CLAIMED_COLUMNS`` (then PostgreSQL's
        flags). With ``share``, each (tenant, queue, priority) group is read only up to its
        tenant's weighted share of ``limit`` among the tenants with runs due (not up to
        ``limit`` each: with many groups that read many times the batch); the rows then say
        how many groups were ``capped`` at their share.

        The statement locks what it reads, so that concurrent claims take different runs;
        while the last claim said its groups were ``wide`` (PostgreSQL: their bounds add up to
        many times the batch), the form that locks only the picked runs is used instead."""
        rows = await self._tuples(
            conn,
            "runs_claim_fair_wide" if self._claims_wide else "runs_claim_fair",
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
            share=share,
        )
        if rows:
            self._claims_wide = _claim_flag(rows[0], "wide", absent=False)
        return rows

    async def _claim_locked(
        self, conn: Any, params: RunsClaimParams, aging: Aging, capacity: int
    ) -> tuple[list[Sequence[Any]], bool]:
        """Claim runs a quota or an overlap key limits, in the caller's transaction: find the
        candidates (locked on PostgreSQL, SKIP LOCKED), serialize on each limited tenant and
        key, count in a fresh statement, decide (``duetime.policies.fairness``), record the
        tenants' start buckets. Returns the claimed rows and whether there were candidates."""
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
        candidates = [_rows.locked_candidate_from_row(r, self.codec, now) for r in found]
        keys = overlap_keys([c for _, c in candidates])
        limited = sorted({r["tenant"] for r in found if r["limited"]})
        if await self._lock_keys(conn, keys + [tenant_lock_key(t) for t in limited]):
            # the clock once the locks are ours: later than every claim that held them
            # before, so start buckets refill monotonically and starts are stamped when
            # they happen
            now = await self._now(conn, params.now)
        counted = await self._all(conn, "runs_running_by_key", keys=keys) if keys else []
        running = {r["concurrency_key"]: r["running"] for r in counted}
        candidates, running = await self._judge_waiting(conn, candidates, running, keys, now)
        quota_rows = await self._all(conn, "tenant_quotas", tenants=limited) if limited else []
        plan = plan_locked_claim(
            candidates,
            weights={r["tenant"]: r["weight"] for r in found},
            in_flight={r["tenant"]: r["running"] for r in found},
            running=running,
            quotas={
                q.tenant: q
                for q in (_rows.tenant_quota_from_row(r, self.codec, now) for r in quota_rows)
            },
            capacity=capacity,
            now=now,
            aging=aging,
        )
        decision = plan.decision
        if decision.skip:
            await self._exec(conn, "runs_skip_overlap", ids=decision.skip, now=now)
            await self._run_events(conn, decision.skip, SKIP_EVENTS, now)
        buckets = plan.buckets()
        if buckets:
            await self._exec(
                conn,
                "tenant_buckets_set",
                tenants=[b[0] for b in buckets],
                tokens=[b[1] for b in buckets],
                now=now,
            )
        claimed: list[Sequence[Any]] = []
        if decision.claim:
            claimed = await self._tuples(
                conn,
                "runs_claim_ids",
                ids=decision.claim,
                worker_id=params.worker_id,
                lease_ttl=params.lease_ttl,
                now=now,
            )
        # the runs left waiting for a busy key: at most their job's max_waiting
        taken = {*decision.claim, *decision.skip}
        capped = {
            r["concurrency_key"]
            for r in found
            if r["concurrency_key"] is not None
            and r["max_waiting"]
            and self.codec.uuid(r["id"]) not in taken
        }
        await self._trim_waiting(conn, sorted(capped), now)
        return claimed, True

    async def _judge_waiting(
        self,
        conn: Any,
        candidates: list[Any],
        running: dict[str, int],
        keys: list[str],
        now: datetime,
    ) -> tuple[list[Any], dict[str, int]]:
        """Before a locked claim decides (decision 0016): the busy keys a due ``replace`` run
        wants are asked to stop (or cancelled, past their deadline), and the runs waiting
        beyond their policy's bound are skipped (``runs_trim_waiting``). Returns the
        candidates left and the running counts afterwards.

        The trim comes first and runs for every ``buffer_one`` / ``replace`` key with a due
        candidate (SQL sees the runs this claim's candidate list left out): a candidate an
        older run or a newer running one supersedes is never claimed, and never replaces."""
        newest_only = (OverlapPolicy.BUFFER_ONE, OverlapPolicy.REPLACE)
        due = {c.key for _, c in candidates if c.due and c.policy in newest_only}
        trimmed = await self._trim_waiting(conn, sorted(due), now)
        if trimmed:
            candidates = [p for p in candidates if p[1].id not in trimmed]
        wanted = replacing_keys([c for _, c in candidates], running)
        if wanted:
            running = {**running, **await self._replace(conn, wanted, now)}
        return candidates, running

    async def _trim_waiting(self, conn: Any, keys: list[str], now: datetime) -> set[uuid.UUID]:
        """``runs_trim_waiting`` of ``keys``: the runs skipped."""
        if not keys:
            return set()
        rows = await self._all(conn, "runs_trim_waiting", keys=sorted(keys), now=now)
        skipped = {self.codec.uuid(r["id"]) for r in rows}
        await self._run_events(conn, sorted(skipped), SKIP_EVENTS, now)
        return skipped

    async def _replace(
        self, conn: Any, keys: list[str], now: datetime, *, keep: uuid.UUID | None = None
    ) -> dict[str, int]:
        """Replace the running runs of ``keys`` (but ``keep``): one that has not started is
        cancelled at once; one that has is asked to stop (``replace_deadline`` = now + its
        job's ``replace_timeout``, its worker told at once), and cancelled outright once that
        deadline has passed. Attempts of cancelled runs are recorded. Returns, per key, the
        runs still running (the successor waits for them).

        A run claimed ahead whose instant has not come is newer than the successor: it is
        left alone and the successor waits (at that instant it starts, and the trim
        supersedes the successor). Every run asked or cancelled is announced, so its worker
        stops it and frees its slot at once."""
        left = dict.fromkeys(keys, 0)
        asked: list[uuid.UUID] = []
        replaced: list[uuid.UUID] = []
        rows = await self._all(conn, "runs_replace_victims", keys=keys)
        runs = [_rows.run_from_row(row, self.codec) for row in rows]
        # the successor claimed ahead and starting: a run claimed ahead newer than it wins
        since = next((r.scheduled_for for r in runs if r.id == keep), None)
        for row, run in zip(rows, runs, strict=True):
            if run.id == keep:
                continue
            if run.started_at is None and (
                run.available_at > now or (since is not None and run.scheduled_for > since)
            ):
                left[row["concurrency_key"]] += 1
                continue
            deadline = self.codec.instant(row["replace_deadline"])
            if run.started_at is not None and (deadline is None or deadline > now):
                left[row["concurrency_key"]] += 1
                if deadline is None:
                    await self._exec(
                        conn,
                        "run_replace_request",
                        id=run.id,
                        token=run.token,
                        deadline=now + timedelta(seconds=row["replace_timeout_s"]),
                    )
                    asked.append(run.id)
                continue
            if await self._exec(conn, "run_replace", id=run.id, token=run.token, now=now):
                message = (
                    "replaced by a newer run"
                    if deadline is None
                    else "replaced: did not stop within its replace_timeout"
                )
                await self._attempts_insert(conn, [run], "cancelled", message, now)
                asked.append(run.id)
                replaced.append(run.id)
        await self._run_events(conn, replaced, CANCEL_EVENTS, now)
        if asked:
            await self._announce_cancels(conn, asked)
        return left

    async def runs_misfire(self, params: RunsMisfireParams) -> list[str]:
        if self._events_for(SKIP_EVENTS) is None:
            rows = await self._write_all(
                "runs_misfire", now=self._fixed_now(params.now), limit=params.limit
            )
        else:  # the runs' `skipped` events in the same transaction
            async with self._tx() as conn:
                now = await self._now(conn, params.now)
                rows = await self._all(conn, "runs_misfire", now=now, limit=params.limit)
                ids = [self.codec.uuid(row["id"]) for row in rows]
                await self._run_events(conn, ids, SKIP_EVENTS, now)
        return [row["name"] for row in rows]

    async def run_start(self, params: RunStartParams) -> bool:
        started = await self.runs_start(
            RunsStartParams(
                [(params.run_id, params.token)], now=params.now, lease_ttl=params.lease_ttl
            )
        )
        return params.run_id in started

    async def runs_start(self, params: RunsStartParams) -> set[uuid.UUID]:
        raise NotImplementedError

    async def _start_judged(
        self,
        conn: Any,
        eligible: list[StartCandidate],
        counted: list[Any],
        now: datetime | None,
        lease_ttl: float | None,
    ) -> tuple[set[uuid.UUID], Answer | None]:
        """The keyed runs of a start batch (``eligible``, in id order; ``counted``: the
        ``runs_started_by_key`` rows of their keys, which the caller's transaction holds),
        judged as a batch (``duetime.policies.overlap.plan_starts``) and their verdicts written,
        one statement each, in that transaction; keys with a ``replace`` run take the one-run
        path. Returns the runs that path started and the :meth:`_send` answer of
        ``runs_start_judged`` (its rows: the other runs started; None when none was judged to
        start), which PostgreSQL reads after the commit."""
        plan = plan_starts(eligible, {r["concurrency_key"]: r["running"] for r in counted})
        at = self._fixed_now(now)
        for query, verdict in (("runs_start_skip", plan.skip), ("runs_start_defer", plan.defer)):
            if verdict:
                await self._send(conn, query, ids=[c.id for c in verdict], now=at)
        judged = None
        if plan.start:
            ids = [c.id for c in plan.start]
            judged = await self._send(
                conn, "runs_start_judged", ids=ids, now=at, lease_ttl=lease_ttl
            )
        started: set[uuid.UUID] = set()
        for c in plan.replace:
            if await self._start_one(conn, c.id, c.token, now, lease_ttl):
                started.add(c.id)
        return started, judged

    async def _start_one(
        self,
        conn: Any,
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
            await self._lock_keys(conn, [key])
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
            if verdict is StartVerdict.REPLACE and any(
                (await self._replace(conn, [key], at, keep=run_id)).values()
            ):
                # the runs it replaces were asked to stop: it waits for them (decision 0016)
                await self._exec(conn, "run_start_defer", id=run_id, token=token, now=at)
                return False
        changed = await self._exec(
            conn,
            "run_start",
            id=run_id,
            token=token,
            now=self._fixed_now(now),
            lease_ttl=lease_ttl,
        )
        return changed == 1

    async def runs_heartbeat(self, params: RunsHeartbeatParams) -> set[uuid.UUID]:
        if not params.runs:
            return set()
        runs = sorted(params.runs)  # rows locked in id order, as runs_start does: no deadlock
        rows = await self._write_all(
            "runs_heartbeat",
            tenant=params.tenant,
            worker_id=params.worker_id,
            lease_ttl=params.lease_ttl,
            ids=[r[0] for r in runs],
            tokens=[r[1] for r in runs],
            now=self._fixed_now(params.now),
        )
        return {self.codec.uuid(r["id"]) for r in rows}

    async def leases_reap(self, params: LeasesReapParams) -> ReapResult:
        async with self._tx() as conn:
            now = await self._now(conn, params.now)
            if not await self._holds(conn, params.leader, now):
                return ReapResult(0, 0)
            rows = await self._all(conn, "leases_expired", now=now, limit=params.limit)
            if not rows:
                return ReapResult(0, 0)
            claimed = [_rows.claimed_from_row(r, self.codec) for r in rows]
            decisions = [
                # a run a newer one replaces (decision 0016) is not retried: it ends replaced
                (RunState.CANCELLED, "replaced")
                if r["replace_deadline"] is not None
                else lease_lost_decision(
                    c.run,
                    c.delivery,
                    # the window only stops retries: a run claimed ahead that never started
                    # still owes its first attempt, however late
                    window_over=c.run.started_at is not None and c.retry_window_over(now),
                )
                for r, c in zip(rows, claimed, strict=True)
            ]
            await self._exec(
                conn,
                "runs_reap",
                now=now,
                id=[c.run.id for c in claimed],
                token=[c.run.token for c in claimed],
                next_state=[str(d[0]) for d in decisions],
                reason=[d[1] for d in decisions],
            )
            await self._attempts_insert(
                conn, [c.run for c in claimed], "lost", "lease expired", now
            )
            finished_jobs = [
                c.run.job_id
                for c, d in zip(claimed, decisions, strict=True)
                if d[0] is RunState.DEAD and c.one_shot and c.run.trigger is RunTrigger.SCHEDULE
            ]
            if finished_jobs:
                await self._exec(conn, "jobs_complete", ids=finished_jobs, now=now)
            # a run claimed ahead and sent back unstarted reports nothing (nothing of it ran)
            ended = [
                c.run.id
                for c, d in zip(claimed, decisions, strict=True)
                if not (d[0] is RunState.SCHEDULED and c.run.started_at is None)
            ]
            await self._run_events(conn, ended, REAP_EVENTS, now)
            rescheduled = sum(1 for d in decisions if d[0] is RunState.SCHEDULED)
            if rescheduled:
                await self._notify(conn)
        reaped = tuple(
            (c.run.tenant, c.run.task, str(d[0])) for c, d in zip(claimed, decisions, strict=True)
        )
        return ReapResult(rescheduled=rescheduled, dead=len(decisions) - rescheduled, reaped=reaped)

    # --- runs: reading and operator actions -----------------------------------------------

    async def _run_row(self, tenant: str, run_id: uuid.UUID) -> Any:
        row = await self._read_one("run_get", tenant=tenant, id=run_id)
        if row is None:
            raise NotFound(f"run {run_id} not found")
        return row

    async def run_get(self, tenant: str, run_id: uuid.UUID) -> Run:
        return _rows.run_from_row(await self._run_row(tenant, run_id), self.codec)

    async def run_get_claimed(self, tenant: str, run_id: uuid.UUID) -> ClaimedRun:
        return _rows.claimed_from_row(await self._run_row(tenant, run_id), self.codec)

    async def runs_list(self, params: RunListParams) -> Page[Run]:
        before_at, before_id = params.before or (None, None)
        return await self._read_page(
            "runs_list",
            params.limit,
            lambda r: _rows.run_from_row(r, self.codec),
            lambda run: f"{to_micros(run.scheduled_for)}.{run.id}",
            tenant=params.tenant,
            job_id=params.job_id,
            state=None if params.state is None else str(params.state),
            before_at=before_at,
            before_id=before_id,
            task=params.task,
            since=params.since,
            until=params.until,
        )

    async def attempts_list(self, tenant: str, run_id: uuid.UUID) -> list[Attempt]:
        rows = await self._read_all("attempts_list", tenant=tenant, run_id=run_id)
        return [_rows.attempt_from_row(r, self.codec) for r in rows]

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
            if params.run_ids is not None and len(rows) < len(params.run_ids):
                await self._refuse_step_replays(conn, params.run_ids, rows)
            replayed = [self.codec.uuid(r["id"]) for r in rows]
            if rows:
                await self._notify(conn)
                ids = [str(run_id) for run_id in replayed[: _audit.MAX_IDS]]
                _audit.note(change={"count": len(rows), "runs": ids})
                await self._audit(conn)
                # scheduled again: `retrying` (the run's token is the dead attempt's, whose
                # events were `started` and `dead`: the id stays one per event)
                await self._run_events(conn, replayed, REPLAY_EVENTS, now)
        return replayed

    async def _refuse_step_replays(
        self, conn: Any, asked: Sequence[uuid.UUID], replayed: Sequence[Any]
    ) -> None:
        """Conflict when a run asked for by id was left out because it is a workflow step's
        (retried through its instance, which re-opens what depends on it)."""
        done = {self.codec.uuid(r["id"]) for r in replayed}
        left = [run_id for run_id in asked if run_id not in done]
        steps = await self._all(conn, "workflow_steps_of_runs", ids=left)
        if steps:
            step = steps[0]
            raise Conflict(
                f"run {self.codec.uuid(step['run_id'])} is step {step['step']!r} of workflow "
                f"instance {self.codec.uuid(step['instance_id'])}: retry the instance "
                "(app.workflows.retry, POST /workflow-instances/{id}/retry) instead"
            )

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
                prior = _rows.run_from_row(before, self.codec)
                await self._attempts_insert(conn, [prior], "cancelled", "cancelled", now)
            await self._run_events(conn, [params.run_id], CANCEL_EVENTS, now)
            _audit.note(
                subject_name=row["job_name"],
                change={"before": {"state": before["state"]}, "after": {"state": row["state"]}},
            )
            await self._audit(conn)
            return _rows.run_from_row(row, self.codec)

    async def runs_by_id_prefix(self, params: RunIdPrefixParams) -> list[Run]:
        rows = await self._read_all(
            "runs_by_id_prefix",
            tenant=params.tenant,
            low=params.low,
            high=params.high,
            limit=params.limit,
        )
        return [_rows.run_from_row(r, self.codec) for r in rows]

    async def skips_list(self, tenant: str, job_id: uuid.UUID) -> list[PlannedSkip]:
        rows = await self._read_all("skips_list", tenant=tenant, job_id=job_id)
        return [_rows.skip_from_row(r, self.codec) for r in rows]

    # --- long runs ------------------------------------------------------------------------

    async def run_progress_set(self, params: RunProgressParams) -> bool:
        changed = await self._write_exec(
            "run_progress_set",
            id=params.run_id,
            token=params.token,
            fraction=params.fraction,
            message=params.message,
        )
        return changed == 1

    async def run_checkpoint_set(self, params: RunCheckpointParams) -> bool:
        changed = await self._write_exec(
            "run_checkpoint_set", id=params.run_id, token=params.token, checkpoint=params.checkpoint
        )
        return changed == 1

    async def runs_held(self, worker_id: str) -> list[ClaimedRun]:
        rows = await self._read_all("runs_held", worker_id=worker_id)
        return [_rows.claimed_from_row(r, self.codec) for r in rows]

    async def runs_stop_requested(
        self, runs: Sequence[tuple[uuid.UUID, int]]
    ) -> dict[uuid.UUID, str]:
        if not runs:
            return {}
        rows = await self._read_all(
            "runs_stop_requested", ids=[r[0] for r in runs], tokens=[r[1] for r in runs]
        )
        return {self.codec.uuid(r["id"]): r["reason"] for r in rows}

    # --- leadership, nodes, retention ------------------------------------------------------

    async def leader_elect(self, params: LeaderElectParams) -> Leadership | None:
        row = await self._write_one(
            "leader_elect", node_id=params.node_id, ttl=params.ttl, now=self._fixed_now(params.now)
        )
        return None if row is None else _rows.leadership_from_row(row, self.codec)

    async def leader_resign(self, fence: LeaderFence) -> None:
        await self._write_exec(
            "leader_resign", node_id=fence.node_id, term=fence.term, now=self._fixed_now(None)
        )

    async def leader_get(self) -> Leadership | None:
        row = await self._read_one("leader_get")
        return None if row is None else _rows.leadership_from_row(row, self.codec)

    async def node_register(self, node: NodeInfo) -> None:
        await self._write_exec(
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
        await self._write_exec("node_heartbeat", id=node_id, now=self._fixed_now(now))

    async def node_unregister(self, node_id: str) -> None:
        await self._write_exec("node_delete", id=node_id)

    async def nodes_list(self) -> list[NodeInfo]:
        rows = await self._read_all("nodes_list")
        return [_rows.node_from_row(r, self.codec) for r in rows]

    async def nodes_prune(self, before: datetime) -> int:
        async with self._tx() as conn:
            nodes = await self._exec(conn, "nodes_prune", before=before)
            workers = await self._exec(conn, "workers_prune", before=before)
        return nodes + workers

    async def history_prune(self, params: HistoryPruneParams) -> int:
        """Up to ``params.limit`` runs that ended before ``params.before`` (never a dead
        letter: see ``history_prune_runs``), the attempts retention ends row by row (SQLite:
        those runs' attempts; PostgreSQL: old ones in the default partition, the weekly ones
        go whole with :meth:`attempts_partitions`), and as many old skip records and ended
        workflow instances (succeeded or cancelled), in one leader-fenced transaction."""
        async with self._tx() as conn:
            now = await self._now(conn, None)
            if not await self._holds(conn, params.leader, now):
                return 0
            runs = await self._all(
                conn, "history_prune_runs", before=params.before, limit=params.limit
            )
            await self._exec(
                conn,
                "history_prune_attempts",
                ids=[r["id"] for r in runs],
                before=params.before,
                limit=params.limit,
            )
            await self._exec(conn, "history_prune_skips", before=params.before, limit=params.limit)
            await self._exec(
                conn, "workflow_instances_prune", before=params.before, limit=params.limit
            )
        return len(runs)

    async def attempts_partitions(self, params: AttemptPartitionsParams) -> AttemptPartitionsChange:
        """No partitions in this dialect (PostgreSQL overrides it)."""
        return AttemptPartitionsChange()

    # --- workers --------------------------------------------------------------------------

    async def worker_register(self, worker: WorkerInfo) -> None:
        async with self._tx() as conn:
            now = worker.heartbeat_at
            await self._exec(
                conn,
                "worker_upsert",
                tenant=worker.tenant or "",
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
                    conn,
                    "known_tasks_upsert",
                    tenant=worker.tenant or "",
                    tasks=sorted(set(worker.tasks)),
                    now=now,
                )

    async def worker_heartbeat(
        self, worker_id: str, now: datetime | None = None, *, tenant: str | None = None
    ) -> None:
        await self._write_exec(
            "worker_heartbeat", tenant=tenant or "", id=worker_id, now=self._fixed_now(now)
        )

    async def worker_unregister(self, worker_id: str, *, tenant: str | None = None) -> None:
        await self._write_exec("worker_delete", tenant=tenant or "", id=worker_id)

    async def workers_list(self) -> list[WorkerInfo]:
        rows = await self._read_all("workers_list")
        return [_rows.worker_from_row(r, self.codec) for r in rows]

    async def tasks_known(self, tasks: Sequence[str], tenant: str | None = None) -> set[str]:
        rows = await self._read_all("tasks_known", tasks=list(tasks), tenant=tenant or "")
        return {r["task"] for r in rows}

    # --- tenants --------------------------------------------------------------------------

    async def tenant_secret(self, tenant: str) -> str:
        row = await self._read_one("tenant_secret_get", tenant=tenant)
        if row is None:
            async with self._write() as conn:
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
        if params.max_jobs is not None:
            await self._tenant_max_jobs_set(params.tenant, params.max_jobs, params.now)
        row = await self._audited_one(
            "tenant_limits_upsert",
            tenant=params.tenant,
            secret=new_webhook_secret(),
            max_in_flight=params.max_in_flight,
            max_starts_per_second=params.max_starts_per_second,
            weight=params.weight,
            max_backfill_runs=params.max_backfill_runs,
            now=self._fixed_now(params.now),
        )
        return _rows.tenant_limits_from_row(row)

    async def tenant_limits_get(self, tenant: str) -> TenantLimits:
        row = await self._read_one("tenant_limits_get", tenant=tenant)
        return TenantLimits(tenant) if row is None else _rows.tenant_limits_from_row(row)

    async def tenant_limits_list(self) -> list[TenantLimits]:
        rows = await self._read_all("tenant_limits_list")
        return [_rows.tenant_limits_from_row(r) for r in rows]

    async def tenant_alert_webhooks_set(
        self, tenant: str, webhooks: Sequence[str], now: datetime | None = None
    ) -> list[str]:
        row = await self._audited_one(
            "tenant_alert_webhooks_upsert",
            tenant=tenant,
            secret=new_webhook_secret(),
            webhooks=_json.dumps(list(webhooks)),
            now=self._fixed_now(now),
        )
        return [str(u) for u in self.codec.json(row["alert_webhooks"])]

    async def tenant_alert_webhooks(self, tenants: Sequence[str]) -> dict[str, list[str]]:
        if not tenants:
            return {}
        rows = await self._read_all("tenant_alert_webhooks_get", tenants=list(tenants))
        return {str(r["id"]): [str(u) for u in self.codec.json(r["alert_webhooks"])] for r in rows}

    async def tenant_stats(self, now: datetime | None = None) -> list[TenantQueueStats]:
        async with self._read() as conn:
            rows = await self._all(conn, "tenant_stats", now=self._fixed_now(now))
            quota_rows = await self._all(conn, "tenant_quota_states")
        return _rows.tenant_stats_from_rows(rows, quota_rows, self.codec)

    # --- api keys -------------------------------------------------------------------------

    async def api_key_create(self, params: ApiKeyCreateParams) -> ApiKey:
        row = await self._audited_one(
            "api_key_insert",
            id=params.id,
            tenant=params.tenant,
            role=str(params.role),
            name=params.name,
            prefix=params.prefix,
            key_hash=params.key_hash,
            now=self._fixed_now(params.now),
        )
        return _rows.api_key_from_row(row, self.codec)

    async def api_key_get_by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._read_one("api_key_get_by_hash", key_hash=key_hash)
        return None if row is None else _rows.api_key_from_row(row, self.codec)

    async def api_keys_list(self, params: ApiKeyListParams) -> list[ApiKey]:
        rows = await self._read_all(
            "api_keys_list", tenant=params.tenant, include_revoked=params.include_revoked
        )
        return [_rows.api_key_from_row(r, self.codec) for r in rows]

    async def api_key_revoke(self, params: ApiKeyRevokeParams) -> ApiKey:
        row = await self._audited_one(
            "api_key_revoke",
            subject_of_row=True,
            id=params.id,
            tenant=params.tenant,
            now=self._fixed_now(params.now),
        )
        if row is None:
            raise NotFound(f"API key {params.id} not found")
        return _rows.api_key_from_row(row, self.codec)

    def api_keys_epoch(self) -> int | None:
        # no news of other processes' changes here (PostgresStore listens for them)
        return None

    async def api_key_touch(self, params: ApiKeyTouchParams) -> None:
        await self._write_exec(
            "api_key_touch", id=params.id, every=params.every, now=self._fixed_now(params.now)
        )


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"database schema is v{version}; this duetime knows up to v{SCHEMA_VERSION}"
        )


def _claim_flag(row: Sequence[Any], name: str, *, absent: bool) -> bool:
    """A fair claim row's flag column: PostgreSQL's claim returns ``deferred`` (runs left to
    the locked step), ``capped`` (a group yielded its whole share) and ``wide`` (the groups
    read many times the batch) after the claimed columns (``_rows.CLAIM_FLAGS``); SQLite's
    returns none of them, and ``absent`` stands in (its locked step is always tried; it reads
    every group whole; it has one claim form)."""
    index = _rows.CLAIM_FLAGS[name]
    return bool(row[index]) if len(row) > index else absent


_ID = _rows.CLAIMED_INDEX["id"]
_STARTED_AT = _rows.CLAIMED_INDEX["started_at"]


ConnectionScope = Callable[[], contextlib.AbstractAsyncContextManager[Any]]


@dataclass(frozen=True, slots=True)
class ClaimSteps:
    """Where a claim's steps run: ``fair()`` the one-statement claim, ``locked()`` the locked
    step. SQLite hands both the claim's one transaction; PostgreSQL gives each its own
    connection (the fair claim autocommits; the locked step is a transaction)."""

    fair: ConnectionScope
    locked: ConnectionScope


class SQLTransaction:
    """The unit of work :meth:`SQLStore.transaction` yields (the ``StoreTx`` protocol of
    ``store/base.py``): fine-grained reads and writes inside one write transaction, so a
    service can decide between them. Rows read here are locked until it ends (``FOR UPDATE``
    on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` holds the whole database)."""

    def __init__(self, store: SQLStore, conn: Any) -> None:
        self._store = store
        self._conn = conn
        self._at: datetime | None = None

    async def now(self, now: datetime | None = None) -> datetime:
        """The transaction's instant: ``now`` if given, else the store's clock (a test
        clock, or the database's) read once; every write of the transaction stamps it."""
        if now is not None:
            self._at = now
        elif self._at is None:
            self._at = await self._store._now(self._conn, None)
        return self._at

    # --- jobs -----------------------------------------------------------------------------

    async def jobs_lock_due(self, params: JobsDueParams) -> list[Job]:
        """Lock up to ``limit`` active jobs due by ``until`` in the partition range, skipping
        those another transaction holds (PostgreSQL ``SKIP LOCKED``). With ``owner``, only
        jobs of the partitions whose lease it holds at the transaction's instant, the leases
        locked until the transaction ends (``jobs_due_leased``: the fence)."""
        low, high = params.partitions or (0, 255)
        leased = {} if params.owner is None else {"owner": params.owner, "now": await self.now()}
        rows = await self._store._all(
            self._conn,
            "jobs_due" if params.owner is None else "jobs_due_leased",
            until=params.until,
            limit=params.limit,
            partition_low=low,
            partition_high=high,
            **leased,
        )
        return [_rows.job_from_row(r, self._store.codec) for r in rows]

    async def runs_materialize_plain(
        self, params: JobsDueParams, tzdata_version: str | None = None
    ) -> PlainBatch:
        """Make the runs of up to ``limit`` due plain one-shot jobs and advance them, in the
        database (docs/decisions/0038); the jobs another transaction holds are skipped
        (PostgreSQL ``SKIP LOCKED``; SQLite's ``BEGIN IMMEDIATE`` holds them all). With
        ``owner``, only jobs of the partitions whose lease it holds, the leases locked until
        the transaction ends, as :meth:`jobs_lock_due`."""
        low, high = params.partitions or (0, 255)
        values: dict[str, Any] = {
            "until": params.until,
            "limit": params.limit,
            "partition_low": low,
            "partition_high": high,
            "now": await self.now(),
            "workflow_task": WORKFLOW_TASK,
            "tzdata_version": tzdata_version,
        }
        if params.owner is not None:
            values["owner"] = params.owner
        return await self._store._materialize_plain(
            self._conn, values, leased=params.owner is not None
        )

    async def job_lock(self, ref: JobRef) -> Job | None:
        """The job, locked until the transaction ends; None if there is none."""
        try:
            row = await self._store._job_row(self._conn, ref, lock=True)
        except NotFound:
            return None
        return _rows.job_from_row(row, self._store.codec)

    async def job_insert(self, params: JobUpsertParams) -> Job | None:
        """Create the job; None if its (tenant, name) exists already (nothing written);
        JobCapReached if a new name would exceed its tenant's ``max_jobs``."""
        await jobs_cap_check(self._store, self._conn, params.tenant, params.name)
        now = await self.now()
        values = job_values(params, params.job_id, params.schedule, params.next_fire_at)
        row = await self._store._one(self._conn, "job_insert", **values, now=now)
        if row is None:
            return None
        job = _rows.job_from_row(row, self._store.codec)
        _audit.note_job(None, job)
        return job

    async def job_update(
        self,
        params: JobUpsertParams,
        job: Job,
        *,
        schedule: Schedule,
        next_fire_at: datetime | None,
        status: JobStatus,
    ) -> Job:
        """Rewrite ``job`` (locked by :meth:`job_lock`) from ``params``, with the schedule,
        next fire instant and status the caller decided."""
        now = await self.now()
        values = job_values(params, job.id, schedule, next_fire_at)
        row = await self._store._one(
            self._conn, "job_update", **values, status=str(status), now=now
        )
        if (params.misfire_policy, params.misfire_grace) != (job.misfire_policy, job.misfire_grace):
            # the runs written already judge misfires by the job's new policy and grace
            await self._store._exec(self._conn, "runs_misfire_deadlines", job_id=job.id)
        changed = _rows.job_from_row(row, self._store.codec)
        _audit.note_job(job, changed)
        return changed

    async def jobs_advance(
        self,
        advances: Sequence[tuple[uuid.UUID, datetime | None]],
        tzdata_version: str | None = None,
    ) -> None:
        """Set each job's ``next_fire_at`` (computed with ``tzdata_version``, recorded)."""
        if advances:
            await self._store._exec(
                self._conn,
                "jobs_advance",
                ids=[a[0] for a in advances],
                next_fire_ats=[a[1] for a in advances],
                tzdata_version=tzdata_version,
            )

    # --- runs -----------------------------------------------------------------------------

    async def job_last_occurrence(self, job_id: uuid.UUID) -> datetime | None:
        """The latest occurrence of the job's scheduled runs that fired (not skipped for a
        schedule change); None if there is none."""
        row = await self._store._one(self._conn, "job_last_occurrence", job_id=job_id)
        return None if row is None else self._store.codec.instant(row["last"])

    async def runs_end_pending(
        self,
        job_id: uuid.UUID,
        state: RunState,
        reason: str,
        *,
        include_manual: bool,
        after: datetime | None = None,
    ) -> int:
        """End the job's not-yet-started runs (token bumped) as ``state`` with ``reason``.
        Without ``include_manual`` (the job is not being cancelled), its scheduled runs not
        yet due — their instant after ``after``, default the transaction's instant — and
        never started are withdrawn first: deleted, their count against ``max_runs`` given
        back (decision 0019). Returns how many runs were ended or withdrawn."""
        now = await self.now()
        withdrawn = 0
        if not include_manual:
            withdrawn = await self._store._exec(
                self._conn, "runs_withdraw_pending", job_id=job_id, now=after or now
            )
        ended = await self._store._end_runs(
            self._conn,
            "runs_end_pending",
            END_EVENTS,
            now,
            job_id=job_id,
            state=str(state),
            reason=reason,
            include_manual=include_manual,
        )
        if withdrawn:
            await self._store._exec(self._conn, "jobs_uncount_runs", id=job_id, count=withdrawn)
        return withdrawn + ended

    async def runs_insert_planned(self, runs: Sequence[tuple[Job, PlannedRun]]) -> int:
        """Insert the planned runs in one statement (an existing occurrence is left alone);
        announce them (NOTIFY) with the commit. Returns how many were new."""
        return len(await self._runs_insert(runs))

    async def runs_insert_counted(
        self, runs: Sequence[tuple[Job, PlannedRun]]
    ) -> dict[uuid.UUID, int]:
        """:meth:`runs_insert_planned`, answering how many runs were new per job id."""
        inserted = await self._runs_insert(runs)
        return Counter(self._store.codec.uuid(r["job_id"]) for r in inserted)

    async def _runs_insert(self, runs: Sequence[tuple[Job, PlannedRun]]) -> list[Any]:
        """The rows (id, job_id) of the planned runs that were new."""
        if not runs:
            return []
        now = await self.now()
        rows = [planned_run_values(job, planned) for job, planned in runs]
        inserted = await self._store._runs_insert_rows(self._conn, rows, now)
        if inserted:
            await self._store._notify(self._conn)
        return inserted

    async def jobs_count_runs(self, counts: Sequence[tuple[uuid.UUID, int, bool]]) -> None:
        """Add each bounded job's new runs to its count; complete the flagged ones and those
        whose count reached ``max_runs`` (one statement)."""
        if counts:
            await self._store._exec(
                self._conn,
                "jobs_count_runs",
                ids=[c[0] for c in counts],
                added=[c[1] for c in counts],
                complete=[c[2] for c in counts],
                now=await self.now(),
            )

    async def runs_end_outside(
        self,
        job_id: uuid.UUID,
        start_at: datetime | None,
        end_at: datetime | None,
        *,
        after: datetime | None = None,
    ) -> int:
        """Withdraw the job's scheduled runs outside ``start_at``…``end_at`` that are not yet
        due (their instant after ``after``, default the transaction's instant) and never
        started — deleted, their count against ``max_runs`` given back — and skip its other
        not-yet-started ones there (``out_of_bounds``, still counted). Returns how many runs
        were withdrawn or skipped."""
        if start_at is None and end_at is None:
            return 0
        bounds = {"job_id": job_id, "start_at": start_at, "end_at": end_at}
        now = await self.now()
        withdrawn = await self._store._exec(
            self._conn, "runs_withdraw_outside", **bounds, now=after or now
        )
        ended = await self._store._end_runs(
            self._conn, "runs_end_outside", END_EVENTS, now, **bounds
        )
        if withdrawn:
            await self._store._exec(self._conn, "jobs_uncount_runs", id=job_id, count=withdrawn)
        return withdrawn + ended

    async def calendars_for(self, keys: Sequence[tuple[str, str]]) -> list[StoredCalendar]:
        """The calendars of ``keys`` ((tenant, name) pairs) that exist (one statement)."""
        return await self._store.calendars_by_key(keys, conn=self._conn)

    async def skips_insert(self, skips: Sequence[tuple[uuid.UUID, PlannedSkip]]) -> int:
        """Record skipped occurrences (first, last, count, reason) of each job, in one
        statement."""
        if not skips:
            return 0
        await self._store._exec(
            self._conn,
            "skips_insert",
            job_id=[j for j, _ in skips],
            first_at=[s.first for _, s in skips],
            last_at=[s.last for _, s in skips],
            count=[s.count for _, s in skips],
            reason=[s.reason for _, s in skips],
            now=await self.now(),
        )
        await self._store._skip_events(self._conn, skips, await self.now())
        return len(skips)


def _names_after_prefix(prefix: str | None) -> str | None:
    """The least string greater than every string starting with ``prefix``, in code point
    order (SQLite's BINARY collation): the end of the prefix's index range. None when there is
    no prefix or no such string (every character is U+10FFFF)."""
    if not prefix:
        return None
    stem = prefix.rstrip(chr(0x10FFFF))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are no characters: skip past them
        following = 0xE000
    return stem[:-1] + chr(following)
