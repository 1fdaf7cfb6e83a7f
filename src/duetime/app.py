"""The Python API: :class:`AsyncApp` for async code, :class:`App` for plain synchronous code.

Both hold settings, a store and a task registry, and expose the same operations: declare
tasks, schedule jobs (create-or-update by tenant and name, so re-running a program that declares
its jobs is safe), trigger, pause, resume, cancel, delete, inspect runs and dead letters, and
run the scheduler and worker loops. ``App`` runs an ``AsyncApp`` on a private event-loop thread,
so it also works from code that has its own running loop.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import hashlib
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from datetime import datetime, timedelta
from itertools import islice
from typing import Any, TypeVar

from duetime import _json
from duetime._clock import Clock, SystemClock
from duetime._config import Settings
from duetime._observe import ClusterStats, Incident, Timeline
from duetime._types import (
    ApiKey,
    ApiRole,
    Attempt,
    DeliveryMode,
    Job,
    JobStatus,
    Leadership,
    MisfirePolicy,
    NodeInfo,
    Occurrence,
    OverlapPolicy,
    Page,
    RetryPolicy,
    Run,
    RunState,
    Schedule,
    ScheduleKind,
    TenantLimits,
    TenantQueueStats,
)
from duetime.errors import NotFound, ValidationError
from duetime.explain import Explanation, explain
from duetime.leadership import Elector, NodePresence, new_node_id
from duetime.maintenance import LeaseReaper, MaintenanceManager
from duetime.registration import (
    BulkValidator,
    JobSpec,
    build_upsert,
    check_priority,
    request_hash,
)
from duetime.scheduler.materializer import Materializer
from duetime.schedules import first_fire, next_fire_after, preview, validate_schedule
from duetime.store import create_store, is_postgres_url
from duetime.store._rows import EPOCH
from duetime.store.base import (
    ApiKeyCreateParams,
    ApiKeyListParams,
    ApiKeyRevokeParams,
    ApiKeyTouchParams,
    BulkJob,
    IncidentListParams,
    JobListParams,
    JobRef,
    JobSetStatusParams,
    JobsInsertManyParams,
    PlannedSkip,
    RunCancelParams,
    RunListParams,
    RunReplayParams,
    RunTriggerParams,
    StatsParams,
    Store,
    TenantLimitsSetParams,
    TimelineParams,
)
from duetime.targets.python import BUILTIN_NAMES, TaskFunc, TaskRegistry
from duetime.worker.completer import CompletionListener
from duetime.worker.remote import RemoteWorkers
from duetime.worker.worker import StartListener, Worker

log = logging.getLogger("duetime")
T = TypeVar("T")
F = TypeVar("F", bound=TaskFunc)
E = TypeVar("E", bound=enum.Enum)


def _ref(tenant: str, job: str | uuid.UUID) -> JobRef:
    if isinstance(job, uuid.UUID):
        return JobRef(tenant=tenant, id=job)
    try:
        return JobRef(tenant=tenant, id=uuid.UUID(job))
    except ValueError:
        return JobRef(tenant=tenant, name=job)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise ValidationError("limit", f"must be a whole number from 1 to 1000, got {limit!r}")


def _enum_value(kind: type[E], value: object, field: str) -> E:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(v) for v in kind)  # type: ignore[attr-defined]
        raise ValidationError(field, f"{value!r} is not one of: {allowed}") from None


BULK_FIRST_BATCH = 1000
"""The first batch of :meth:`AsyncApp.schedule_many`; each next one is twice as large, up to
``batch_size``, so the database is writing while most of a small call is validated."""
BULK_CHUNK = 100
"""Specs :meth:`AsyncApp.schedule_many` validates between turns of the event loop; short turns
keep the COPY of the batch being written streaming to the database meanwhile."""

_SPEC_FIELDS = frozenset(f.name for f in dataclass_fields(JobSpec))


def _spec_from_mapping(item: Mapping[str, Any]) -> JobSpec:
    if not isinstance(item, Mapping):
        raise ValidationError("spec", "must be a JobSpec or a mapping of its fields")
    unknown = sorted(set(item) - _SPEC_FIELDS)
    if unknown:
        raise ValidationError(unknown[0], "is not a job field")
    if "name" not in item:
        raise ValidationError("name", "is required")
    values = dict(item)
    if "tags" in values and values["tags"] is not None:
        values["tags"] = tuple(values["tags"])
    return JobSpec(**values)


def _run_id(run: str | uuid.UUID) -> uuid.UUID:
    if isinstance(run, uuid.UUID):
        return run
    try:
        return uuid.UUID(run)
    except ValueError:
        raise NotFound(f"run {run!r} not found (not a run id)") from None


API_KEY_PREFIX = "dt_"


def hash_api_key(secret: str) -> str:
    """What the store keeps of an API key: the SHA-256 hex digest of its secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


