"""The outbox's statements stay on its indexes on PostgreSQL (the hot-path rule of
decision 0015): with 20,000 sent rows, 2,000 pending ones and 100 dead, and fresh statistics,
the relay's claim, its marks, the depth gauge's reads, the dead list and the pruning never
read ``outbox`` sequentially."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from duetime import AsyncApp
from duetime._config import Settings
from duetime.store.sqlfile import load_queries

pytestmark = pytest.mark.postgres

QUERIES = load_queries("postgres")
FILL = """
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at, sent_at, dead_at)
SELECT g::text, 'plans', gen_random_uuid(), 1, 'b', '{}', '{}', '{}',
       now() - interval '1 day', now() - interval '1 day',
       CASE WHEN g <= 20000 THEN now() - interval '1 hour' END,
       CASE WHEN g > 22000 THEN now() END
FROM generate_series(1, 22100) g
"""


@pytest.fixture
def seeded(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    async def migrate() -> None:
        async with AsyncApp(settings=Settings(database_url=pg_url), migrate=True):
            pass

    asyncio.run(migrate())
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(FILL)
        conn.execute("ANALYZE outbox")
        conn.autocommit = False
        conn.execute("SET jit = off")
        yield conn
        conn.rollback()


def sequential_scans(plan: dict[str, Any]) -> list[str]:
    found = []
    if plan.get("Node Type") == "Seq Scan" and plan.get("Relation Name") == "outbox":
        found.append("outbox")
    for child in plan.get("Plans", []):
        found += sequential_scans(child)
    return found


def explain(conn: psycopg.Connection[Any], name: str, **params: Any) -> None:
    row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + QUERIES[name], params).fetchone()  # type: ignore[operator]
    assert row is not None
    plan = row["QUERY PLAN"][0]["Plan"]
    assert sequential_scans(plan) == [], f"{name}: {json.dumps(plan, indent=1)}"


def test_the_outbox_statements_stay_on_its_indexes(seeded: psycopg.Connection[Any]) -> None:
    conn = seeded
    explain(conn, "outbox_claim", connections=["b"], limit=500, lease=30.0, now=None)
    ids = list(range(20001, 20501))
    explain(conn, "outbox_sent", ids=ids, now=None)
    explain(conn, "outbox_retry", batch=json.dumps([[i, 1.0, "down"] for i in ids]), now=None)
    explain(conn, "outbox_dead", batch=json.dumps([[i, "refused"] for i in ids]), now=None)
    explain(conn, "outbox_dead_list", tenant="plans", limit=100, after_id=0)
    explain(conn, "outbox_replay", tenant="plans", ids=None, now=None)
    explain(conn, "outbox_pending_counts")
    explain(conn, "outbox_dead_count")
    explain(conn, "outbox_prune", before=datetime.now(UTC), limit=1000)
