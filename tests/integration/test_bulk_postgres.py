"""Bulk registration on PostgreSQL: COPY straight into ``jobs`` while the names are new, the
staging table once a name is taken; either way every new job is written once, as given."""

from __future__ import annotations

import psycopg
import pytest

from duetime import AsyncApp
from duetime.registration import JobSpec

pytestmark = pytest.mark.postgres


def specs(count: int, start: int = 0) -> list[JobSpec]:
    return [
        JobSpec(name=f"job-{i}", task="duetime.noop", cron=f"{i % 60} * * * *", payload=i)
        for i in range(start, start + count)
    ]


async def test_a_repeated_import_creates_only_the_new_names(pg_url: str) -> None:
    async with AsyncApp(pg_url, migrate=True) as app:
        assert await app.schedule_many(specs(250), batch_size=100) == 250
        # the first batch of the second import finds names taken: later batches are staged
        assert await app.schedule_many(specs(300, start=100), batch_size=100) == 150
        listed = await app.jobs.find(limit=1000)
        assert len(listed.items) == 400
        job = await app.get("job-399")
        assert (job.payload, job.schedule.cron) == (399, "39 * * * *")
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(DISTINCT id), count(*) FROM jobs").fetchone()
    assert row == (400, 400)


async def test_a_name_repeated_within_one_call_is_created_once(pg_url: str) -> None:
    async with AsyncApp(pg_url, migrate=True) as app:
        twice = [*specs(3), *specs(1)]
        assert await app.schedule_many(twice, batch_size=10) == 3
        assert (await app.get("job-0")).payload == 0
