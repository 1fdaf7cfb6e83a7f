"""An ``at`` further in the past than the misfire grace is refused unless ``allow_past``
(issue 17: ``--at 2020-01-01T00:00:00Z`` was accepted silently and fired six years late)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime import AsyncApp, ValidationError


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "past.db"), migrate=True) as opened:
        yield opened


LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


async def test_an_at_long_past_is_refused_naming_at(app: AsyncApp) -> None:
    with pytest.raises(ValidationError) as refused:
        await app.schedule("typo", task="duetime.noop", at=LONG_AGO)
    assert refused.value.field == "at"
    assert "allow_past" in str(refused.value)
    assert "e+" not in str(refused.value)
    with pytest.raises(ValidationError):
        await app.schedule("typo", task="duetime.noop", at=timedelta(minutes=-5))
    assert not (await app.jobs.find()).items


async def test_allow_past_accepts_it_and_it_is_due_at_once(app: AsyncApp) -> None:
    job = await app.schedule("catch-up", task="duetime.noop", at=LONG_AGO, allow_past=True)
    assert job.next_fire_at == LONG_AGO
    # the job as stored can be declared again and updated (it was accepted once)
    updated = await app.update_job("catch-up", priority=5)
    assert updated.priority == 5
    # but a new schedule in the past is checked again
    with pytest.raises(ValidationError) as refused:
        await app.update_job("catch-up", at=LONG_AGO - timedelta(days=1))
    assert refused.value.field == "at"


async def test_within_the_misfire_grace_is_allowed(app: AsyncApp) -> None:
    overdue = await app.schedule("overdue", task="duetime.noop", at=timedelta(seconds=-1))
    assert overdue.next_fire_at is not None
    hour_ago = timedelta(hours=-1)
    with pytest.raises(ValidationError):
        await app.schedule("grace", task="duetime.noop", at=hour_ago)
    graced = await app.schedule("grace", task="duetime.noop", at=hour_ago, misfire_grace=7200)
    assert graced.misfire_grace == 7200


async def test_bulk_registration_checks_each_spec(app: AsyncApp) -> None:
    soon = {"task": "duetime.noop", "at": timedelta(hours=1)}
    late = {"task": "duetime.noop", "at": LONG_AGO}
    with pytest.raises(ValidationError) as refused:  # the second shares the first's shape
        await app.bulk.schedule_many([{"name": "a", **soon}, {"name": "b", **late}])
    assert refused.value.field.endswith("at")
    created = await app.bulk.schedule_many(
        [{"name": "a", **soon}, {"name": "b", **late, "allow_past": True}]
    )
    assert created == 2
