"""The audit trail (issue 22, item 3; docs/decisions/0021): every mutating method of the Python
app writes exactly one record, with the app's actor, in the transaction of its change; a call
that changes nothing writes none; secrets never appear; tenants see only their own; retention
prunes it. On both stores, with a frozen clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from duetime import AsyncApp
from duetime._audit import AuditRecord
from duetime._clock import FrozenClock
from duetime.app.audit import default_actor
from duetime.errors import Conflict, ValidationError
from duetime.maintenance.retention import RetentionPruner
from duetime.testing import FrozenApp, drain

ACTOR = "test:alice"


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    opened = FrozenApp(store_url, clock=clock)
    opened.actor = ACTOR
    async with opened:
        await opened.schedule("nightly", task="duetime.noop", cron="0 3 * * *")
        yield opened


async def records(app: AsyncApp, **filters: Any) -> list[AuditRecord]:
    return list((await app.audit.find(**filters)).items)


async def dead_run(app: AsyncApp) -> None:
    await app.schedule("flaky", task="duetime.fail", now=True, retry=_one_attempt())
    await drain(app)


def _one_attempt() -> Any:
    from duetime._types import RetryPolicy

    return RetryPolicy(max_attempts=1)


Call = Callable[[AsyncApp], Awaitable[Any]]

# (what, the call, its action, subject kind, subject name or id it names)
MUTATIONS: list[tuple[str, Call, str, str, str | None]] = [
    (
        "schedule (create)",
        lambda a: a.schedule("other", task="duetime.noop", cron="* * * * *"),
        "created",
        "job",
        "other",
    ),
    (
        "schedule (change)",
        lambda a: a.schedule("nightly", task="duetime.noop", cron="0 4 * * *"),
        "updated",
        "job",
        "nightly",
    ),
    ("update_job", lambda a: a.update_job("nightly", priority=5), "updated", "job", "nightly"),
    ("pause", lambda a: a.pause("nightly"), "paused", "job", "nightly"),
    ("cancel", lambda a: a.cancel("nightly"), "cancelled", "job", "nightly"),
    ("delete", lambda a: a.delete("nightly"), "deleted", "job", "nightly"),
    ("trigger", lambda a: a.trigger("nightly"), "triggered", "job", "nightly"),
    (
        "schedule_many",
        lambda a: a.schedule_many(
            [{"name": f"b{i}", "task": "duetime.noop", "now": True} for i in range(3)]
        ),
        "created",
        "jobs",
        None,
    ),
    (
        "tenant_limits_set",
        lambda a: a.tenant_limits_set(weight=3),
        "limits_set",
        "tenant",
        "default",
    ),
    (
        "tenant_alert_webhooks_set",
        lambda a: a.tenant_alert_webhooks_set(["https://hooks.example.com/services/T0/SECRET"]),
        "alert_webhooks_set",
        "tenant",
        "default",
    ),
    ("create_key", lambda a: a.create_key("viewer", name="ci"), "created", "api_key", None),
    (
        "calendars.set",
        lambda a: a.calendars.set("weekends", [{"weekdays": ["sat", "sun"]}]),
        "calendar_set",
        "calendar",
        "weekends",
    ),
    (
        "backfill",
        lambda a: a.jobs.backfill(
            "nightly", a.clock.now() - timedelta(days=3), a.clock.now() - timedelta(days=1)
        ),
        "backfilled",
        "job",
        "nightly",
    ),
    (
        "pause_on_failure",
        lambda a: a.lifecycle.pause_on_failure("nightly", 3),
        "pause_on_failure_set",
        "job",
        "nightly",
    ),
]


@pytest.mark.parametrize(
    ("call", "action", "kind", "subject"),
    [pytest.param(c, act, k, s, id=what) for what, c, act, k, s in MUTATIONS],
)
async def test_each_mutating_method_writes_one_record_with_the_apps_actor(
    app: AsyncApp, call: Call, action: str, kind: str, subject: str | None
) -> None:
    before = await records(app)
    await call(app)
    after = await records(app)
    assert len(after) == len(before) + 1
    record = after[0]
    assert (record.actor, record.action, record.subject_kind, record.tenant) == (
        ACTOR,
        action,
        kind,
        "default",
    )
    if subject is not None:
        assert subject in (record.subject_name, record.subject_id)


async def test_resume_revoke_replay_and_run_cancel_write_one_record_each(app: AsyncApp) -> None:
    await app.pause("nightly")
    await app.resume("nightly")
    assert [r.action for r in await records(app, subject="nightly")][:2] == ["resumed", "paused"]

    key, _ = await app.create_key("viewer")
    await app.revoke_key(key.id)
    revoked = (await records(app, action="revoked"))[0]
    assert (revoked.subject_kind, revoked.subject_id) == ("api_key", str(key.id))

    run = await app.trigger("nightly")
    await app.cancel_run(run.id)
    cancelled = (await records(app, action="cancelled"))[0]
    assert (cancelled.subject_kind, cancelled.subject_id) == ("run", str(run.id))
    assert cancelled.change == {"before": {"state": "scheduled"}, "after": {"state": "cancelled"}}

    await dead_run(app)
    replayed = await app.replay()
    [record] = await records(app, action="replayed")
    assert record.change == {"count": 1, "runs": [str(replayed[0])]}


async def test_a_call_that_changes_nothing_writes_no_record(app: AsyncApp) -> None:
    count = len(await records(app))
    await app.schedule("nightly", task="duetime.noop", cron="0 3 * * *")  # same declaration
    await app.trigger("nightly", idempotency_key="k")
    await app.trigger("nightly", idempotency_key="k")  # answered by the first run
    assert await app.replay() == []
    with pytest.raises(ValidationError):
        await app.update_job("nightly", priority=5000)
    await app.cancel("nightly")
    with pytest.raises(Conflict):
        await app.pause("nightly")
    assert [r.action for r in await records(app)][: len(await records(app)) - count] == [
        "cancelled",
        "triggered",
    ]


async def test_an_update_records_the_settings_before_and_after(app: AsyncApp) -> None:
    await app.update_job("nightly", priority=5, cron="0 4 * * *")
    [record] = await records(app, action="updated")
    assert record.subject_name == "nightly"
    assert record.change is not None
    assert record.change["before"]["priority"] == 0
    assert record.change["after"]["priority"] == 5
    assert record.change["after"]["schedule"]["cron"] == "0 4 * * *"
    assert "task" not in record.change["after"]  # unchanged settings are left out


async def test_limits_and_alert_webhooks_record_before_and_after(app: AsyncApp) -> None:
    await app.tenant_limits_set(weight=3)
    await app.tenant_limits_set(weight=4, max_in_flight=2)
    await app.tenant_alert_webhooks_set(["https://hooks.example.com/services/T0/SECRET"])
    webhooks, second, first = [r.change for r in await records(app, subject="default")][:3]
    assert first == {"before": {"weight": 1}, "after": {"weight": 3}}
    assert second == {
        "before": {"weight": 3, "max_in_flight": None},
        "after": {"weight": 4, "max_in_flight": 2},
    }
    assert webhooks == {
        "before": {"webhooks": []},
        "after": {"webhooks": ["https://hooks.example.com/…"]},
    }


async def test_secrets_are_never_recorded(app: AsyncApp) -> None:
    await app.schedule(
        "hook",
        target={
            "type": "http",
            "url": "https://example.com/x",
            "headers": {"Authorization": "tok-1"},
        },
        cron="* * * * *",
        allow_unregistered=True,
    )
    _, secret = await app.create_key("admin")
    await app.tenant_alert_webhooks_set(["https://hooks.example.com/services/T0/SECRET"])
    text = json.dumps([r.change for r in await records(app)])
    assert "tok-1" not in text
    assert secret not in text
    assert secret[3:20] not in text
    assert "SECRET" not in text
    assert await app.webhook_secret() not in text


async def test_filters_and_pages(app: AsyncApp, clock: FrozenClock) -> None:
    start = clock.now()
    for _ in range(3):
        clock.advance(timedelta(seconds=10))
        await app.trigger("nightly")
    other = app.for_tenant("default", actor="bob")
    await other.pause("nightly")
    assert [r.actor for r in await records(app, actor="bob")] == ["bob"]
    assert len(await records(app, action="triggered", subject="nightly")) == 3
    job = await app.get("nightly")
    assert len(await records(app, subject=str(job.id))) == 5  # created, 3 triggers, paused
    window = await records(
        app, since=start + timedelta(seconds=15), until=start + timedelta(seconds=25)
    )
    assert [r.action for r in window] == ["triggered"]
    first = await app.audit.find(limit=2)
    second = await app.audit.find(limit=2, cursor=first.next_cursor)
    third = await app.audit.find(limit=2, cursor=second.next_cursor)
    ids = [r.id for page in (first, second, third) for r in page.items]
    assert len(ids) == len(set(ids)) == 5
    assert third.next_cursor is None


async def test_a_tenant_reads_only_its_own_trail(app: AsyncApp) -> None:
    other = app.for_tenant("acme")
    await other.schedule("acme-job", task="duetime.noop", cron="* * * * *")
    assert [r.subject_name for r in await records(other)] == ["acme-job"]
    assert "acme-job" not in [r.subject_name for r in await records(app)]


async def test_retention_prunes_the_trail_with_history(app: AsyncApp, clock: FrozenClock) -> None:
    await app.trigger("nightly")
    clock.advance(timedelta(days=app.settings.retention_days + 1))
    await app.pause("nightly")
    await RetentionPruner(app.store, app.settings).run_once()
    assert [r.action for r in await records(app)] == ["paused"]


def test_the_default_actor_is_the_os_user() -> None:
    assert default_actor().startswith("python:")
    with pytest.raises(ValidationError):
        AsyncApp(actor="")


async def test_a_new_note_on_a_paused_job_is_recorded_once(app: AsyncApp) -> None:
    await app.pause("nightly", note="disk full", by="ana")
    await app.pause("nightly", note="disk full", by="ana")  # the same: nothing changes
    await app.pause("nightly", note="waiting for the vendor", by="ana")
    paused = [r for r in (await app.audit.find(action="paused")).items]
    assert len(paused) == 2
    assert paused[0].change is not None
    assert paused[0].change["after"]["note"] == "waiting for the vendor"
    assert paused[0].change["before"]["note"] == "disk full"


async def test_a_sync_records_its_declaration_once(app: AsyncApp) -> None:
    specs = [{"name": "declared-a", "task": "duetime.noop", "cron": "0 5 * * *"}]
    await app.lifecycle.sync(specs, source="deploy", dry_run=False)
    synced = (await app.audit.find(action="synced")).items
    assert len(synced) == 1
    assert synced[0].subject_name == "deploy"
    assert synced[0].change == {"after": {"source": "deploy", "declared": 1, "retire": []}}
