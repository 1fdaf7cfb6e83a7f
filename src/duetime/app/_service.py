"""What every service of the front hall shares: the tenant, settings, clock, task registry and
open store of the app that made it (its :class:`Scope`), and the argument checks they all use.

A service reads its scope's ``store`` at each call, never at construction, so it can be made
before the app is open (``App`` opens lazily) and a ``for_tenant`` view gets its own."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TypeVar

from duetime._clock import Clock
from duetime._config import Settings
from duetime.errors import NotFound, UnknownTask, ValidationError
from duetime.store.base import JobRef, Store
from duetime.targets.python import BUILTIN_NAMES, TaskRegistry

C = TypeVar("C")


class Scope(Protocol):
    """The app as its services see it (:class:`~duetime.app.AsyncApp` is one)."""

    # read-only properties, one a line (alike in shape to other Protocols, not shared logic)

    @property
    def tenant(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def registry(self) -> TaskRegistry: ...

    @property
    def store(self) -> Store: ...

    @property
    def actor(self) -> str: ...


class ScopeReader:
    """Reads its scope's tenant, settings and clock through at each use (never a copy): a
    service's scope is its app; :class:`~duetime.app.App`'s is the AsyncApp it runs."""

    __slots__ = ()
    _scope: Scope

    # One property per part of the scope (not __getattr__): typed for mypy, and listed by help().
    @property
    def tenant(self) -> str:
        return self._scope.tenant

    @property
    def settings(self) -> Settings:
        return self._scope.settings

    @property
    def clock(self) -> Clock:
        return self._scope.clock

    @property
    def actor(self) -> str:
        """Who the audit trail records as acting (docs/decisions/0021)."""
        return self._scope.actor


class Service(ScopeReader):
    """One concern of the front hall, acting for its scope's tenant."""

    __slots__ = ("_scope",)

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    @property
    def store(self) -> Store:
        return self._scope.store


def job_ref(tenant: str, job: str | uuid.UUID) -> JobRef:
    """A job by id (a UUID or its text) or else by name."""
    if isinstance(job, uuid.UUID):
        return JobRef(tenant=tenant, id=job)
    try:
        return JobRef(tenant=tenant, id=uuid.UUID(job))
    except ValueError:
        return JobRef(tenant=tenant, name=job)


def parse_run_id(run: str | uuid.UUID) -> uuid.UUID:
    if isinstance(run, uuid.UUID):
        return run
    try:
        return uuid.UUID(run)
    except ValueError:
        raise NotFound(f"run {run!r} not found (not a run id)") from None


def check_limit(limit: int, field: str = "limit") -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise ValidationError(field, f"must be a whole number from 1 to 1000, got {limit!r}")


def check_window(since: object, until: object) -> None:
    """ValidationError unless ``since`` and ``until`` are each None or an aware datetime, and
    ``until`` is later than ``since`` when both are given (a list's instant filters)."""
    for field, value in (("since", since), ("until", until)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise ValidationError(field, f"must be a timezone-aware datetime, got {value!r}")
    if isinstance(since, datetime) and isinstance(until, datetime) and until <= since:
        raise ValidationError("until", "must be later than since")


def read_cursor(cursor: str | None, parse: Callable[[str], C]) -> C | None:
    """``parse(cursor)`` (a params type's ``before_cursor``); None for no cursor, and
    ValidationError for one this API did not return."""
    if not cursor:
        return None
    try:
        return parse(cursor)
    except ValueError:
        raise ValidationError("cursor", "is not a cursor this API returned") from None


async def check_task(scope: Scope, task: str, allow_unregistered: bool) -> None:
    """Refuse a task no one serves: not built in, not registered on this app, and not declared
    by any of the installation's workers or this tenant's remote ones: UnknownTask (a
    ValidationError a worker retries, as the task's worker may yet start)."""
    if not isinstance(task, str) or not task:
        raise ValidationError("task", "must name a task, e.g. 'billing.settle'")
    if allow_unregistered or task in BUILTIN_NAMES or task in scope.registry:
        return
    if task not in await scope.store.tasks_known([task], tenant=scope.tenant):
        raise UnknownTask(
            "task",
            f"unknown task {task!r}: no worker has registered it (start a worker "
            "that serves it first, or pass allow_unregistered=True)",
        )


async def check_workflow(scope: Scope, target: object) -> None:
    """Refuse a workflow job whose workflow is not registered (for the app's tenant)."""
    if not isinstance(target, dict) or target.get("type") != "workflow":
        return
    name = str(target.get("name"))
    try:
        await scope.store.workflow_get(scope.tenant, name)
    except NotFound:
        raise ValidationError(
            "target.name", f"workflow {name!r} is not registered (app.workflows.register first)"
        ) from None
