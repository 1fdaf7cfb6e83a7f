""":class:`AsyncApp`, the front hall: it opens and closes the store, holds the settings, clock
and task registry, makes the service loops, and hands out one typed service per concern —
``jobs``, ``runs``, ``bulk``, ``tenants``, ``keys``, ``monitoring``. Each operation also sits flat
on the app (``app.schedule`` is ``app.jobs.schedule``), as the README has always shown."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from duetime._clock import Clock, SystemClock
from duetime._config import Settings
from duetime._outbox import RunEvents
from duetime.app._flat import FlatOperations
from duetime.app.audit import Audit, check_actor, default_actor
from duetime.app.bulk import Bulk
from duetime.app.calendars import Calendars
from duetime.app.jobs import Jobs
from duetime.app.keys import Keys
from duetime.app.lifecycle import LIFECYCLE_INTERVAL, Lifecycle, LifecyclePass
from duetime.app.monitoring import Monitoring
from duetime.app.outbox import Outbox
from duetime.app.runs import Runs
from duetime.app.tenants import Tenants
from duetime.app.tz_upgrade import TzdataUpgrade
from duetime.app.workflows import Workflows
from duetime.errors import ConnectError, ValidationError
from duetime.leadership import Elector, NodePresence, new_node_id
from duetime.leadership.partitions import PartitionKeeper
from duetime.maintenance import LeaseReaper, MaintenanceManager
from duetime.scheduler.materializer import Materializer
from duetime.store import Pooling, create_store, is_postgres_url
from duetime.store.base import Store
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.brokers.events import parse_run_events
from duetime.targets.python import TaskFunc, TaskRegistry
from duetime.worker.completer import CompletionListener
from duetime.worker.remote import RemoteWorkers
from duetime.worker.worker import StartListener, Worker

log = logging.getLogger("duetime")
F = TypeVar("F", bound=TaskFunc)


def run_events_of(settings: Settings) -> RunEvents | None:
    """The run events ``settings`` ask the store to write (``DUETIME_RUN_EVENTS``; None:
    none), checked against its broker connections. Raises ValidationError naming the field."""
    return parse_run_events(settings.run_events, parse_brokers(settings.brokers))


_SQLITE_OUTAGES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
    }
)
"""SQLite's primary result codes that mean the database cannot serve now (``unreachable``)."""