class AsyncApp:
    """duetime for async code. Use ``async with AsyncApp(url) as app:`` or ``await app.open()``.

    ``url``: a SQLite path (default ``duetime.db``) or a ``postgresql://`` URL; defaults to
    ``DUETIME_DATABASE_URL``. ``tenant`` scopes every job operation.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        tenant: str = "default",
        settings: Settings | None = None,
        clock: Clock | None = None,
        registry: TaskRegistry | None = None,
        migrate: bool | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env(database_url=url)
        if url is not None and settings is not None:
            self.settings = self.settings.with_(database_url=url)
        if not tenant or len(tenant) > 100:
            raise ValidationError("tenant", "must be 1-100 characters")
        self.tenant = tenant
        self.clock = clock or SystemClock()
        self.registry = registry or TaskRegistry()
        self._store: Store | None = None
        self._migrate = migrate
        self._view = False

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("app is not open: use `async with app` or `await app.open()`")
        return self._store

    async def open(self) -> AsyncApp:
        """Connect; on SQLite (or with ``migrate=True``) bring the schema up to date first."""
        if self._store is not None:
            return self
        url = self.settings.database_url
        deadline = time.monotonic() + self.settings.startup_wait
        delay = 0.25
        while True:
            store = create_store(url, clock=None if is_postgres_url(url) else self.clock)
            try:
                await store.open()
                migrate = self._migrate if self._migrate is not None else not is_postgres_url(url)
                if migrate:
                    await store.migrate()
                else:
                    await store.check_schema()
                break
            except store.transient_errors as exc:
                await store.close()
                if time.monotonic() + delay > deadline:
                    raise
                log.warning("database unreachable (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except BaseException:
                await store.close()
                raise
        self._store = store
        return self

    async def close(self) -> None:
        if self._view:
            return
        if self._store is not None:
            await self._store.close()
            self._store = None

    async def __aenter__(self) -> AsyncApp:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def for_tenant(self, tenant: str) -> AsyncApp:
        """This app acting on ``tenant``: the same open store, registry, settings and clock.
        Cheap (the REST API makes one per request); closing it closes nothing."""
        view = AsyncApp(
            tenant=tenant,
            settings=self.settings,
            clock=self.clock,
            registry=self.registry,
            migrate=self._migrate,
        )
        view._store = self.store
        view._view = True
        return view

    # --- tasks ----------------------------------------------------------------------------

    def task(self, name: str) -> Callable[[F], F]:
        """Register a function (async or sync) as the task ``name``::

        @app.task("billing.settle")
        async def settle(ctx, payload): ...
        """

        def register(func: F) -> F:
            self.registry.register(name, func)
            return func

        return register

    # --- jobs -----------------------------------------------------------------------------

    async def schedule(
        self,
        name: str,
        *,
        task: str | None = None,
        target: dict[str, Any] | None = None,
        cron: str | None = None,
        at: datetime | timedelta | None = None,
        every: timedelta | float | None = None,
        now: bool = False,
        tz: str = "UTC",
        anchor: datetime | None = None,
        payload: Any = None,
        retry: RetryPolicy | None = None,
        priority: int = 0,
        timeout: float | None = None,
        misfire: MisfirePolicy | str = MisfirePolicy.FIRE_ONCE,
        misfire_grace: float | None = None,
        overlap: OverlapPolicy | str = OverlapPolicy.SKIP,
        delivery: DeliveryMode | str = DeliveryMode.AT_LEAST_ONCE,
        queue: str = "default",
        tags: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        max_concurrency: int | None = None,
        concurrency_key: str | None = None,
        max_backfill: int = 100,
        sla: float | timedelta | None = None,
        expected_duration: float | timedelta | None = None,
        jitter: float | timedelta = 0.0,
        allow_unregistered: bool = False,
        create_only: bool = False,
    ) -> Job:
        """Create the job ``name`` of this tenant, or update it if it exists.

        Either ``task`` (a registered function's name) or ``target`` (``{"type": "http", "url":
        …, "method": "POST", "headers": {…}, "timeout": 30}``: each run is sent to that URL as
        a signed webhook, see docs/webhooks.md). Exactly one of ``cron`` (with ``tz``), ``at``
        (a datetime with offset, or a delay), ``every`` (interval, from ``anchor``, default
        now) or ``now=True``. Updating with an unchanged schedule keeps its next fire instant;
        a changed schedule takes effect from its next occurrence (runs not yet started are
        skipped). ``sla``: seconds after each scheduled instant within which a run must
        succeed, else the leader raises an alert; ``expected_duration``: how long a run normally
        takes (stuck-run alerts; default: learnt from the job's history). ``priority``: -1000
        to 1000, higher first, with aging; ``queue``: the worker pool that runs it; ``jitter``:
        seconds each run may become available after its instant, stable per occurrence
        (docs/fairness.md). Raises ValidationError.
        """
        spec = JobSpec(
            name=name,
            task=task,
            target=target,
            cron=cron,
            at=at,
            every=every,
            now=now,
            tz=tz,
            anchor=anchor,
            payload=payload,
            retry=retry,
            priority=priority,
            timeout=timeout,
            misfire=misfire,
            misfire_grace=misfire_grace,
            overlap=overlap,
            delivery=delivery,
            queue=queue,
            tags=tuple(tags),
            metadata=dict(metadata or {}),
            max_concurrency=max_concurrency,
            concurrency_key=concurrency_key,
            max_backfill=max_backfill,
            sla=sla,
            expected_duration=expected_duration,
            jitter=jitter,
        )
        return await self.schedule_spec(
            spec, allow_unregistered=allow_unregistered, create_only=create_only
        )

    async def schedule_spec(
        self, spec: JobSpec, *, allow_unregistered: bool = False, create_only: bool = False
    ) -> Job:
        params = build_upsert(
            spec,
            tenant=self.tenant,
            settings=self.settings,
            now=self.clock.now(),
            create_only=create_only,
        )
        if params.delivery is DeliveryMode.EXACTLY_ONCE and self.store.dialect == "sqlite":
            raise ValidationError(
                "delivery",
                "exactly_once needs PostgreSQL; SQLite cannot "
                "commit a handler's writes with the run's completion",
            )
        await self._check_task(params.task, allow_unregistered)
        job, _ = await self.store.job_upsert(params)
        return job

    async def _check_task(self, task: str, allow_unregistered: bool) -> None:
        if not isinstance(task, str) or not task:
            raise ValidationError("task", "must name a task, e.g. 'billing.settle'")
        if allow_unregistered or task in BUILTIN_NAMES or task in self.registry:
            return
        if task not in await self.store.tasks_known([task]):
            raise ValidationError(
                "task",
                f"unknown task {task!r}: no worker has registered it (start a worker "
                "that serves it first, or pass allow_unregistered=True)",
            )

    async def schedule_many(
        self,
        specs: Iterable[JobSpec | Mapping[str, Any]],
        *,
        allow_unregistered: bool = False,
        batch_size: int = 10_000,
    ) -> int:
        """Create many jobs at once (bulk registration); return how many were created.

        Each spec is a :class:`~duetime.registration.JobSpec` or a mapping of its fields
        (``{"name": …, "task": …, "cron": …}``), validated like :meth:`schedule`. A name that
        exists already is left as it is: bulk registration only creates (use :meth:`schedule`
        to change a job). Specs are written in transactions of up to ``batch_size`` (the first
        of 1,000, each next one twice as large) while the next batch is validated. An invalid
        spec raises ValidationError naming it (``specs[3].cron``);
        nothing of its batch is written, earlier batches are."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError("batch_size", f"must be a whole number >= 1, got {batch_size!r}")
        validator = BulkValidator(tenant=self.tenant, settings=self.settings, now=self.clock.now())
        checked: set[str] = set()
        batch: list[BulkJob] = []
        created = finished = 0  # jobs created by, and jobs sent in, the writes that finished
        writing: asyncio.Future[int] | None = None
        written = 0  # jobs in the batch being written
        limit = min(batch_size, BULK_FIRST_BATCH)  # doubles per batch: writing starts early
        items = enumerate(specs)
        try:
            while chunk := self._bulk_chunk(items, validator, min(BULK_CHUNK, limit - len(batch))):
                for index, job in chunk:
                    task = job.shape.task
                    if task not in checked:
                        try:
                            await self._check_task(task, allow_unregistered)
                        except ValidationError as exc:
                            field = f"specs[{index}].{exc.field}"
                            raise ValidationError(field, exc.reason) from None
                        checked.add(task)
                    batch.append(job)
                if len(batch) >= limit:
                    if writing is not None:
                        created, finished = created + await writing, finished + written
                    # straight into jobs while every name so far was new
                    params = JobsInsertManyParams(batch, expect_new=created == finished)
                    writing = asyncio.ensure_future(self.store.jobs_insert_many(params))
                    written, batch = len(batch), []
                    limit = min(batch_size, limit * 2)
                await asyncio.sleep(0)  # let the batch being written stream meanwhile
        finally:
            if writing is not None:
                created, finished = created + await writing, finished + written
        if batch:
            params = JobsInsertManyParams(batch, expect_new=created == finished)
            created += await self.store.jobs_insert_many(params)
        return created

    def _bulk_chunk(
        self,
        items: Iterator[tuple[int, JobSpec | Mapping[str, Any]]],
        validator: BulkValidator,
        size: int,
    ) -> list[tuple[int, BulkJob]]:
        """Validate up to ``size`` specs. The cyclic garbage collector is paused meanwhile: the
        rows are acyclic, and its scans of a batch held in memory cost ~40% of validation."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            return [(i, self._bulk_job(i, item, validator)) for i, item in islice(items, size)]
        finally:
            if enabled:
                gc.enable()

    def _bulk_job(
        self, index: int, item: JobSpec | Mapping[str, Any], validator: BulkValidator
    ) -> BulkJob:
        try:
            job = validator.job(item if isinstance(item, JobSpec) else _spec_from_mapping(item))
            if job.shape.delivery is DeliveryMode.EXACTLY_ONCE and self.store.dialect == "sqlite":
                raise ValidationError("delivery", "exactly_once needs PostgreSQL")
        except ValidationError as exc:
            raise ValidationError(f"specs[{index}].{exc.field}", exc.reason) from None
        return job

    async def get(self, job: str | uuid.UUID) -> Job:
        return await self.store.job_get(_ref(self.tenant, job))

    async def list(
        self,
        *,
        status: JobStatus | str | None = None,
        name_prefix: str | None = None,
        tag: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Job]:
        _check_limit(limit)
        return await self.store.job_list(
            JobListParams(
                tenant=self.tenant,
                status=None if status is None else _enum_value(JobStatus, status, "status"),
                name_prefix=name_prefix,
                tag=tag,
                limit=limit,
                after_name=cursor,
            )
        )

    async def pause(self, job: str | uuid.UUID) -> Job:
        return await self._set_status(job, JobStatus.PAUSED)

    async def resume(self, job: str | uuid.UUID) -> Job:
        return await self._set_status(job, JobStatus.ACTIVE)

    async def cancel(self, job: str | uuid.UUID) -> Job:
        return await self._set_status(job, JobStatus.CANCELLED)

    async def _set_status(self, job: str | uuid.UUID, status: JobStatus) -> Job:
        ref = _ref(self.tenant, job)
        next_fire_at = None
        if status is JobStatus.ACTIVE:
            current = await self.store.job_get(ref)
            next_fire_at = self._resume_instant(current.schedule, current.next_fire_at)
        return await self.store.job_set_status(
            JobSetStatusParams(job=ref, status=status, next_fire_at=next_fire_at)
        )

    def _resume_instant(self, schedule: Schedule, pending: datetime | None) -> datetime | None:
        """Where a resumed job picks up: its next occurrence after now (paused ones were
        skipped, not missed); a one-shot keeps its instant if it never ran."""
        now = self.clock.now()
        if schedule.one_shot:
            return pending
        if schedule.kind is ScheduleKind.EVERY:
            return next_fire_after(schedule, now)
        return first_fire(schedule, now)

    async def delete(self, job: str | uuid.UUID) -> None:
        await self.store.job_delete(_ref(self.tenant, job))

    # --- runs -----------------------------------------------------------------------------

    async def trigger(
        self,
        job: str | uuid.UUID,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        priority: int | None = None,
    ) -> Run:
        """Run the job now. With ``idempotency_key`` the same key never makes two runs (a repeat
        returns the first; the same key with another payload raises Conflict)."""
        run, _ = await self.trigger_run(
            job, idempotency_key=idempotency_key, payload=payload, priority=priority
        )
        return run

    async def trigger_run(
        self,
        job: str | uuid.UUID,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        priority: int | None = None,
    ) -> tuple[Run, bool]:
        """:meth:`trigger`, also saying whether this call created the run (False: an earlier
        call with the same idempotency key did, and this is its run)."""
        encoded = None
        if payload is not None:
            encoded = _json.encode_payload(payload, limit=self.settings.payload_limit)
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
            raise ValidationError("idempotency_key", "must be 1-200 characters")
        if priority is not None:
            check_priority(priority)
        return await self.store.run_trigger(
            RunTriggerParams(
                job=_ref(self.tenant, job),
                payload=encoded,
                priority=priority,
                idempotency_key=idempotency_key,
                request_hash=request_hash(payload, priority),
            )
        )

    async def runs(
        self,
        job: str | uuid.UUID | None = None,
        *,
        state: RunState | str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Run]:
        """Runs, newest scheduled instant first."""
        _check_limit(limit)
        job_id = None if job is None else (await self.get(job)).id
        before = None
        if cursor:
            try:
                micros, run_id = cursor.split(".", 1)
                before = (EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(run_id))
            except ValueError:
                raise ValidationError("cursor", "is not a cursor this API returned") from None
        return await self.store.runs_list(
            RunListParams(
                tenant=self.tenant,
                job_id=job_id,
                state=None if state is None else _enum_value(RunState, state, "state"),
                limit=limit,
                before=before,
            )
        )

    async def run(self, run_id: str | uuid.UUID) -> Run:
        return await self.store.run_get(self.tenant, _run_id(run_id))

    async def attempts(self, run_id: str | uuid.UUID) -> list[Attempt]:
        return await self.store.attempts_list(self.tenant, _run_id(run_id))

    async def skips(self, job: str | uuid.UUID) -> list[PlannedSkip]:
        return await self.store.skips_list(self.tenant, (await self.get(job)).id)

    async def dead_letters(self, *, limit: int = 100, cursor: str | None = None) -> Page[Run]:
        return await self.runs(state=RunState.DEAD, limit=limit, cursor=cursor)

    async def replay(
        self,
        runs: Sequence[str | uuid.UUID] | None = None,
        *,
        job: str | uuid.UUID | None = None,
        limit: int = 1000,
    ) -> list[uuid.UUID]:
        """Put dead runs back in the queue with a fresh attempt budget: the given ``runs``, or
        every dead run (of ``job``, if given), up to ``limit``. Returns the replayed ids."""
        job_id = None if job is None else (await self.get(job)).id
        return await self.store.runs_replay(
            RunReplayParams(
                tenant=self.tenant,
                run_ids=None if runs is None else [_run_id(r) for r in runs],
                job_id=job_id,
                limit=limit,
            )
        )

    async def cancel_run(self, run_id: str | uuid.UUID) -> Run:
        return await self.store.run_cancel(RunCancelParams(self.tenant, _run_id(run_id)))

    async def webhook_secret(self) -> str:
        """This tenant's webhook signing secret (created on first use): receivers of HTTP
        targets verify ``Duetime-Signature`` with it (docs/webhooks.md)."""
        return await self.store.tenant_secret(self.tenant)

    # --- tenants: fairness limits and queue stats (docs/fairness.md) ----------------------

    async def tenant_limits_set(
        self,
        tenant: str | None = None,
        *,
        max_in_flight: int | None = None,
        max_starts_per_second: float | None = None,
        weight: int | None = None,
    ) -> TenantLimits:
        """Set a tenant's (default: this one's) limits, enforced by every claim of every
        worker: runs in flight at once, run starts per second (0 removes either limit), and
        its weight in each claim's share. Arguments left None are kept. Returns them all."""
        chosen = self._tenant_id(tenant)
        if max_in_flight is not None and (
            isinstance(max_in_flight, bool)
            or not isinstance(max_in_flight, int)
            or not 0 <= max_in_flight <= 1_000_000
        ):
            raise ValidationError(
                "max_in_flight", "must be a whole number from 0 (no limit) to 1000000"
            )
        if max_starts_per_second is not None and (
            isinstance(max_starts_per_second, bool)
            or not isinstance(max_starts_per_second, int | float)
            or not 0 <= max_starts_per_second <= 1_000_000
        ):
            raise ValidationError(
                "max_starts_per_second", "must be a number from 0 (no limit) to 1000000"
            )
        if weight is not None and (
            isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1000
        ):
            raise ValidationError("weight", "must be a whole number from 1 to 1000")
        return await self.store.tenant_limits_set(
            TenantLimitsSetParams(
                tenant=chosen,
                max_in_flight=max_in_flight,
                max_starts_per_second=(
                    None if max_starts_per_second is None else float(max_starts_per_second)
                ),
                weight=weight,
            )
        )

    async def tenant_limits_get(self, tenant: str | None = None) -> TenantLimits:
        """A tenant's (default: this one's) limits; no limits and weight 1 if never set."""
        return await self.store.tenant_limits_get(self._tenant_id(tenant))

    async def tenant_limits_list(self) -> list[TenantLimits]:
        """The limits of every tenant known to the store (by id)."""
        return await self.store.tenant_limits_list()

    async def tenant_stats(self) -> list[TenantQueueStats]:
        """Every tenant's queues: due depth, oldest due age, in flight, throttled (a snapshot
        of the whole cluster, by tenant then queue)."""
        return await self.store.tenant_stats()

    def _tenant_id(self, tenant: str | None) -> str:
        chosen = self.tenant if tenant is None else tenant
        if not isinstance(chosen, str) or not 1 <= len(chosen) <= 100 or not chosen.isprintable():
            raise ValidationError("tenant", "must be 1-100 printable characters")
        return chosen

    # --- api keys -------------------------------------------------------------------------

    async def create_key(self, role: ApiRole | str, *, name: str = "") -> tuple[ApiKey, str]:
        """A new API key of this tenant. Returns the key and its secret (``dt_…``): the secret
        is shown this once; the store keeps only its SHA-256 hash."""
        chosen = _enum_value(ApiRole, role, "role")
        if not isinstance(name, str) or len(name) > 200 or not name.isprintable():
            raise ValidationError("name", "must be at most 200 printable characters")
        secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
        key = await self.store.api_key_create(
            ApiKeyCreateParams(
                tenant=self.tenant,
                role=chosen,
                name=name,
                prefix=secret[:10],
                key_hash=hash_api_key(secret),
            )
        )
        return key, secret

    async def keys(self, *, all_tenants: bool = False) -> list[ApiKey]:
        """This tenant's API keys (or every tenant's), revoked ones included, oldest first."""
        return await self.store.api_keys_list(
            ApiKeyListParams(tenant=None if all_tenants else self.tenant)
        )

    async def revoke_key(self, key_id: str | uuid.UUID, *, any_tenant: bool = False) -> ApiKey:
        """Revoke a key of this tenant (of any tenant with ``any_tenant``). NotFound."""
        try:
            found = key_id if isinstance(key_id, uuid.UUID) else uuid.UUID(key_id)
        except ValueError:
            raise NotFound(f"API key {key_id!r} not found (not a key id)") from None
        return await self.store.api_key_revoke(
            ApiKeyRevokeParams(id=found, tenant=None if any_tenant else self.tenant)
        )

    async def authenticate(self, secret: str) -> ApiKey | None:
        """The unrevoked key with this secret, or None. Records its use (at most one write per
        key per minute)."""
        if not secret.startswith(API_KEY_PREFIX) or len(secret) > 200:
            return None
        key = await self.store.api_key_get_by_hash(hash_api_key(secret))
        recent = timedelta(seconds=60)
        if key is not None and (
            key.last_used_at is None or self.clock.now() - key.last_used_at > recent
        ):
            await self.store.api_key_touch(ApiKeyTouchParams(id=key.id))
        return key

    # --- schedules ------------------------------------------------------------------------

    def preview(
        self, cron: str, *, tz: str = "UTC", after: datetime | None = None, count: int = 10
    ) -> list[Occurrence]:
        """The next ``count`` fire instants of a cron expression strictly after ``after``.
        Raises ValidationError for a bad expression or zone, or one that never fires."""
        schedule = Schedule(ScheduleKind.CRON, cron=cron, tz=tz)
        start = after or self.clock.now()
        validate_schedule(schedule, start)
        return preview(schedule, start, count)

    async def preview_job(
        self, job: str | uuid.UUID, *, after: datetime | None = None, count: int = 10
    ) -> list[Occurrence]:
        """The next ``count`` fire instants of a job's schedule strictly after ``after``
        (default now), whatever its status: its ``H`` values are the job's own."""
        current = await self.get(job)
        return preview(current.schedule, after or self.clock.now(), count)

    async def next_fires(self, job: str | uuid.UUID, count: int = 5) -> list[Occurrence]:
        """The job's next ``count`` fire instants, from its ``next_fire_at`` on."""
        current = await self.get(job)
        if current.next_fire_at is None or current.status is not JobStatus.ACTIVE:
            return []
        return preview(current.schedule, current.next_fire_at - timedelta(microseconds=1), count)

    # --- running the loops ----------------------------------------------------------------

    def worker(
        self,
        *,
        tasks: Sequence[str] | None = None,
        on_start: StartListener | None = None,
        on_complete: CompletionListener | None = None,
        queues: Sequence[str] | None = None,
    ) -> Worker:
        """A worker of the registered tasks (or ``tasks``), claiming runs of ``queues`` only
        (a worker pool; default every queue)."""
        return Worker(
            self.store,
            self.registry,
            self.settings,
            tasks=tasks,
            clock=self.clock,
            on_start=on_start,
            on_complete=on_complete,
            queues=queues,
        )

    def materializer(self, partitions: tuple[int, int] | None = None) -> Materializer:
        return Materializer(self.store, self.settings, partitions=partitions)

    def reaper(self) -> LeaseReaper:
        return LeaseReaper(self.store, self.settings)

    def remote_workers(self) -> RemoteWorkers:
        """The remote-worker protocol (claim, heartbeat, complete over HTTP), for this tenant."""
        return RemoteWorkers(self.store, self.settings, self.tenant)

    def node_loops(
        self,
        stop: asyncio.Event,
        *,
        roles: Sequence[str],
        partitions: tuple[int, int] | None = None,
    ) -> list[Coroutine[Any, Any, None]]:
        """The loops of one duetime process with these ``roles``: node presence always; with
        ``scheduler``, also leader election, the leader-only maintenance duties and the
        materializer (for ``partitions``, default all). The worker loop is :meth:`worker`."""
        node_id = new_node_id()
        span = None if partitions is None else f"{partitions[0]}-{partitions[1]}"
        loops = [
            NodePresence(
                self.store,
                node_id,
                roles,
                interval=self.settings.heartbeat_interval,
                partitions=span,
            ).run(stop)
        ]
        if "scheduler" in roles:
            elector = Elector(self.store, node_id, ttl=self.settings.leader_ttl)
            maintenance = MaintenanceManager(self.store, self.settings, lambda: elector.fence)
            loops += [
                elector.run(stop),
                maintenance.run(stop),
                self.materializer(partitions).run(stop),
            ]
        return loops

    async def run_scheduler(
        self, stop: asyncio.Event, partitions: tuple[int, int] | None = None
    ) -> None:
        """The scheduler role until ``stop``: materializer, election, leader-only duties."""
        await _supervise(stop, *self.node_loops(stop, roles=("scheduler",), partitions=partitions))

    async def nodes(self) -> tuple[list[NodeInfo], Leadership | None]:
        """Live nodes (as last heartbeated) and the current leadership."""
        return await self.store.nodes_list(), await self.store.leader_get()

    # --- observability --------------------------------------------------------------------

    async def cluster_stats(self) -> ClusterStats:
        """The whole cluster's queues now (every tenant): due, running and dead runs, expired
        leases, overdue jobs, live workers and nodes, the leader, and per tenant and queue
        the due, in-flight and throttled runs. Metrics gauges read this."""
        now = await self.store.db_now()
        live_after = now - timedelta(seconds=self.settings.worker_stale_after)
        stats = await self.store.stats_snapshot(StatsParams(live_after=live_after, now=now))
        return replace(stats, queues=await self.store.tenant_stats(now))

    async def timeline(self, *, window: float = 3600.0, step: float = 60.0) -> Timeline:
        """This tenant's activity over the last ``window`` seconds in buckets of ``step``:
        runs succeeded and dead, attempts failed and lost, fire-lag histograms."""
        if not 60 <= window <= 7 * 86400:
            raise ValidationError("window", "must be from 60 seconds to 7 days")
        if not 1 <= step <= window or window / step > 1000:
            raise ValidationError("step", "must be at least 1 s and window/step at most 1000")
        now = await self.store.db_now()
        buckets = int(-(-window // step))
        end = EPOCH + timedelta(
            seconds=(((now - EPOCH).total_seconds() // step) + 1) * step
        )  # the bucket holding now ends the timeline
        since = end - timedelta(seconds=buckets * step)
        return await self.store.stats_timeline(
            TimelineParams(tenant=self.tenant, since=since, step=step, buckets=buckets)
        )

    async def incidents(
        self, *, firing: bool | None = None, limit: int = 100, all_tenants: bool = False
    ) -> list[Incident]:
        """Alert incidents of this tenant and cluster-wide ones (every tenant's with
        ``all_tenants``), newest first; ``firing`` True: open ones, False: resolved ones."""
        _check_limit(limit)
        tenants = None if all_tenants else (self.tenant, None)
        return await self.store.incidents_list(
            IncidentListParams(firing=firing, tenants=tenants, limit=limit)
        )

    async def explain(self, job: str | uuid.UUID, *, last: int = 10, count: int = 5) -> Explanation:
        """Why ``job`` did or did not fire: its ``last`` occurrences, each with what happened
        and why, and its next ``count`` fire instants (local and UTC, with DST notes)."""
        _check_limit(last)
        _check_limit(count)
        current = await self.get(job)
        now = await self.store.db_now()
        page = await self.runs(current.id, limit=last)
        attempts = {
            r.id: await self.attempts(r.id)
            for r in page.items
            if r.attempt > 1 or r.state in (RunState.DEAD, RunState.SCHEDULED)
        }
        skips = sorted(await self.store.skips_list(self.tenant, current.id), key=lambda k: k.first)[
            -last:
        ]
        live_after = now - timedelta(seconds=self.settings.worker_stale_after)
        served = {
            task
            for worker in await self.store.workers_list()
            if worker.heartbeat_at > live_after
            for task in worker.tasks
        }
        if current.status is JobStatus.ACTIVE:
            nexts = await self.next_fires(current.id, count)
        elif current.status is JobStatus.PAUSED and not current.schedule.one_shot:
            nexts = preview(current.schedule, now, count)
        else:
            nexts = []
        return explain(
            current,
            now=now,
            runs=page.items,
            attempts=attempts,
            skips=[(k.first, k.last, k.count, k.reason) for k in skips],
            next_fires=nexts,
            served_tasks=served,
            limit=last,
        )


async def _supervise(stop: asyncio.Event, *loops: Coroutine[Any, Any, None]) -> None:
    """Run loops together; if one fails, stop the others and re-raise."""
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                stop.set()
                raise task.exception()  # type: ignore[misc]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


class _Portal:
    """An event loop on a daemon thread; ``call`` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="duetime-app", daemon=True
        )
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


class App:
    """duetime for synchronous code: the same operations as :class:`AsyncApp`, blocking.

    The store is opened on first use; call :meth:`close` (or use ``with App(...)``) when done.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        tenant: str = "default",
        settings: Settings | None = None,
        clock: Clock | None = None,
        migrate: bool | None = None,
    ) -> None:
        self.aio = AsyncApp(url, tenant=tenant, settings=settings, clock=clock, migrate=migrate)
        self._portal: _Portal | None = None
        self._lock = threading.Lock()

    @property
    def registry(self) -> TaskRegistry:
        return self.aio.registry

    @property
    def settings(self) -> Settings:
        return self.aio.settings

    def task(self, name: str) -> Callable[[F], F]:
        return self.aio.task(name)

    def _call(self, coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        with self._lock:
            if self._portal is None:
                self._portal = _Portal()
                try:
                    self._portal.call(self.aio.open())
                except BaseException:
                    self._portal.stop()
                    self._portal = None
                    raise
        return self._portal.call(coro_fn())

    def close(self) -> None:
        with self._lock:
            if self._portal is not None:
                self._portal.call(self.aio.close())
                self._portal.stop()
                self._portal = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schedule(self, name: str, **kwargs: Any) -> Job:
        """See :meth:`AsyncApp.schedule`."""
        return self._call(lambda: self.aio.schedule(name, **kwargs))

    def schedule_many(self, specs: Iterable[JobSpec | Mapping[str, Any]], **kwargs: Any) -> int:
        """See :meth:`AsyncApp.schedule_many`."""
        return self._call(lambda: self.aio.schedule_many(specs, **kwargs))

    def get(self, job: str | uuid.UUID) -> Job:
        return self._call(lambda: self.aio.get(job))

    def list(self, **kwargs: Any) -> Page[Job]:
        return self._call(lambda: self.aio.list(**kwargs))

    def pause(self, job: str | uuid.UUID) -> Job:
        return self._call(lambda: self.aio.pause(job))

    def resume(self, job: str | uuid.UUID) -> Job:
        return self._call(lambda: self.aio.resume(job))

    def cancel(self, job: str | uuid.UUID) -> Job:
        return self._call(lambda: self.aio.cancel(job))

    def delete(self, job: str | uuid.UUID) -> None:
        self._call(lambda: self.aio.delete(job))

    def trigger(self, job: str | uuid.UUID, **kwargs: Any) -> Run:
        return self._call(lambda: self.aio.trigger(job, **kwargs))

    def runs(self, job: str | uuid.UUID | None = None, **kwargs: Any) -> Page[Run]:
        return self._call(lambda: self.aio.runs(job, **kwargs))

    def run(self, run_id: str | uuid.UUID) -> Run:
        return self._call(lambda: self.aio.run(run_id))

    def attempts(self, run_id: str | uuid.UUID) -> list[Attempt]:
        return self._call(lambda: self.aio.attempts(run_id))

    def skips(self, job: str | uuid.UUID) -> list[PlannedSkip]:
        return self._call(lambda: self.aio.skips(job))

    def dead_letters(self, **kwargs: Any) -> Page[Run]:
        return self._call(lambda: self.aio.dead_letters(**kwargs))

    def replay(
        self, runs: Sequence[str | uuid.UUID] | None = None, **kwargs: Any
    ) -> list[uuid.UUID]:
        return self._call(lambda: self.aio.replay(runs, **kwargs))

    def cancel_run(self, run_id: str | uuid.UUID) -> Run:
        return self._call(lambda: self.aio.cancel_run(run_id))

    def webhook_secret(self) -> str:
        return self._call(self.aio.webhook_secret)

    def tenant_limits_set(self, tenant: str | None = None, **kwargs: Any) -> TenantLimits:
        """See :meth:`AsyncApp.tenant_limits_set`."""
        return self._call(lambda: self.aio.tenant_limits_set(tenant, **kwargs))

    def tenant_limits_get(self, tenant: str | None = None) -> TenantLimits:
        return self._call(lambda: self.aio.tenant_limits_get(tenant))

    def tenant_stats(self) -> list[TenantQueueStats]:
        return self._call(self.aio.tenant_stats)

    def preview(self, cron: str, **kwargs: Any) -> list[Occurrence]:
        return self.aio.preview(cron, **kwargs)

    def explain(self, job: str | uuid.UUID, **kwargs: Any) -> Explanation:
        """See :meth:`AsyncApp.explain`."""
        return self._call(lambda: self.aio.explain(job, **kwargs))

    def cluster_stats(self) -> ClusterStats:
        return self._call(self.aio.cluster_stats)

    def incidents(self, **kwargs: Any) -> list[Incident]:
        return self._call(lambda: self.aio.incidents(**kwargs))
