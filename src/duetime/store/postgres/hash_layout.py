"""The hash-partitioned layout of ``runs`` on PostgreSQL (opt-in; docs/decisions/0033).

Every job carries a partition key, 0-255 (a byte of the SHA-256 of its id:
``registration.partition_of``), and every run carries its job's (migration 027). The default
layout keeps ``runs`` one table. ``duetime migrate --hash-partitions N`` (N a power of two from
2 to 64) turns it into a table partitioned ``BY RANGE (partition_key)`` into N partitions of
``256 / N`` consecutive keys each, named ``runs_pLLL_HHH`` after their first and last key.
Since the key is itself a hash of the job, each partition holds a hash share of the jobs' runs.

What changes with it:

- Every unique index and the primary key gain ``partition_key`` as their last column (a
  partitioned table's unique index must include its partition key). The uniqueness is the same:
  the key is a function of the job, so all runs of a job, and any two runs that could collide
  on ``(job_id, scheduled_for, idempotency_key)`` or ``(job_id, idempotency_key)``, are in one
  partition, and each partition's index holds them apart. Run ids are random UUIDs: two runs
  never share one, whichever partitions they are in.
- Other indexes, check constraints, the foreign key to ``jobs`` and the storage parameters
  (fillfactor) are carried over as they were, each built on every partition.
- ``attempts`` keep their weekly range partitions (docs/decisions/0015).

The conversion is offline: it rewrites ``runs`` under an exclusive lock in one transaction, so
the nodes are stopped first (as for a migration marked ``-- requires: nodes stopped``). Runs of
releases before 027 have no key of their own yet; they take their job's as they are copied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from duetime._run_partitions import check_run_partitions
from duetime.errors import SchemaError

KEYS = 256
"""Job partition keys are 0 to KEYS - 1 (``registration.PARTITIONS``)."""
KEY_COLUMN = "partition_key"
_OLD = "runs_before_partitioning"


def partition_bounds(count: int) -> list[tuple[int, int]]:
    """The key ranges of ``count`` partitions, each ``[low, high)``, in key order."""
    width = KEYS // check_run_partitions(count)
    return [(low, low + width) for low in range(0, KEYS, width)]


def partition_name(low: int, high: int) -> str:
    """The name of the partition of keys ``low`` to ``high - 1``: ``runs_p064_127``."""
    return f"runs_p{low:03d}_{high - 1:03d}"


async def runs_partition_count(conn: psycopg.AsyncConnection[Any]) -> int:
    """How many partitions ``runs`` has: 1 while it is one table (the default layout)."""
    cursor = await conn.execute(
        "SELECT c.relkind = 'p' AS partitioned, "
        "(SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid) AS parts "
        "FROM pg_class c WHERE c.oid = 'runs'::regclass"
    )
    row = await cursor.fetchone()
    if row is None:
        raise SchemaError("the database has no runs table: run `duetime migrate` first")
    partitioned, parts = _pair(row, "partitioned", "parts")
    return int(parts) if partitioned else 1


async def partition_runs(conn: psycopg.AsyncConnection[Any], count: int) -> bool:
    """Turn the one-table ``runs`` into ``count`` partitions by key range, keeping every row,
    inside the caller's transaction (which holds the migration lock, and has checked that no
    node runs). False if ``runs`` already has ``count`` partitions; SchemaError if it has
    another number of them (changing the count is not offered: docs/howto/hash-partitioning.md
    says how to do it by dump and restore)."""
    bounds = partition_bounds(count)
    now = await runs_partition_count(conn)
    if now == count:
        return False
    if now != 1:
        raise SchemaError(
            f"runs is already partitioned into {now}; changing the count to {count} is not "
            "supported in place (docs/howto/hash-partitioning.md)"
        )
    await conn.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
    columns = await _columns(conn)
    if KEY_COLUMN not in columns:
        raise SchemaError("runs has no partition_key: run `duetime migrate` first (v27)")
    keyed = await _keyed_indexes(conn)
    plain = await _plain_indexes(conn)
    foreign = await _foreign_keys(conn)
    options = await _storage_options(conn)
    await conn.execute(sql.SQL("ALTER TABLE runs RENAME TO {}").format(sql.Identifier(_OLD)))
    for name, _ in keyed:
        await conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                sql.Identifier(_OLD), sql.Identifier(name)
            )
        )
    for name, _, _ in plain:
        await conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
    await conn.execute(
        sql.SQL(
            "CREATE TABLE runs (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
            "INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE (partition_key)"
        ).format(sql.Identifier(_OLD))
    )
    await conn.execute("ALTER TABLE runs ALTER COLUMN partition_key SET NOT NULL")
    with_options = sql.SQL(" WITH ({})").format(sql.SQL(options)) if options else sql.SQL("")
    for low, high in bounds:
        await conn.execute(
            sql.SQL("CREATE TABLE {} PARTITION OF runs FOR VALUES FROM ({}) TO ({}){}").format(
                sql.Identifier(partition_name(low, high)),
                sql.Literal(low),
                sql.Literal(high),
                with_options,
            )
        )
    await _copy_rows(conn, columns)
    await conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(_OLD)))
    # Each partition's indexes first, named after the partition (runs_p000_063_fair): the
    # parent's, made next, take them over as they are instead of building new ones.
    for low, high in bounds:
        table = partition_name(low, high)
        for name, definition in keyed:
            await conn.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                    sql.Identifier(table),
                    sql.Identifier(child_index(table, name)),
                    sql.SQL(with_key(definition)),
                )
            )
        for name, definition, unique in plain:
            text = with_key(definition) if unique else definition
            await conn.execute(sql.SQL(on_table(text, child_index(table, name), table)))
    for name, definition in keyed:
        await conn.execute(
            sql.SQL("ALTER TABLE runs ADD CONSTRAINT {} {}").format(
                sql.Identifier(name), sql.SQL(with_key(definition))
            )
        )
    for _, definition, unique in plain:
        text = with_key(definition) if unique else definition
        await conn.execute(sql.SQL(text))
    for name, definition in foreign:
        await conn.execute(
            sql.SQL("ALTER TABLE runs ADD CONSTRAINT {} {}").format(
                sql.Identifier(name),
                sql.SQL(definition),
            )
        )
    await conn.execute("ANALYZE runs")
    return True


def child_index(table: str, parent_index: str) -> str:
    """The name of a partition's index under the parent's ``runs_<what>``: ``<table>_<what>``."""
    return f"{table}_{parent_index.removeprefix('runs_')}"


_INDEX_HEAD = re.compile(r"^CREATE (UNIQUE )?INDEX \S+ ON (?:ONLY )?\S+ USING ")


def on_table(definition: str, name: str, table: str) -> str:
    """An index definition (``pg_get_indexdef``) renamed ``name`` and made on ``table``."""
    found = _INDEX_HEAD.match(definition)
    if found is None:
        raise SchemaError(f"cannot read the index definition {definition!r}")
    head = f"CREATE {found.group(1) or ''}INDEX {_quoted(name)} ON {_quoted(table)} USING "
    return head + definition[found.end() :]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_KEY_LIST = re.compile(r"(PRIMARY KEY|UNIQUE(?: NULLS NOT DISTINCT)?|USING \w+) \(")


def with_key(definition: str) -> str:
    """A unique index's or key constraint's definition (``pg_get_indexdef``,
    ``pg_get_constraintdef``) with ``partition_key`` as the last column of its key, where it is
    not already in it."""
    found = _KEY_LIST.search(definition)
    if found is None:
        raise SchemaError(f"cannot find the key columns of {definition!r}")
    start = found.end()
    depth, end = 1, start
    while depth:
        if end >= len(definition):
            raise SchemaError(f"unbalanced key columns in {definition!r}")
        depth += {"(": 1, ")": -1}.get(definition[end], 0)
        end += 1
    keys = definition[start : end - 1]
    if KEY_COLUMN in (k.strip() for k in keys.split(",")):
        return definition
    return f"{definition[: end - 1]}, {KEY_COLUMN}{definition[end - 1 :]}"


async def _copy_rows(conn: psycopg.AsyncConnection[Any], columns: Sequence[str]) -> None:
    """Copy every run into the partitioned table, each with its job's key (runs made before
    v27 have none); SchemaError if a run was not copied (a run without its job)."""
    names = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    values = sql.SQL(", ").join(
        sql.SQL("j.partition_key") if c == KEY_COLUMN else sql.Identifier("r", c) for c in columns
    )
    cursor = await conn.execute(
        sql.SQL(
            "WITH copied AS (INSERT INTO runs ({}) SELECT {} FROM {} r "
            "JOIN jobs j ON j.id = r.job_id RETURNING 1) "
            "SELECT (SELECT count(*) FROM copied) AS copied, (SELECT count(*) FROM {}) AS runs"
        ).format(names, values, sql.Identifier(_OLD), sql.Identifier(_OLD))
    )
    row = await cursor.fetchone()
    copied, total = _pair(row, "copied", "runs")
    if copied != total:
        raise SchemaError(f"copied {copied} of {total} runs: some run has no job")


async def _columns(conn: psycopg.AsyncConnection[Any]) -> list[str]:
    cursor = await conn.execute(
        "SELECT attname AS name FROM pg_attribute WHERE attrelid = 'runs'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
    )
    return [_one(r, "name") for r in await cursor.fetchall()]


async def _keyed_indexes(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str]]:
    """The primary key and unique constraints of runs: (name, definition)."""
    cursor = await conn.execute(
        "SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint "
        "WHERE conrelid = 'runs'::regclass AND contype IN ('p', 'u') ORDER BY contype, conname"
    )
    return [_pair(r, "name", "def") for r in await cursor.fetchall()]


async def _plain_indexes(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str, bool]]:
    """The indexes of runs no constraint owns: (name, definition, unique)."""
    cursor = await conn.execute(
        "SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def, "
        "i.indisunique AS is_unique FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'runs'::regclass AND NOT EXISTS (SELECT FROM pg_constraint k "
        "WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x')) ORDER BY c.relname"
    )
    return [
        (_one(r, "name"), _one(r, "def"), bool(_one(r, "is_unique")))
        for r in await cursor.fetchall()
    ]


async def _foreign_keys(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str]]:
    cursor = await conn.execute(
        "SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint "
        "WHERE conrelid = 'runs'::regclass AND contype = 'f' ORDER BY conname"
    )
    return [_pair(r, "name", "def") for r in await cursor.fetchall()]


async def _storage_options(conn: psycopg.AsyncConnection[Any]) -> str:
    """The storage parameters of runs (``fillfactor=70``), comma-separated, for each
    partition (a partitioned table has none of its own)."""
    cursor = await conn.execute(
        "SELECT array_to_string(coalesce(reloptions, '{}'), ', ') AS options FROM pg_class "
        "WHERE oid = 'runs'::regclass"
    )
    return str(_one(await cursor.fetchone(), "options"))


def _one(row: Any, name: str) -> Any:
    """A column of a row read as a mapping or a tuple (the store's connections read dicts)."""
    if row is None:
        raise SchemaError("the catalog answered nothing")
    return row[name] if isinstance(row, dict) else row[0]


def _pair(row: Any, first: str, second: str) -> tuple[Any, Any]:
    if row is None:
        raise SchemaError("the catalog answered nothing")
    if isinstance(row, dict):
        return row[first], row[second]
    return row[0], row[1]
