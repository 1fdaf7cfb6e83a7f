""":class:`App`: the front hall for plain synchronous code. It runs an :class:`AsyncApp` on a
private event-loop thread (so it works from code that has a running loop of its own) and
mirrors it: the same services (``app.jobs``, ``app.runs``, …) and flat names, with the same
parameters, returning results instead of coroutines. The mirrors are made from the async
methods themselves (:class:`~duetime.app._forward.Blocking`), so a parameter added there is
here too, typed; tests/unit/test_front_hall.py checks the two surfaces match name for name.

What has no sync form: the store, ``open`` (an ``App`` opens on first use), and the service
loops (``worker``, ``materializer``, ``reaper``, ``remote_workers``, ``node_loops``,
``run_scheduler``), which run in the caller's own event loop: use :class:`AsyncApp` there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from duetime._clock import Clock
from duetime._config import Settings
from duetime.app._flat import FlatOperations
from duetime.app._forward import Blocking, SyncService, direct
from duetime.app._service import ScopeReader
from duetime.app.async_app import AsyncApp
from duetime.app.audit import Audit
from duetime.app.bulk import Bulk
from duetime.app.calendars import Calendars
from duetime.app.jobs import Jobs
from duetime.app.keys import Keys
from duetime.app.lifecycle import Lifecycle
from duetime.app.monitoring import Monitoring
from duetime.app.outbox import Outbox
from duetime.app.runs import Runs
from duetime.app.tenants import Tenants
from duetime.app.workflows import Workflows
from duetime.targets.python import TaskFunc, TaskRegistry

T = TypeVar("T")
F = TypeVar("F", bound=TaskFunc)


# The Sync* classes repeat each service's method names on purpose: mypy types ``app.jobs.x(...)``
# only from attributes spelled in a class body (a class made at run time would be Any to it).
class SyncJobs(SyncService[Jobs]):
    """:class:`~duetime.app.Jobs`, blocking (``App.jobs``)."""

    schedule = Blocking(Jobs.schedule)
    schedule_spec = Blocking(Jobs.schedule_spec)
    update_job = Blocking(Jobs.update_job)
    get = Blocking(Jobs.get)
    find = Blocking(Jobs.find)
    pause = Blocking(Jobs.pause)
    resume = Blocking(Jobs.resume)
    cancel = Blocking(Jobs.cancel)
    delete = Blocking(Jobs.delete)
    trigger = Blocking(Jobs.trigger)
    trigger_run = Blocking(Jobs.trigger_run)
    preview = direct(Jobs.preview)
    preview_job = Blocking(Jobs.preview_job)
    next_fires = Blocking(Jobs.next_fires)
    backfill = Blocking(Jobs.backfill)
    backfill_progress = Blocking(Jobs.backfill_progress)


class SyncRuns(SyncService[Runs]):
    """:class:`~duetime.app.Runs`, blocking (``App.runs``; calling it finds runs)."""

    find = Blocking(Runs.find)
    __call__ = Blocking(Runs.find)
    get = Blocking(Runs.get)
    attempts = Blocking(Runs.attempts)
    skips = Blocking(Runs.skips)
    dead_letters = Blocking(Runs.dead_letters)
    replay = Blocking(Runs.replay)
    cancel = Blocking(Runs.cancel)
    by_id_prefix = Blocking(Runs.by_id_prefix)
    resolve = Blocking(Runs.resolve)


class SyncBulk(SyncService[Bulk]):
    """:class:`~duetime.app.Bulk`, blocking (``App.bulk``)."""

    schedule_many = Blocking(Bulk.schedule_many)


class SyncCalendars(SyncService[Calendars]):
    """:class:`~duetime.app.calendars.Calendars`, blocking (``App.calendars``)."""

    set = Blocking(Calendars.set)
    get = Blocking(Calendars.get)
    find = Blocking(Calendars.find)
    delete = Blocking(Calendars.delete)
    check_known = Blocking(Calendars.check_known)


class SyncOutbox(SyncService[Outbox]):
    """:class:`~duetime.app.outbox.Outbox`, blocking (``App.outbox``)."""

    dead = Blocking(Outbox.dead)
    replay = Blocking(Outbox.replay)
    depth = Blocking(Outbox.depth)


class SyncWorkflows(SyncService[Workflows]):
    """:class:`~duetime.app.workflows.Workflows`, blocking (``App.workflows``)."""

    register = Blocking(Workflows.register)
    get = Blocking(Workflows.get)
    list = Blocking(Workflows.list)
    instances = Blocking(Workflows.instances)
    instance = Blocking(Workflows.instance)
    steps = Blocking(Workflows.steps)
    cancel = Blocking(Workflows.cancel)
    retry = Blocking(Workflows.retry)
    register_version = Blocking(Workflows.register_version)
    versions = Blocking(Workflows.versions)
    trigger = Blocking(Workflows.trigger)
    detail = Blocking(Workflows.detail)
    explain = Blocking(Workflows.explain)


class SyncTenants(SyncService[Tenants]):
    """:class:`~duetime.app.Tenants`, blocking (``App.tenants``)."""

    limits_set = Blocking(Tenants.limits_set)
    limits_get = Blocking(Tenants.limits_get)
    limits_list = Blocking(Tenants.limits_list)
    stats = Blocking(Tenants.stats)
    webhook_secret = Blocking(Tenants.webhook_secret)
    rotate_webhook_secret = Blocking(Tenants.rotate_webhook_secret)
    alert_webhooks_set = Blocking(Tenants.alert_webhooks_set)
    alert_webhooks = Blocking(Tenants.alert_webhooks)


class SyncKeys(SyncService[Keys]):
    """:class:`~duetime.app.Keys`, blocking (``App.keys``; calling it finds keys)."""

    create = Blocking(Keys.create)
    find = Blocking(Keys.find)
    __call__ = Blocking(Keys.find)
    revoke = Blocking(Keys.revoke)
    authenticate = Blocking(Keys.authenticate)


class SyncMonitoring(SyncService[Monitoring]):
    """:class:`~duetime.app.Monitoring`, blocking (``App.monitoring``)."""

    nodes = Blocking(Monitoring.nodes)
    breakers = Blocking(Monitoring.breakers)
    cluster_stats = Blocking(Monitoring.cluster_stats)
    timeline = Blocking(Monitoring.timeline)
    queue_depth = Blocking(Monitoring.queue_depth)
    last_workers = Blocking(Monitoring.last_workers)
    incidents = Blocking(Monitoring.incidents)
    explain = Blocking(Monitoring.explain)


class SyncLifecycle(SyncService[Lifecycle]):
    """:class:`~duetime.app.lifecycle.Lifecycle`, blocking (``App.lifecycle``)."""

    history = Blocking(Lifecycle.history)
    pause_on_failure = Blocking(Lifecycle.pause_on_failure)
    sync = Blocking(Lifecycle.sync)


class SyncAudit(SyncService[Audit]):
    """:class:`~duetime.app.audit.Audit`, blocking (``App.audit``; calling it finds records)."""

    find = Blocking(Audit.find)
    __call__ = Blocking(Audit.find)


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


async def _nothing() -> None:
    return None


class App(FlatOperations, ScopeReader):
    """duetime for synchronous code: the same services and operations as :class:`AsyncApp`,
    blocking. The store is opened on first use; call :meth:`close` (or use ``with
    App(...)``) when done. The flat names (``app.schedule``, …) are AsyncApp's list
    (:class:`~duetime.app._flat.FlatOperations`), each the sync service's method it names.
    ``app.list`` is deprecated: use ``app.jobs.find``."""

    # AsyncApp's parameters again: a public signature that help() and IDEs show (forwarding
    # *args/**kwargs would hide it); tests/unit/test_front_hall.py checks the two match.
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
        aio = AsyncApp(
            url,
            tenant=tenant,
            settings=settings,
            clock=clock,
            registry=registry,
            migrate=migrate,
            actor=actor,
        )
        self._setup(aio, None)

    def _setup(self, aio: AsyncApp, root: App | None) -> None:
        self.aio = aio
        self._scope = aio
        self._root = root
        self._portal: _Portal | None = None
        self._lock = threading.Lock()
        self.jobs = SyncJobs(self._call, aio.jobs)
        self.runs = SyncRuns(self._call, aio.runs)
        self.bulk = SyncBulk(self._call, aio.bulk)
        self.tenants = SyncTenants(self._call, aio.tenants)
        self.keys = SyncKeys(self._call, aio.keys)
        self.monitoring = SyncMonitoring(self._call, aio.monitoring)
        self.audit = SyncAudit(self._call, aio.audit)
        self.lifecycle = SyncLifecycle(self._call, aio.lifecycle)
        self.calendars = SyncCalendars(self._call, aio.calendars)
        self.workflows = SyncWorkflows(self._call, aio.workflows)
        self.outbox = SyncOutbox(self._call, aio.outbox)

    # tenant, settings and clock are ScopeReader's (read through to the async app); so are:
    @property
    def registry(self) -> TaskRegistry:
        return self.aio.registry

    @property
    def dialect(self) -> str:
        """See :attr:`AsyncApp.dialect`."""
        return self.aio.dialect

    def migrate(self) -> int:
        """See :meth:`AsyncApp.migrate`. The app opens first: on PostgreSQL, make it with
        ``migrate=True`` (opening checks the schema otherwise)."""
        return self._call(self.aio.migrate)

    def partition_runs(self, count: int) -> bool:
        """See :meth:`AsyncApp.partition_runs`."""
        return self._call(lambda: self.aio.partition_runs(count))

    def task(self, name: str) -> Callable[[F], F]:
        """See :meth:`AsyncApp.task`."""
        return self.aio.task(name)

    def _call(self, coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if self._root is not None:
            return self._root._call(coro_fn)
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
        """Close the store and stop the event-loop thread (a :meth:`for_tenant` view's close
        does nothing). The app opens again on its next use."""
        if self._root is not None:
            return
        with self._lock:
            if self._portal is not None:
                self._portal.call(self.aio.close())
                self._portal.stop()
                self._portal = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def for_tenant(self, tenant: str, *, actor: str | None = None) -> App:
        """This app acting on ``tenant`` (as ``actor``, default this app's): the same store,
        event-loop thread, registry, settings and clock (it opens this app if needed); closing
        it closes nothing."""
        root = self._root or self
        root._call(_nothing)
        view = App.__new__(App)
        view._setup(root.aio.for_tenant(tenant, actor=actor or self.aio.actor), root)
        return view
