"""The weekly partitions of ``attempts`` on PostgreSQL (docs/decisions/0015).

``attempts`` is range-partitioned on ``claimed_at``, one partition a week (Monday 00:00 UTC to
the next), named ``attempts_wYYYYMMDD`` after the week's Monday, beside the default partition
``attempts_default`` (attempts of a week with no partition of its own, and the attempts kept
from dropped weeks). The leader's retention pass calls :meth:`attempts_partitions`:

- **Ahead**: the weeks from the current one to ``ahead`` weeks later get their partition. A
  week's attempts already in the default partition move into it in the same transaction.
- **Past retention**: a week that ended at or before the retention cut is detached and
  dropped whole, instead of deleting its attempts row by row. Before that, the attempts that
  must outlive it are copied to the default partition: those of runs still live or dead
  letters (retention never drops an unresolved dead letter's history), and those that ended at
  or after the cut (an attempt is kept for the retention period after it ended).

Locks: each week is one transaction, fenced by the leadership. The expensive read (the week's
attempts of live and dead runs) happens before the exclusive lock; ``DETACH`` then holds
``attempts`` exclusively for a few index reads and the drop. While it *waits* for that lock
(a transaction reading or writing attempts is in flight), every completion that arrives queues
behind it: so a try waits at most :data:`LOCK_TIMEOUT` (a completion's own length), gives up,
and is tried again after a pause (:data:`RETRY_PAUSES`); a week still not done waits for the
next pass, and so do the weeks after it (a pass stays a few seconds long). ``DETACH …
CONCURRENTLY`` would not block completions at all, but PostgreSQL refuses it while the table
has a default partition (``attempts_default``), and it cannot run in the week's transaction,
which copies the attempts to keep and drops the week atomically (docs/decisions/0015).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import psycopg
from psycopg import sql

from duetime.store.base import (
    AttemptPartitionsChange,
    AttemptPartitionsParams,
    LeaderFence,
)

log = logging.getLogger("duetime.store.partitions")
T = TypeVar("T")
P = ParamSpec("P")

WEEK = timedelta(days=7)
PREFIX = "attempts_w"
LOCK_TIMEOUT = "100ms"
"""How long one try of a week's create or drop waits for its lock: the longest a completion
arriving meanwhile waits behind it."""
RETRY_PAUSES = (0.25, 0.5, 1.0, 2.0)
"""Seconds between the tries of a week's create or drop whose lock was not granted in time;
after the last, the week waits for the next pass."""


def week_start(t: datetime) -> datetime:
    """The Monday 00:00 UTC that starts the week holding ``t``."""
    day = t.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


def partition_name(start: datetime) -> str:
    return f"{PREFIX}{start:%Y%m%d}"


def _week_of(name: str) -> datetime | None:
    try:
        return datetime.strptime(name[len(PREFIX) :], "%Y%m%d").replace(tzinfo=UTC)
    except ValueError:
        return None


class _Host(Protocol):
    """What the mixin needs from :class:`~duetime.store.postgres.store.PostgresStore`."""

    def _tx(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...
    def _read(self) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...
    async def _now(self, conn: psycopg.AsyncConnection[Any], now: datetime | None) -> datetime: ...
    async def _holds(
        self, conn: psycopg.AsyncConnection[Any], fence: LeaderFence | None, now: datetime
    ) -> bool: ...


class PostgresAttemptPartitions:
    """Mixed into PostgresStore: :meth:`attempts_partitions`."""

    async def attempts_partitions(
        self: _Host, params: AttemptPartitionsParams
    ) -> AttemptPartitionsChange:
        async with self._read() as conn:
            now = await self._now(conn, params.now)
            weeks = await _weeks(conn)
        created: list[str] = []
        first = week_start(now)
        for k in range(params.ahead + 1):
            start = first + k * WEEK
            if start in weeks or start + WEEK <= params.before:
                continue
            name = await _retried(self, params, _create_week, start)
            if name is None:  # not leading, or attempts stays busy: the rest at the next pass
                break
            created.append(name)
        dropped: list[str] = []
        kept = 0
        for start in sorted(weeks):
            if start + WEEK > params.before:
                continue
            count = await _retried(self, params, _drop_week, start, params.before)
            if count is None:
                break
            kept += count
            dropped.append(partition_name(start))
        if created or dropped:
            log.info(
                "attempt partitions: created %s, dropped %s (%d attempts kept)",
                created,
                dropped,
                kept,
            )
        return AttemptPartitionsChange(tuple(created), tuple(dropped), kept)


async def _retried(
    host: _Host,
    params: AttemptPartitionsParams,
    step: Callable[Concatenate[psycopg.AsyncConnection[Any], P], Awaitable[T]],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T | None:
    """Run ``step(conn, *args, **kwargs)`` in a transaction fenced by ``params.leader`` whose
    lock waits last at most :data:`LOCK_TIMEOUT`; a try whose lock was not granted rolls back
    whole and is tried again after the next of :data:`RETRY_PAUSES`. The result of the try
    that committed; None when the leader no longer leads or every try gave up (the next pass
    tries again)."""
    for pause in (*RETRY_PAUSES, None):
        try:
            async with host._tx() as conn:
                now = await host._now(conn, None)
                if not await host._holds(conn, params.leader, now):
                    return None
                await conn.execute(
                    sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT))
                )
                return await step(conn, *args, **kwargs)
        except psycopg.errors.LockNotAvailable:
            if pause is None:
                log.warning(
                    "attempt partitions: a lock was not granted in %s in %d tries; "
                    "retried at the next pass",
                    LOCK_TIMEOUT,
                    len(RETRY_PAUSES) + 1,
                )
                return None
            await asyncio.sleep(pause)
    return None


async def _weeks(conn: psycopg.AsyncConnection[Any]) -> set[datetime]:
    cursor = await conn.execute(
        "SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'attempts'::regclass"
    )
    weeks = {_week_of(row["name"]) for row in await cursor.fetchall()}
    return {w for w in weeks if w is not None}


async def _create_week(conn: psycopg.AsyncConnection[Any], start: datetime) -> str:
    """The week's partition (its name returned), with the attempts of that week the default
    partition holds. Writes to the default partition wait meanwhile (a row it gained between
    the move and the attach would fail the attach)."""
    table = sql.Identifier(partition_name(start))
    lo, hi = sql.Literal(start), sql.Literal(start + WEEK)
    await conn.execute("LOCK TABLE attempts IN SHARE ROW EXCLUSIVE MODE")
    await conn.execute(
        sql.SQL("CREATE TABLE {} (LIKE attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS)").format(
            table
        )
    )
    await conn.execute(
        sql.SQL(
            "WITH moved AS (DELETE FROM attempts_default "
            "WHERE claimed_at >= {lo} AND claimed_at < {hi} RETURNING *) "
            "INSERT INTO {table} SELECT * FROM moved"
        ).format(table=table, lo=lo, hi=hi)
    )
    await conn.execute(
        sql.SQL("ALTER TABLE attempts ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
            table, lo, hi
        )
    )
    return partition_name(start)


def kept_attempts_read(table: str) -> sql.Composed:
    """The attempts of ``table`` whose runs are live or dead now, found from the runs' side
    through the partial indexes on scheduled, running and dead runs (runs_fair,
    runs_running_tenant, runs_dead): a few index pages however long the history. The
    ``state IN (…)`` it replaces matches none of those indexes and was a sequential scan of
    the whole of ``runs`` for every week dropped (issue 15: 12 scans of a 10M-run history in
    the first pass), each holding the xmin horizon back for its duration."""
    return sql.SQL(
        "SELECT a.* FROM {} a WHERE a.run_id IN ("
        "SELECT id FROM runs WHERE state = 'scheduled' "
        "UNION ALL SELECT id FROM runs WHERE state = 'running' "
        "UNION ALL SELECT id FROM runs WHERE state = 'dead')"
    ).format(sql.Identifier(table))


async def _drop_week(conn: psycopg.AsyncConnection[Any], start: datetime, before: datetime) -> int:
    """Detach and drop the week's partition, first keeping in the default partition the
    attempts that must outlive it; returns how many were kept."""
    table = sql.Identifier(partition_name(start))
    cut = sql.Literal(before)
    # read while the partition is still attached (no exclusive lock yet): the attempts of runs
    # live or dead now. A run that turns live or dead later was live now (nothing returns to
    # those states from a finished one but a dead letter's replay, which is dead now).
    await conn.execute(
        sql.SQL("CREATE TEMP TABLE kept_attempts ON COMMIT DROP AS {}").format(
            kept_attempts_read(partition_name(start))
        )
    )
    await conn.execute(sql.SQL("ALTER TABLE attempts DETACH PARTITION {}").format(table))
    # detached: every write to the week has committed; add what ended at or after the cut,
    # unless its run is gone (a late stale attempt of a run pruned already): the default
    # partition's attempts are pruned through their runs, so it would never go
    await conn.execute(
        sql.SQL(
            "INSERT INTO kept_attempts SELECT a.* FROM {} a WHERE a.finished_at >= {} "
            "AND NOT EXISTS (SELECT 1 FROM kept_attempts k WHERE k.run_id = a.run_id "
            "AND k.token = a.token AND k.claimed_at = a.claimed_at) "
            "AND EXISTS (SELECT 1 FROM runs WHERE runs.id = a.run_id)"
        ).format(table, cut)
    )
    cursor = await conn.execute("INSERT INTO attempts SELECT * FROM kept_attempts")
    kept = cursor.rowcount
    await conn.execute(sql.SQL("DROP TABLE {}").format(table))
    return kept
