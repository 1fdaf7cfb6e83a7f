"""duetime in a Django project (``INSTALLED_APPS += ["duetime.contrib.django"]``;
docs/integrations.md):

- settings: ``DUETIME = {...}`` (:mod:`.conf`): duetime's settings by name, the database URL
  derived from Django's own PostgreSQL database unless given;
- ``manage.py duetime …``: the ``duetime`` CLI with those settings (``worker`` and ``up`` serve
  the project's tasks: every installed app's ``duetime_tasks`` module is imported at start-up);
- :func:`task` registers a task; :func:`get_app` is the project's :class:`~duetime.App`;
- :func:`trigger` / :func:`schedule` write in the current ``transaction.atomic()`` block on
  Django's own connection (PostgreSQL with psycopg 3): the run exists exactly when the
  block commits; :func:`trigger_on_commit` triggers once the block has committed (any
  database duetime runs on), never after a rollback.
"""

from __future__ import annotations

from duetime.contrib.django.runtime import (
    get_app,
    schedule,
    task,
    trigger,
    trigger_on_commit,
)

__all__ = ["get_app", "schedule", "task", "trigger", "trigger_on_commit"]
