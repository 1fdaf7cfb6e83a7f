"""The app's job lifecycle (decision 0023) on both stores with a frozen clock: a pause that
ends by itself (the leader's lifecycle pass, recorded), the pause note's checks, and declared
jobs kept in sync by ``app.sync`` (dry run first, retire by pausing or deleting, never a job
another source or the program's other calls made)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from duetime._clock import FrozenClock
from duetime._types import JobStatus
from duetime.app.lifecycle import LifecyclePass, SyncPlan
from duetime.errors import NotFound, ValidationError
from duetime.registration import JobSpec
from duetime.testing import FrozenApp


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[FrozenApp]:
    opened = FrozenApp(store_url, clock=clock)
    async with opened:
        yield opened


def lifecycle(app: FrozenApp) -> LifecyclePass:
    return LifecyclePass(app.store, lambda tenant: app.for_tenant(tenant, actor="duetime").jobs)


async def test_a_pause_until_an_instant_ends_by_itself_and_is_recorded(
    app: FrozenApp, clock: FrozenClock, t0: datetime
) -> None:
    job = await app.schedule("hourly", task="duetime.noop", cron="0 * * * *")
    until = t0 + timedelta(hours=5, minutes=30)
    paused = await app.pause("hourly", note="upstream outage", by="ana", until=until)
    assert paused.pause is not None
    assert paused.pause.until == until
    clock.advance(timedelta(hours=5))
    assert await lifecycle(app).run_once() == (0, 0)
    assert (await app.get(job.id)).status is JobStatus.PAUSED
    clock.set(until)
    assert await lifecycle(app).run_once() == (1, 0)
    resumed = await app.get(job.id)
    assert resumed.status is JobStatus.ACTIVE
    assert resumed.pause is None
    # picks up at its next occurrence after the resume, not the hours it was paused
    assert resumed.next_fire_at == (until + timedelta(hours=1)).replace(minute=0)
    events = await app.job_history(job.id)
    assert [(e.kind, e.actor) for e in events[:1]] == [("auto_resumed", "duetime")]
    assert events[1].kind == "paused"
    assert events[1].detail["note"] == "upstream outage"
    assert await lifecycle(app).run_once() == (0, 0)


async def test_pause_notes_are_checked_where_they_are_wrong(app: FrozenApp, t0: datetime) -> None:
    await app.schedule("j", task="duetime.noop", cron="0 * * * *")
    with pytest.raises(ValidationError, match=r"until: .* is not in the future"):
        await app.pause("j", until=t0)
    with pytest.raises(ValidationError, match="until: must be timezone-aware"):
        await app.pause("j", until=datetime(2030, 1, 1))
    with pytest.raises(ValidationError, match="note: is 1001 characters"):
        await app.pause("j", note="x" * 1001)
    with pytest.raises(ValidationError, match="by: 'duetime' is reserved"):
        await app.pause("j", by="duetime")
    with pytest.raises(ValidationError, match="after: must be a whole number"):
        await app.pause_on_failure("j", 0)
    with pytest.raises(NotFound):
        await app.job_history("nope")
    assert (await app.get("j")).status is JobStatus.ACTIVE


def specs(*names: str) -> list[JobSpec]:
    return [JobSpec(name=n, task="duetime.noop", cron="0 3 * * *") for n in names]


async def test_sync_plans_first_then_retires_only_its_own_jobs(app: FrozenApp) -> None:
    await app.schedule("by-hand", task="duetime.noop", cron="0 * * * *")
    await app.schedule("shared", task="duetime.noop", cron="0 * * * *")
    plan = await app.sync(specs("a", "b", "shared"), source="billing")
    assert plan == SyncPlan("billing", create=["a", "b"], adopt=["shared"], dry_run=True)
    with pytest.raises(NotFound):
        await app.get("a")  # a dry run writes nothing
    done = await app.sync(specs("a", "b", "shared"), source="billing", dry_run=False)
    assert done.create == ["a", "b"]
    assert not done.dry_run
    assert (await app.get("shared")).declared_source == "billing"
    # "b" is no longer declared: paused with a note; "by-hand" was never this source's
    plan = await app.sync(specs("a", "shared"), source="billing")
    assert plan.update == ["a", "shared"]
    assert plan.retire == ["b"]
    await app.sync(specs("a", "shared"), source="billing", dry_run=False)
    retired = await app.get("b")
    assert retired.status is JobStatus.PAUSED
    assert retired.pause is not None
    assert retired.pause.note == "no longer declared by billing"
    assert (await app.get("by-hand")).status is JobStatus.ACTIVE
    assert (await app.job_history("b"))[0].kind == "retired"
    # another source sees none of them
    assert (await app.sync([], source="reports")).retire == []
    # declared again: the retired job is resumed
    await app.sync(specs("a", "b", "shared"), source="billing", dry_run=False)
    assert (await app.get("b")).status is JobStatus.ACTIVE
    # retire by deleting
    plan = await app.sync(specs("a"), source="billing", retire="delete", dry_run=False)
    assert plan.retire == ["b", "shared"]
    with pytest.raises(NotFound):
        await app.get("b")
    assert (await app.get("by-hand")).status is JobStatus.ACTIVE


async def test_sync_refuses_bad_input(app: FrozenApp) -> None:
    with pytest.raises(ValidationError, match="jobs: declared more than once: a"):
        await app.sync(specs("a", "a"))
    with pytest.raises(ValidationError, match="retire"):
        await app.sync(specs("a"), retire="archive")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="source"):
        await app.sync(specs("a"), source=" ")
    bad = [*specs("good"), JobSpec(name="bad", task="duetime.noop", cron="61 * * * *")]
    for dry_run in (True, False):
        with pytest.raises(ValidationError, match=r"jobs\[1\]\.cron"):
            await app.sync(bad, dry_run=dry_run)
    with pytest.raises(NotFound):
        await app.get("good")  # validated before anything is written
