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


class UnknownTask(ValidationError):
    """A job names a task no worker has registered yet (``field`` is ``task``). For a caller it
    is a ValidationError like any other; inside a task (``app.schedule(task=…)`` before the
    worker serving that task has started) the worker retries it, as the worker may come, where
    any other ValidationError ends the run (reason ``permanent_error``)."""


class JobCapReached(ValidationError):
    """Registering a new job would exceed its tenant's cap on registered jobs (``max_jobs``,
    set with the tenant's limits): ``field`` is ``max_jobs``."""

    def __init__(self, tenant: str, cap: int) -> None:
        super().__init__(
            "max_jobs",
            f"tenant {tenant!r} has reached its cap of {cap} registered job(s); cancel or "
            "delete jobs, or raise the cap (duetime tenants limits set --max-jobs)",
        )
        self.tenant = tenant
        self.cap = cap


class BackfillCapReached(ValidationError):
    """A backfill would create more runs than its tenant allows one backfill
    (``max_backfill_runs``, set with the tenant's limits): ``field`` is ``max_backfill_runs``.
    Nothing was created."""

    def __init__(self, tenant: str, job: str, runs: int, cap: int) -> None:
        super().__init__(
            "max_backfill_runs",
            f"a backfill of {job!r} would create {runs} runs; tenant {tenant!r} allows at most "
            f"{cap} per backfill: shorten the range, or raise the cap (duetime tenants limits "
            "set --max-backfill-runs)",
        )
        self.cap = cap


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


class UsageError(DuetimeError):
    """duetime's API used wrongly from inside a task (``ctx.progress(2.0)``, ``ctx.transaction()``
    in a job that is not exactly-once, a checkpoint that is not JSON …): ``what`` names the call
    or argument, ``reason`` says what is wrong. The same call fails the same way on every attempt,
    so the worker ends the run ``dead`` at once (reason ``usage_error``), keeping the message and
    traceback on the attempt."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason


class Permanent(Exception):
    """Raise from a task to fail its run at once, with no further retries (it goes dead)."""


MAX_RETRY_DELAY = 10 * 366 * 86400.0
"""The longest delay :class:`RetryLater` may ask for, in seconds (ten years, as the longest
duration the REST API takes: a remote worker's ``retry_after`` always fits)."""


class RetryLater(Exception):
    """Raise from a task to ask for a retry after ``delay`` seconds (counts as an attempt).
    A ``delay`` that is not a number from 0 to :data:`MAX_RETRY_DELAY` raises
    :class:`UsageError` instead (the run ends at once, reason ``usage_error``)."""

    def __init__(self, message: str = "", *, delay: float | None = None) -> None:
        if delay is not None and (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not 0 <= delay <= MAX_RETRY_DELAY
        ):
            raise UsageError(
                "RetryLater.delay",
                f"must be seconds from 0 to {MAX_RETRY_DELAY:g} (ten years), got {delay!r}",
            )
        super().__init__(message)
        self.delay = delay