class AsyncApp(FlatOperations):
    """duetime for async code. Use ``async with AsyncApp(url) as app:`` or ``await app.open()``.

    ``url``: a SQLite path (default ``duetime.db``) or a ``postgresql://`` URL; defaults to
    ``DUETIME_DATABASE_URL``. ``tenant`` scopes every job operation.

    The operations live in services: ``app.jobs`` (:class:`~duetime.app.Jobs`), ``app.runs``
    (:class:`~duetime.app.Runs`; calling it finds runs), ``app.bulk``, ``app.tenants``,
    ``app.keys`` (calling it finds keys) and ``app.monitoring``. The flat names
    (``app.schedule``, ``app.trigger``, ``app.get``, …) are those same methods
    (:class:`~duetime.app._flat.FlatOperations`, shared with :class:`~duetime.app.App`).

    ``app.list`` is deprecated — use ``app.jobs.find``: a method named ``list`` hides the
    builtin inside the class body that defines it, where ``list[...]`` in an annotation then
    names the method (type checkers refuse it). It is kept, warning, as the last attribute of
    ``FlatOperations``, whose body has no annotation after it.
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
        actor: str | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env(database_url=url)
        if url is not None and settings is not None:
            self.settings = self.settings.with_(database_url=url)
        if not tenant or len(tenant) > 100:
            raise ValidationError("tenant", "must be 1-100 characters")
        self.tenant = tenant
        self.actor = default_actor() if actor is None else check_actor(actor)
        """Who the audit trail records this app's changes as made by (docs/audit.md)."""
        self.clock: Clock = clock or SystemClock()
        self.registry = registry or TaskRegistry()
        self._store: Store | None = None
        self._migrate = migrate
        self._view = False
        self.jobs = Jobs(self)
        self.runs = Runs(self, self.jobs)
        self.bulk = Bulk(self)
        self.tenants = Tenants(self)
        self.keys = Keys(self)
        self.monitoring = Monitoring(self, self.jobs, self.runs)
        self.lifecycle = Lifecycle(self, self.jobs)
        self.audit = Audit(self)
        self.calendars = Calendars(self)
        self.workflows = Workflows(self)
        self.outbox = Outbox(self)

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("app is not open: use `async with app` or `await app.open()`")
        return self._store

    def unreachable(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the database cannot be reached right now — a connection lost
        or refused, none free in the pool within its wait, a server restarting or failing
        over (the store's transient errors): what waiting and retrying can fix. Of the
        ``OSError`` family only connection errors and timeouts count (a missing file is no
        outage); of SQLite's errors only a database busy, locked, full or failing its I/O (a
        statement that cannot work, "no such column", is a bug)."""
        store = self._store
        if store is None:
            return False
        if isinstance(exc, OSError):
            return isinstance(exc, ConnectionError | TimeoutError)
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)
            if code is None:  # raised by the store itself: "database stayed locked; gave up"
                return "locked" in str(exc)
            return (code & 0xFF) in _SQLITE_OUTAGES  # the primary code of an extended one
        return isinstance(exc, store.transient_errors)

    @property
    def dialect(self) -> str:
        """``postgres`` or ``sqlite``: the database the app's URL names (open or not)."""
        return "postgres" if is_postgres_url(self.settings.database_url) else "sqlite"

    async def migrate(self) -> int:
        """Bring the schema up to date (safe to run again, and concurrently); its version. A
        migration that needs the previous release stopped waits for no process to have
        heartbeated within ``worker_stale_after`` (raises NodesStillRunning until then)."""
        return await self.store.migrate(alive_within=self.settings.worker_stale_after)

    async def partition_runs(self, count: int) -> bool:
        """PostgreSQL: partition the runs table into ``count`` by job partition key, offline
        (docs/howto/hash-partitioning.md): raises NodesStillRunning while a process has
        heartbeated within ``worker_stale_after``, like :meth:`migrate`. False if it already
        is; SchemaError on SQLite."""
        return await self.store.runs_partition_by_key(
            count, alive_within=self.settings.worker_stale_after
        )

    async def open(self, *, create: bool = True) -> AsyncApp:
        """Connect; on SQLite (or with ``migrate=True``) bring the schema up to date first.
        ``create=False`` (read-only callers such as the CLI's read commands): on SQLite a
        missing directory is an error and a missing file reads as an empty database; nothing is
        created."""
        if self._store is not None:
            return self
        url = self.settings.database_url
        run_events = run_events_of(self.settings)
        deadline = time.monotonic() + self.settings.startup_wait
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + self.settings.startup_wait))
        delay = 0.25
        attempt = 0
        while True:
            attempt += 1
            store = create_store(
                url,
                clock=None if is_postgres_url(url) else self.clock,
                create=create,
                pooling=Pooling.of(self.settings),
            )
            try:
                await store.open()
                migrate = self._migrate if self._migrate is not None else not is_postgres_url(url)
                if migrate:
                    await store.migrate(alive_within=self.settings.worker_stale_after)
                else:
                    await store.check_schema()
                break
            except ConnectError as exc:
                await store.close()
                if not exc.retryable or time.monotonic() + delay > deadline:
                    raise
                log.warning(
                    "cannot connect to %s (attempt %d, retrying until %s): %s",
                    exc.target,
                    attempt,
                    until,
                    exc.reason,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
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
        store.run_events = run_events  # written with the changes they report
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

    def for_tenant(self, tenant: str, *, actor: str | None = None) -> AsyncApp:
        """This app acting on ``tenant`` (as ``actor``, default this app's): the same open
        store, registry, settings and clock. Cheap (the REST API makes one per request);
        closing it closes nothing."""
        # keyword arguments by name (alike in shape to calls elsewhere, not shared logic)
        view = AsyncApp(
            tenant=tenant,
            settings=self.settings,
            clock=self.clock,
            registry=self.registry,
            migrate=self._migrate,
            actor=self.actor if actor is None else actor,
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

    def materializer(
        self, partitions: tuple[int, int] | None = None, *, owner: str | None = None
    ) -> Materializer:
        return Materializer(self.store, self.settings, partitions=partitions, owner=owner)

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
        materializer: for the static range ``partitions`` when given, else for the partitions
        this node leases (``leadership/partitions.py``). The worker loop is :meth:`worker`."""
        node_id = new_node_id()
        leased = "scheduler" in roles and partitions is None
        span = f"{partitions[0]}-{partitions[1]}" if partitions else "leased -" if leased else None
        presence = NodePresence(
            self.store, node_id, roles, interval=self.settings.heartbeat_interval, partitions=span
        )
        loops = [presence.run(stop)]
        keeper = None
        if leased:

            def show(held: str) -> None:  # in the node's row, from its next heartbeat
                presence.partitions = f"leased {held}"

            keeper = PartitionKeeper(
                self.store, node_id, ttl=self.settings.partition_lease_ttl, on_change=show
            )
            loops.append(keeper.run(stop))
        if "scheduler" in roles:
            elector = Elector(self.store, node_id, ttl=self.settings.leader_ttl)
            lifecycle = LifecyclePass(
                self.store, lambda tenant: self.for_tenant(tenant, actor="duetime").jobs
            )
            maintenance = MaintenanceManager(
                self.store,
                self.settings,
                lambda: elector.fence,
                extra=[("job lifecycle", LIFECYCLE_INTERVAL, lifecycle.run_once)],
            )
            loops += [
                elector.run(stop),
                maintenance.run(stop),
                self._materialize_after_tz_upgrade(stop, partitions, keeper),
            ]
        return loops

    async def _materialize_after_tz_upgrade(
        self,
        stop: asyncio.Event,
        partitions: tuple[int, int] | None,
        keeper: PartitionKeeper | None,
    ) -> None:
        """The materializer, once the zoned jobs computed with an older tzdata release have
        been recomputed (app/tz_upgrade.py) and, with leased partitions, once the keeper has
        first tried to take its share."""
        await TzdataUpgrade(self.store, self.clock).run_once()
        if keeper is None:
            await self.materializer(partitions).run(stop)
            return
        await keeper.ready.wait()
        await self.materializer(owner=keeper.node_id).run(stop)

    async def run_scheduler(
        self, stop: asyncio.Event, partitions: tuple[int, int] | None = None
    ) -> None:
        """The scheduler role until ``stop``: materializer, election, leader-only duties."""
        await supervise(stop, *self.node_loops(stop, roles=("scheduler",), partitions=partitions))


async def supervise(stop: asyncio.Event, *loops: Coroutine[Any, Any, Any]) -> None:
    """Run ``loops`` until the first fails or ``stop`` is set and they all return; then set
    ``stop`` and wait for every one (the first failure is raised). The CLI's processes run
    their loops with it too (:func:`duetime.cli._lifecycle.run_until_stopped`)."""
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            error = task.exception()
            if error is not None:
                raise error
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
