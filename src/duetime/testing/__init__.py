"""Helpers for testing code that uses duetime, on a real database (a SQLite file, or a
PostgreSQL schema) and a frozen clock the test moves — see docs/testing.md.

- :class:`FrozenClock`: ``clock.advance(hours=1)``, ``clock.set(instant)``;
- :class:`FrozenApp` / :class:`FrozenSyncApp`: an app whose store reads that clock;
- :func:`drain` / :func:`drain_sync`: materialize and execute everything due at the clock's
  instant through the real scheduler pass and a real worker, one run at a time;
- :func:`runs_of`, :func:`assert_triggered`, :func:`assert_scheduled` (and ``*_sync`` forms
  for the blocking ``App``);
- :func:`run_task`: one task body with a recording context;
- the pytest plugin (:mod:`duetime.testing.plugin`): ``duetime_clock``, ``duetime_app``, …
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from duetime._lazy import lazy_names

if TYPE_CHECKING:
    from duetime._clock import FrozenClock
    from duetime.testing.app import FrozenApp, FrozenSyncApp
    from duetime.testing.asserts import (
        assert_scheduled,
        assert_scheduled_sync,
        assert_triggered,
        assert_triggered_sync,
        describe_runs,
        runs_of,
        runs_of_sync,
    )
    from duetime.testing.drain import drain, drain_sync
    from duetime.testing.task import RecordedHooks, TaskCall, run_task

# Loaded on first use (PEP 562): the pytest plugin imports this package, and a test suite that
# never uses duetime's fixtures should not pay for the app, the worker and the stores.
_HOMES = {
    "FrozenClock": "duetime._clock",
    "FrozenApp": "duetime.testing.app",
    "FrozenSyncApp": "duetime.testing.app",
    "assert_scheduled": "duetime.testing.asserts",
    "assert_triggered": "duetime.testing.asserts",
    "assert_scheduled_sync": "duetime.testing.asserts",
    "assert_triggered_sync": "duetime.testing.asserts",
    "runs_of_sync": "duetime.testing.asserts",
    "describe_runs": "duetime.testing.asserts",
    "runs_of": "duetime.testing.asserts",
    "drain": "duetime.testing.drain",
    "drain_sync": "duetime.testing.drain",
    "RecordedHooks": "duetime.testing.task",
    "TaskCall": "duetime.testing.task",
    "run_task": "duetime.testing.task",
}


__getattr__ = lazy_names(__name__, _HOMES, globals())


__all__ = [
    "FrozenApp",
    "FrozenClock",
    "FrozenSyncApp",
    "RecordedHooks",
    "TaskCall",
    "assert_scheduled",
    "assert_scheduled_sync",
    "assert_triggered",
    "assert_triggered_sync",
    "describe_runs",
    "drain",
    "drain_sync",
    "run_task",
    "runs_of",
    "runs_of_sync",
]
