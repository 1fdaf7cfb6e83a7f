"""PostgreSQL: a job's next version stays on its page (migration 029, docs/decisions/0038 "The
job row of a one-shot"). Neither of a plain one-shot's two job updates can be HOT — the set
path clears `next_fire_at` (jobs_due's key), the completion sets `status` (five partial
indexes' predicates) — so what is left to save is the move: with every page full, the new
version went to another page, logged whole."""

from __future__ import annotations

from datetime import datetime

import psycopg
import pytest
from storekit import make_job, s

from duetime._types import Schedule, ScheduleKind
from duetime.scheduler.materializer import materialize_plain
from duetime.store import Store

pytestmark = [
    pytest.mark.parametrize("store_url", ["postgres"], indirect=True),
    pytest.mark.fresh_database,  # pages of its own: the shared schema keeps emptied pages
]


def pages(store_url: str) -> dict[str, int]:
    """Each job's page (the block of its live version), by name."""
    with psycopg.connect(store_url) as conn:
        rows = conn.execute("SELECT name, (ctid::text::point)[0]::int FROM jobs").fetchall()
    return {name: block for name, block in rows}


async def test_jobs_keep_room_on_each_page(store: Store, store_url: str) -> None:
    with psycopg.connect(store_url) as conn:
        row = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'jobs'::regclass"
        ).fetchone()
    assert row is not None
    assert "fillfactor=80" in (row[0] or [])


async def test_a_one_shot_advanced_by_the_set_path_stays_on_its_page(
    store: Store, store_url: str, t0: datetime
) -> None:
    due = t0 + s(5)
    for i in range(80):  # more than two full pages
        await make_job(
            store, f"shot-{i:02}", schedule=Schedule(kind=ScheduleKind.AT, at=due), next_fire_at=due
        )
    before = pages(store_url)
    first = [name for name, block in before.items() if block == 0]
    assert len(first) > 10
    assert max(before.values()) >= 2

    made = await materialize_plain(store, horizon=10.0, now=t0)

    assert made.runs == 80
    after = pages(store_url)
    # a full first page (fillfactor 100) sent every new version elsewhere; the room kept on
    # it takes several of them (each a few hundred bytes against 20 % of 8 kB)
    stayed = [name for name in first if after[name] == 0]
    assert len(stayed) >= 2, (len(first), stayed)
