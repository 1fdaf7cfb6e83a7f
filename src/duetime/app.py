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
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import fields as dataclass_fields
from datetime import datetime, timedelta
from typing import Any, TypeVar

from duetime import _json
from duetime._clock import Clock, SystemClock
from duetime._config import Settings
from duetime._types import (
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
)
from duetime.errors import NotFound, ValidationError
from duetime.leadership import Elector, NodePresence, new_node_id
from duetime.maintenance import LeaseReaper, MaintenanceManager
from duetime.registration import JobSpec, build_upsert, request_hash
from duetime.scheduler.materializer import Materializer
from duetime.schedules import first_fire, next_fire_after, preview, validate_schedule
from duetime.store import create_store, is_postgres_url
from duetime.store._rows import EPOCH
from duetime.store.base import (
    JobListParams,
    JobRef,
    JobSetStatusParams,
    JobsInsertManyParams,
    JobUpsertParams,
    PlannedSkip,
    RunCancelParams,
    RunListParams,
    RunReplayParams,
    RunTriggerParams,
    Store,
)
from duetime.targets.python import BUILTIN_NAMES, TaskFunc, TaskRegistry
from duetime.worker.completer import CompletionListener
from duetime.worker.worker import StartListener, Worker

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
        store = create_store(url, clock=None if is_postgres_url(url) else self.clock)
        await store.open()
        try:
            migrate = self._migrate if self._migrate is not None else not is_postgres_url(url)
            if migrate:
                await store.migrate()
            else:
                await store.check_schema()
        except BaseException:
            await store.close()
            raise
        self._store = store
        return self

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None

    async def __aenter__(self) -> AsyncApp:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
        allow_unregistered: bool = False,
        create_only: bool = False,
    ) -> Job:
        """Create the job ``name`` of this tenant, or update it if it exists.

        Either ``task`` (a registered function's name) or ``target`` (``{"type": "http", "url":
        …, "method": "POST", "headers": {…}, "timeout": 30}``: each run is sent to that URL as
        a signed webhook, see docs/webhooks.md). Exactly one of ``cron`` (with ``tz``), ``at`` (a datetime with offset, or a delay),
        ``every`` (interval, from ``anchor``, default now) or ``now=True``. Updating with an
        unchanged schedule keeps its next fire instant; a changed schedule takes effect from
        its next occurrence (runs not yet started are skipped). Raises ValidationError.
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
        to change a job). Specs are written in transactions of ``batch_size`` while the next
        batch is validated. An invalid spec raises ValidationError naming it (``specs[3].cron``);
        nothing of its batch is written, earlier batches are."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError("batch_size", f"must be a whole number >= 1, got {batch_size!r}")
        now = self.clock.now()
        checked: set[str] = set()
        batch: list[JobUpsertParams] = []
        created = 0
        writing: asyncio.Future[int] | None = None
        try:
            for index, item in enumerate(specs):
                params = self._bulk_params(index, item, now)
                if params.task is not None and params.task not in checked:
                    try:
                        await self._check_task(params.task, allow_unregistered)
                    except ValidationError as exc:
                        raise ValidationError(f"specs[{index}].{exc.field}", exc.reason) from None
                    checked.add(params.task)
                batch.append(params)
                if len(batch) >= batch_size:
                    if writing is not None:
                        created += await writing
                    writing = asyncio.ensure_future(
                        self.store.jobs_insert_many(JobsInsertManyParams(batch))
                    )
                    batch = []
                elif index % 1000 == 999:
                    await asyncio.sleep(0)  # let the batch being written stream meanwhile
        finally:
            if writing is not None:
                created += await writing
        if batch:
            created += await self.store.jobs_insert_many(JobsInsertManyParams(batch))
        return created

    def _bulk_params(
        self, index: int, item: JobSpec | Mapping[str, Any], now: datetime
    ) -> JobUpsertParams:
        try:
            spec = item if isinstance(item, JobSpec) else _spec_from_mapping(item)
            params = build_upsert(
                spec, tenant=self.tenant, settings=self.settings, now=now, create_only=True
            )
            if params.delivery is DeliveryMode.EXACTLY_ONCE and self.store.dialect == "sqlite":
                raise ValidationError("delivery", "exactly_once needs PostgreSQL")
        except ValidationError as exc:
            raise ValidationError(f"specs[{index}].{exc.field}", exc.reason) from None
        return params

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
        encoded = None
        if payload is not None:
            encoded = _json.encode_payload(payload, limit=self.settings.payload_limit)
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
            raise ValidationError("idempotency_key", "must be 1-200 characters")
        run, _ = await self.store.run_trigger(
            RunTriggerParams(
                job=_ref(self.tenant, job),
                payload=encoded,
                priority=priority,
                idempotency_key=idempotency_key,
                request_hash=request_hash(payload, priority),
            )
        )
        return run

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
    ) -> Worker:
        return Worker(
            self.store,
            self.registry,
            self.settings,
            tasks=tasks,
            clock=self.clock,
            on_start=on_start,
            on_complete=on_complete,
        )

    def materializer(self, partitions: tuple[int, int] | None = None) -> Materializer:
        return Materializer(self.store, self.settings, partitions=partitions)

    def reaper(self) -> LeaseReaper:
        return LeaseReaper(self.store, self.settings)

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
                self.store, node_id, roles, interval=self.settings.heartbeat_interval,
                partitions=span,
            ).run(stop)
        ]
        if "scheduler" in roles:
            elector = Elector(self.store, node_id, ttl=self.settings.leader_ttl)
            maintenance = MaintenanceManager(self.store, self.settings, lambda: elector.fence)
            loops += [elector.run(stop), maintenance.run(stop),
                      self.materializer(partitions).run(stop)]
        return loops

    async def run_scheduler(
        self, stop: asyncio.Event, partitions: tuple[int, int] | None = None
    ) -> None:
        """The scheduler role until ``stop``: materializer, election, leader-only duties."""
        await _supervise(stop, *self.node_loops(stop, roles=("scheduler",), partitions=partitions))

    async def nodes(self) -> tuple[list[NodeInfo], Leadership | None]:
        """Live nodes (as last heartbeated) and the current leadership."""
        return await self.store.nodes_list(), await self.store.leader_get()


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

    def preview(self, cron: str, **kwargs: Any) -> list[Occurrence]:
        return self.aio.preview(cron, **kwargs)
