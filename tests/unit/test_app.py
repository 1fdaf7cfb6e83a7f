"""The Python API on a real SQLite file: validation at registration, create-or-update,
triggers with idempotency keys, and job status changes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import duetime
from duetime import App, Conflict, NotFound, Retry, ValidationError
from duetime._types import JobStatus, RunState, WorkerInfo


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with App(str(tmp_path / "app.db")) as opened:
        yield opened


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"cron": "61 * * * *"}, "cron", "minute"),
        ({"cron": "* * * * * * *"}, "cron", "7 fields"),
        ({"cron": "0 0 30 2 *"}, "cron", "never fires"),
        ({"cron": "0 2 * * *", "tz": "Mars/Base"}, "tz", "Mars/Base"),
        ({"cron": "0 2 * * *", "payload": {"when": datetime.now}}, "payload", "JSON"),
        ({"cron": "0 2 * * *", "payload": "x" * 70_000}, "payload", "limit"),
        ({}, "schedule", "exactly one"),
        ({"cron": "0 2 * * *", "every": 5}, "schedule", "exactly one"),
        ({"every": 0}, "every", ""),
        ({"at": datetime(2030, 1, 1)}, "at", "time zone"),
        ({"cron": "0 2 * * *", "retry": Retry(max_attempts=0)}, "retry.max_attempts", ""),
        ({"cron": "0 2 * * *", "misfire": "sometimes"}, "misfire", "fire_once"),
        ({"cron": "0 2 * * *", "delivery": "exactly_once"}, "delivery", "PostgreSQL"),
        ({"cron": "0 2 * * *", "timeout": -1}, "timeout", "positive"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    app: App, kwargs: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        app.schedule("job", task="duetime.noop", **kwargs)
    assert caught.value.field == field
    assert words in str(caught.value)
    assert app.jobs.find().items == []


def test_unknown_task_is_refused_unless_allowed(app: App) -> None:
    with pytest.raises(ValidationError) as caught:
        app.schedule("job", task="billing.settle", cron="0 2 * * *")
    assert caught.value.field == "task"
    job = app.schedule("job", task="billing.settle", cron="0 2 * * *", allow_unregistered=True)
    assert job.task == "billing.settle"


def test_a_task_some_worker_declared_is_accepted(app: App) -> None:
    now = datetime.now(UTC)
    worker = WorkerInfo(
        id="w1",
        host="h",
        pid=1,
        tasks=("reports.build",),
        queues=("default",),
        started_at=now,
        heartbeat_at=now,
    )
    app._call(lambda: app.aio.store.worker_register(worker))
    assert app.schedule("r", task="reports.build", every=60).task == "reports.build"


def test_tasks_registered_on_the_app_are_accepted(app: App) -> None:
    @app.task("local.task")
    def local(ctx: duetime.RunContext, payload: object) -> None: ...

    assert app.schedule("l", task="local.task", now=True).status is JobStatus.ACTIVE


def test_schedule_is_create_or_update(app: App) -> None:
    first = app.schedule(
        "nightly", task="duetime.noop", cron="0 2 * * *", tz="Europe/Paris", payload={"v": 1}
    )
    again = app.schedule(
        "nightly", task="duetime.noop", cron="0 2 * * *", tz="Europe/Paris", payload={"v": 2}
    )
    assert first.created
    assert again.id == first.id
    assert not again.created
    assert again.next_fire_at == first.next_fire_at
    assert again.payload == {"v": 2}
    assert not app.get("nightly").created
    moved = app.schedule("nightly", task="duetime.noop", cron="0 3 * * *", tz="Europe/Paris")
    assert moved.id == first.id
    assert moved.next_fire_at is not None
    assert moved.next_fire_at.astimezone(ZoneInfo("Europe/Paris")).hour == 3
    assert moved.next_fire_at != first.next_fire_at
    with pytest.raises(Conflict):
        app.schedule("nightly", task="duetime.noop", cron="0 2 * * *", create_only=True)


def test_every_keeps_its_anchor_when_declared_again(app: App) -> None:
    first = app.schedule("poll", task="duetime.noop", every=timedelta(minutes=5))
    again = app.schedule("poll", task="duetime.noop", every=300)
    assert again.schedule.anchor == first.schedule.anchor
    assert again.next_fire_at == first.next_fire_at


def test_trigger_with_an_idempotency_key_makes_one_run(app: App) -> None:
    app.schedule("nightly", task="duetime.noop", cron="0 2 * * *")
    run = app.trigger("nightly", idempotency_key="k1")
    assert app.trigger("nightly", idempotency_key="k1").id == run.id
    with pytest.raises(Conflict):
        app.trigger("nightly", idempotency_key="k1", payload={"other": True})
    assert app.trigger("nightly").id != app.trigger("nightly").id
    assert run.state is RunState.SCHEDULED


def test_pause_resume_cancel_delete(app: App) -> None:
    job = app.schedule("j", task="duetime.noop", cron="*/5 * * * *")
    assert app.pause("j").status is JobStatus.PAUSED
    assert app.trigger("j").state is RunState.SCHEDULED  # an operator may trigger a paused job
    resumed = app.resume(job.id)
    assert resumed.status is JobStatus.ACTIVE
    assert resumed.next_fire_at is not None
    assert resumed.next_fire_at > datetime.now(UTC)
    assert app.cancel("j").status is JobStatus.CANCELLED
    with pytest.raises(Conflict):
        app.resume("j")
    with pytest.raises(Conflict):
        app.trigger("j")
    app.delete("j")
    with pytest.raises(NotFound):
        app.get("j")


def test_list_filters_and_pages(app: App) -> None:
    for i in range(5):
        app.schedule(f"a.{i}", task="duetime.noop", every=60, tags=["even"] if i % 2 == 0 else [])
    app.schedule("b.0", task="duetime.noop", every=60)
    assert [j.name for j in app.jobs.find(name_prefix="a.").items] == [f"a.{i}" for i in range(5)]
    assert [j.name for j in app.jobs.find(tag="even").items] == ["a.0", "a.2", "a.4"]
    first = app.jobs.find(limit=4)
    rest = app.jobs.find(limit=4, cursor=first.next_cursor)
    assert [j.name for j in first.items + rest.items] == [*(f"a.{i}" for i in range(5)), "b.0"]
    assert rest.next_cursor is None


def test_tenants_do_not_see_each_other(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    with App(db, tenant="a") as a, App(db, tenant="b") as b:
        a.schedule("same", task="duetime.noop", every=60)
        b.schedule("same", task="duetime.noop", every=60)
        job_a = a.get("same")
        with pytest.raises(NotFound):
            b.get(job_a.id)
        run = a.trigger("same")
        with pytest.raises(NotFound):
            b.run(run.id)


def test_sync_app_works_inside_a_running_event_loop(app: App) -> None:
    async def inside() -> str:
        return app.schedule("in-loop", task="duetime.noop", every=60).name

    assert asyncio.run(inside()) == "in-loop"
    assert threading.active_count() >= 2  # the app's own loop thread
