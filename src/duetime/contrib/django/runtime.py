"""The project's duetime app and the calls that enqueue from Django code.

``get_app()`` makes one :class:`~duetime.App` per process from ``settings.DUETIME``
(:mod:`.conf`), lazily and once (thread-safe); ``app`` (this module's attribute) is that app,
which the ``worker`` and ``up`` commands serve (``--app duetime.contrib.django.runtime:app``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections, transaction

from duetime import App
from duetime._types import Job, Run
from duetime.contrib.django import conf

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_app: App | None = None


def get_app() -> App:
    """The project's :class:`~duetime.App` (made on first use; it opens on its first call)."""
    global _app
    with _lock:
        if _app is None:
            _app = App(settings=conf.app_settings(), tenant=conf.tenant(), migrate=conf.migrate())
        return _app


def __getattr__(name: str) -> Any:
    if name == "app":
        return get_app()
    raise AttributeError(name)


def task(name: str) -> Callable[[F], F]:
    """Register a task of the project (in an installed app's ``duetime_tasks`` module, which
    the app config imports at start-up)."""
    return get_app().task(name)


def _connection(using: str | None) -> Any:
    """Django's psycopg connection ``using`` inside an atomic block, else None (no
    transaction to join: the call commits on its own)."""
    wrapper = connections[using or conf.database_alias()]
    if not wrapper.in_atomic_block:
        return None
    wrapper.ensure_connection()
    return wrapper.connection


def trigger(job: str, *, using: str | None = None, **options: Any) -> Run:
    """:meth:`App.trigger` in the current ``transaction.atomic()`` block of Django's database
    ``using`` (default ``DUETIME['DATABASE']``): the run exists exactly when the block commits.
    Outside a block, the run is committed at once. Needs duetime's tables in that PostgreSQL
    database (UsageError otherwise)."""
    return get_app().trigger(job, connection=_connection(using), **options)


def schedule(name: str, *, using: str | None = None, **options: Any) -> Job:
    """:meth:`App.schedule` in the current atomic block (see :func:`trigger`)."""
    return get_app().schedule(name, connection=_connection(using), **options)


def trigger_on_commit(job: str, *, using: str | None = None, **options: Any) -> None:
    """Trigger ``job`` once the current atomic block of ``using`` has committed (at once
    outside one), never after a rollback: for a duetime database other than Django's. A crash
    between the commit and the trigger loses the run — :func:`trigger` does not."""
    transaction.on_commit(lambda: get_app().trigger(job, **options), using=using)
