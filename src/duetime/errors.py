"""Exceptions users of duetime see.

Every error raised because of bad input is a :class:`ValidationError` that names the field
(``cron``, ``tz``, ``payload``, ``task`` …) and says what is wrong with it.
"""

from __future__ import annotations


class DuetimeError(Exception):
    """Base class of every error duetime raises on purpose."""


class ValidationError(DuetimeError, ValueError):
    """Input rejected at registration; ``field`` names where, ``reason`` says what."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class NotFound(DuetimeError, LookupError):
    """No job, run or key with that id or name (within the caller's tenant)."""


class Conflict(DuetimeError):
    """The change is illegal in the current state (duplicate name, cancelled job, reused key)."""


class SchemaError(DuetimeError):
    """The database schema is missing, or newer than this version of duetime understands."""


class NodesStillRunning(SchemaError):
    """A pending migration needs every node of the previous release stopped (it is not a
    rolling upgrade), and these ``nodes`` (``host:pid (roles)``) still heartbeat."""

    def __init__(self, migration: str, nodes: list[str]) -> None:
        self.migration = migration
        self.nodes = nodes
        super().__init__(
            f"migration {migration} is not a rolling upgrade: stop every duetime process of "
            f"the previous release first ({len(nodes)} still running: {', '.join(nodes)}); "
            "`duetime migrate` waits for them"
        )


class ConnectError(DuetimeError):
    """The database cannot be opened: ``target`` (a URL without its password, or a SQLite
    path) and the one-line ``reason``. ``retryable`` is true when waiting may help (a refused
    or timed-out connection: a server starting or failing over); false when it cannot (unknown
    role or database, a wrong password, a malformed URL, a path that is no database)."""

    def __init__(self, target: str, reason: str, *, retryable: bool) -> None:
        super().__init__(f"cannot connect to {target}: {reason}")
        self.target = target
        self.reason = reason
        self.retryable = retryable


class UnsupportedFeature(DuetimeError):
    """The chosen store cannot provide what was asked (e.g. exactly-once on SQLite)."""


class Permanent(Exception):
    """Raise from a task to fail its run at once, with no further retries (it goes dead)."""


class RetryLater(Exception):
    """Raise from a task to ask for a retry after ``delay`` seconds (counts as an attempt)."""

    def __init__(self, message: str = "", *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay
