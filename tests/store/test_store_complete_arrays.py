"""The completion statement on PostgreSQL reads its batch as typed arrays, and no trigger (no
foreign-key check) runs on it: its plan, taken with ``EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON)`` in a
transaction rolled back after, on runs claimed in transactions of their own, as a worker's are
(issue 15 item 3, docs/decisions/0015)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from storekit import completion, running_run
from test_store_outbox import message

from duetime._types import AttemptOutcome, RunState
from duetime.store import Store
from duetime.store.postgres import arrays
from duetime.store.postgres.longruns import completion_columns, message_columns
from duetime.store.sqlfile import load_queries

pytestmark = pytest.mark.postgres

QUERIES = load_queries("postgres")


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _explain(url: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) " + QUERIES[name],  # type: ignore[operator]
            params,
        ).fetchone()
        conn.rollback()
    assert row is not None
    document: dict[str, Any] = row[0][0]
    return document


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
async def test_the_completion_decodes_no_json_and_checks_no_key(
    store: Store, store_url: str, t0: datetime
) -> None:
    """Both forms of the statement (with and without broker messages) read their input through
    ``unnest`` of arrays, not a JSON function (``jsonb_to_recordset`` before), and fire no
    trigger: no foreign key is checked for the runs updated, the attempts inserted, the one-shot
    job completed or the outbox row written (``attempts`` has no key to ``runs`` since
    migration 010; ``runs.job_id`` is not changed, so its key is not checked again)."""
    claimed = [await running_run(store, t0, f"j{i}") for i in range(4)]
    batch = [
        completion(claimed[0]),
        completion(claimed[1], completes_job=True),  # its job marked `completed` too
        completion(
            claimed[2],
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.SCHEDULED,
            available_at=t0,
            error_class="E",
            error_message="m",
            traceback="t",
        ),
        completion(claimed[3], token=claimed[3].run.token - 1),  # refused: recorded `stale`
    ]
    params = {"now": None, "tenant": None, **completion_columns(batch)}
    with_messages = [completion(c, outbox=message(c)) for c in claimed[:2]] + batch[2:]
    outboxed = {
        "now": None,
        "tenant": None,
        **completion_columns(with_messages),
        **message_columns(with_messages),
    }

    for name, values in (("runs_complete", params), ("runs_complete_outbox", outboxed)):
        plan = _explain(store_url, name, values)
        nodes = list(_nodes(plan["Plan"]))
        calls = [n["Function Call"] for n in nodes if n["Node Type"] == "Function Scan"]
        assert calls, name
        assert all(call.startswith("unnest(") for call in calls), (name, calls)
        assert not any(re.search(r"\bjsonb?_\w+\(", call) for call in calls), (name, calls)
        assert plan["Triggers"] == [], (name, plan["Triggers"])


UTC_PLUS_2 = timezone(timedelta(hours=2))
ODD = ['q " b \\ {c, d} NULL', "", "日本語 😀", "x" * 5000]


@pytest.mark.parametrize(
    ("build", "values"),
    [
        (arrays.uuids, [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), uuid.uuid4()]),
        (arrays.int8s, [0, -(2**63), 2**63 - 1, 1]),
        (arrays.int4s, [0, -(2**31), 2**31 - 1]),
        (arrays.bools, [True, None, False, False]),
        (arrays.texts, ODD),  # every value distinct: encoded at C level
        (arrays.texts, ["succeeded"] * 5 + [None, "dead"]),  # repeated: once per value
        (arrays.texts, [*ODD, None]),  # distinct with a NULL: value by value
        (arrays.jsonbs, ['{"a": [1, "ü"]}', None, "null", '"x"']),
        (
            arrays.instants,
            [datetime(2026, 3, 29, 1, 59, 59, 999999, UTC), datetime.min.replace(tzinfo=UTC)],
        ),
        (arrays.instants, [datetime(2000, 1, 1, tzinfo=UTC)] * 3 + [None]),
        (
            arrays.instants,
            [
                datetime(1999, 12, 31, 23, 59, 59, 1, UTC_PLUS_2),
                None,
                datetime.max.replace(tzinfo=UTC),
            ],
        ),
        (
            arrays.instants,
            [datetime(2026, 1, 1, 12, 0, 0, 5), datetime(2026, 1, 1, 12, 0, 0, 6)],
        ),  # naive: UTC
    ],
)
def test_an_array_reads_back_as_built(pg_url: str, build: Any, values: list[Any]) -> None:
    """Each builder's array, read back by PostgreSQL, holds the values it was given, in order
    (instants as the same instants, a naive one taken as UTC; JSON as the same document)."""
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        row = conn.execute(
            "SELECT %s AS a, cardinality(%s) AS n", (build(values), build(values))
        ).fetchone()
    assert row is not None
    read, count = row
    expected = [
        v.replace(tzinfo=UTC) if isinstance(v, datetime) and v.tzinfo is None else v for v in values
    ]
    if build is arrays.jsonbs:
        expected = [None if v is None else json.loads(v) for v in values]
    assert (read, count) == (expected, len(values))


def test_a_column_of_nulls_is_sent_empty_and_read_as_nulls(pg_url: str) -> None:
    """A column whose values are all NULL is an empty array; beside a longer one, unnest pads
    it with NULLs (the completion statement relies on it)."""
    ids = [uuid.uuid4(), uuid.uuid4()]
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT * FROM unnest(%s::uuid[], %s::text[], %s::timestamptz[])",
            (arrays.uuids(ids), arrays.texts([None, None]), arrays.instants([None, None])),
        ).fetchall()
    assert rows == [(ids[0], None, None), (ids[1], None, None)]
