"""Migration 016 (issue 16, item 7: ``every`` in calendar units) keeps old rows meaning what
they meant: an ``every`` job written before it — its interval in ``every_us`` only — reads
as the same fixed duration, from the same anchor, on both stores."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import pytest
from storekit import TENANT
from upgradekit import migrated_to, write

from duetime.schedules import next_fire_after
from duetime.store import SCHEMA_VERSION
from duetime.store.base import JobRef

pytestmark = pytest.mark.fresh_database


async def test_an_every_job_from_before_016_keeps_its_fixed_interval(
    make_store, store_url: str, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await make_store(migrate=False)
    await migrated_to(store, monkeypatch, 15)
    sqlite = store.dialect == "sqlite"
    at = (lambda d: int(d.timestamp() * 1_000_000)) if sqlite else (lambda d: d)
    every = 86_400_000_000  # every_us: microseconds in both dialects
    row = (
        str(uuid.uuid4()), TENANT, "daily", "t.task", "{}", "every", "Europe/Paris", every,
        at(t0), "active", 3, 1.0, 2.0, 60.0, "fire_once", 60.0, "skip", "at_least_once", 0,
        at(t0), at(t0), at(t0),
    )  # fmt: skip
    await asyncio.to_thread(
        write, store, store_url,
        "INSERT INTO jobs (id, tenant, name, task, payload, schedule_kind, tz, every_us, anchor, "
        "status, max_attempts, backoff_base, backoff_factor, backoff_cap, misfire_policy, "
        "misfire_grace_s, overlap_policy, delivery, partition_key, next_fire_at, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [row],
    )  # fmt: skip

    assert await store.migrate() == SCHEMA_VERSION
    job = await store.job_get(JobRef(tenant=TENANT, name="daily"))
    assert (job.schedule.every, job.schedule.every_calendar) == (timedelta(days=1), None)
    assert (job.schedule.anchor, job.next_fire_at) == (t0, t0)
    assert next_fire_after(job.schedule, t0) == t0 + timedelta(hours=24)  # a fixed 24 hours
