"""``app.update_job``: a partial update applied atomically in one store transaction (lock,
merge onto the current values, validate as ``schedule`` does, write), on both stores."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from duetime import App, AsyncApp, NotFound, Retry, ValidationError
from duetime._redact import REDACTED
from duetime._types import Job, RunState

TARGET = {
    "type": "http",
    "url": "https://hooks.example.com/v1",
    "headers": {"Authorization": "Bearer secret"},
}


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, migrate=True) as opened:
        yield opened


def unchanged(before: Job, after: Job) -> None:
    assert after == before
    assert after.updated_at == before.updated_at


async def test_concurrent_updates_of_different_fields_all_survive(
    app: AsyncApp, store_url: str
) -> None:
    job = await app.schedule("nightly", task="duetime.noop", cron="0 2 * * *", payload={"v": 0})
    async with AsyncApp(store_url) as other:  # a second process on the same database
        for i in range(1, 21):
            await asyncio.gather(
                app.update_job("nightly", priority=i),
                other.update_job(job.id, payload={"v": i}),
            )
            now = await app.get("nightly")
            assert (now.priority, now.payload) == (i, {"v": i})
    assert now.schedule == job.schedule
    assert now.next_fire_at == job.next_fire_at


async def test_a_refused_update_changes_nothing(app: AsyncApp) -> None:
    await app.schedule("nightly", task="duetime.noop", cron="0 2 * * *", payload={"v": 1})
    before = await app.get("nightly")
    for changes, field in [
        ({"priority": 5, "cron": "nonsense"}, "cron"),
        ({"priority": 5000}, "priority"),
        ({"payload": {"v": 2}, "retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"attempts": 2}}, "retry.attempts"),
        ({"every": 60, "cron": "0 3 * * *"}, "schedule"),
        ({"queue": ""}, "queue"),
        ({"name": "renamed"}, "name"),
        ({"task": "billing.unknown"}, "task"),
        (
            {"target": {**TARGET, "headers": {"Authorization": REDACTED}}},
            "target.headers.Authorization",
        ),
    ]:
        with pytest.raises(ValidationError) as caught:
            await app.update_job("nightly", **changes)  # type: ignore[arg-type]
        assert caught.value.field == field, changes
        unchanged(before, await app.get("nightly"))


async def test_an_unknown_job_is_not_found(app: AsyncApp) -> None:
    with pytest.raises(NotFound):
        await app.update_job("missing", priority=1)
    with pytest.raises(NotFound):
        await app.update_job(uuid.uuid4(), priority=1)


async def test_omitted_fields_keep_their_values_and_retry_merges(app: AsyncApp) -> None:
    job = await app.schedule(
        "nightly",
        task="duetime.noop",
        cron="0 2 * * *",
        tz="Europe/Paris",
        retry=Retry(max_attempts=4, backoff_base=2.0),
        tags=["a"],
        timeout=30,
    )
    changed = await app.update_job("nightly", retry={"max_attempts": 9}, tags=["b", "c"])
    assert changed.retry == Retry(max_attempts=9, backoff_base=2.0)
    assert changed.tags == ("b", "c")
    assert (changed.timeout, changed.schedule, changed.next_fire_at) == (
        30,
        job.schedule,
        job.next_fire_at,
    )
    cleared = await app.update_job("nightly", timeout=None, retry=None)
    assert cleared.timeout is None
    assert cleared.retry == Retry(
        app.settings.max_attempts,
        app.settings.backoff_base,
        app.settings.backoff_factor,
        app.settings.backoff_cap,
    )


async def test_a_schedule_change_replaces_it_and_skips_pending_runs(app: AsyncApp) -> None:
    job = await app.schedule("j", task="duetime.noop", every=60)
    manual = await app.trigger("j")
    same = await app.update_job("j", every=60)  # equivalent: its next fire instant is kept
    assert same.next_fire_at == job.next_fire_at
    zoned = await app.update_job("j", cron="30 4 * * *", tz="Asia/Tokyo")
    assert (zoned.schedule.cron, zoned.schedule.tz) == ("30 4 * * *", "Asia/Tokyo")
    assert (await app.run(manual.id)).state is RunState.SCHEDULED  # manual runs stay
    moved = await app.update_job("j", cron="45 4 * * *")  # tz kept
    assert moved.schedule.tz == "Asia/Tokyo"
    once = await app.update_job("j", at=timedelta(hours=1))
    assert once.schedule.one_shot
    assert once.schedule.tz == "Asia/Tokyo"


async def test_task_target_and_the_redaction_marker(app: AsyncApp) -> None:
    await app.schedule("hook", target=TARGET, every=60)
    moved = {
        **TARGET,
        "url": "https://hooks.example.com/v2",
        "headers": {"authorization": REDACTED},
    }
    changed = await app.update_job("hook", target=moved)
    assert changed.target is not None
    assert changed.target["url"] == "https://hooks.example.com/v2"
    assert changed.target["headers"] == {"authorization": "Bearer secret"}
    # a task replaces the target; an unknown one is refused unless allowed
    with pytest.raises(ValidationError):
        await app.update_job("hook", task="billing.settle")
    task_job = await app.update_job("hook", task="billing.settle", allow_unregistered=True)
    assert (task_job.task, task_job.target) == ("billing.settle", None)


def test_the_sync_app_updates(tmp_path: Path) -> None:
    with App(str(tmp_path / "app.db")) as app:
        app.schedule("j", task="duetime.noop", every=60, priority=1)
        assert app.update_job("j", priority=7).priority == 7
        changed = app.jobs.update_job("j", payload=[1, 2])
        assert (changed.priority, changed.payload) == (7, [1, 2])
        with pytest.raises(NotFound):
            app.update_job("missing", queue="q")
