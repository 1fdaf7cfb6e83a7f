"""A schedule's bounds (issue 16, item 5): ``start_at``, ``end_at`` and ``max_runs`` — no
occurrence outside them fires, a job past them becomes ``completed``, the runs left are shown
and editable, and bad bounds are field errors. On both stores, with a frozen clock and the
scheduler's materialize and a worker's claim and completion driven directly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from duetime import AsyncApp
from duetime._clock import FrozenClock
from duetime._types import AttemptOutcome, Job, JobStatus, Run, RunState, RunTrigger
from duetime.errors import ValidationError
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from duetime.store.base import (
    RunCompletion,
    RunListParams,
    RunsClaimParams,
    RunsCompleteParams,
)

MINUTE = timedelta(minutes=1)


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, clock=clock, migrate=True) as opened:
        yield opened


async def tick(app: AsyncApp, clock: FrozenClock, *, limit: int = 500) -> int:
    """One scheduler pass at the clock's instant (10 s horizon): the runs it created."""
    result = await materialize(app.store, plan_job, horizon=10.0, limit=limit, now=clock.now())
    return result.runs_created


async def run_due(app: AsyncApp, now: datetime) -> list[Run]:
    """A worker claims the runs due at ``now`` and ends each (succeeded)."""
    claimed = await app.store.runs_claim(
        RunsClaimParams(
            worker_id="w1", tasks=("duetime.noop",), limit=100, lease_ttl=30.0, lookahead=0.0,
            now=now,
        )
    )  # fmt: skip
    completions = [
        RunCompletion(
            run_id=c.run.id,
            token=c.run.token,
            worker_id="w1",
            attempt=c.run.attempt,
            claimed_at=now,
            started_at=now,
            outcome=AttemptOutcome.SUCCEEDED,
            next_state=RunState.SUCCEEDED,
        )
        for c in claimed
    ]
    assert all(await app.store.runs_complete(RunsCompleteParams(completions, now=now)))
    return [c.run for c in claimed]


async def runs_of(app: AsyncApp, job: Job) -> list[Run]:
    page = await app.store.runs_list(RunListParams(tenant=app.tenant, job_id=job.id, limit=500))
    return sorted(page.items, key=lambda r: r.scheduled_for)


async def scheduled_runs(app: AsyncApp, job: Job) -> list[Run]:
    return [r for r in await runs_of(app, job) if r.trigger is RunTrigger.SCHEDULE]


async def minutes(app: AsyncApp, clock: FrozenClock, count: int) -> None:
    """``count`` minutes of a job every minute: tick and run at each, then one minute on."""
    for _ in range(count):
        await tick(app, clock)
        await run_due(app, clock.now())
        clock.advance(60)


# --- start_at ---------------------------------------------------------------------------------


async def test_a_future_start_delays_the_first_fire(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    start = t0 + timedelta(hours=1)
    job = await app.schedule("poll", task="duetime.noop", every=60, start_at=start)
    assert job.next_fire_at == start  # an every without an anchor counts from start_at
    assert job.schedule.anchor == start
    assert await tick(app, clock) == 0
    clock.set(start - timedelta(seconds=30))
    assert await tick(app, clock) == 0
    clock.set(start)
    assert await tick(app, clock) == 1
    assert [r.scheduled_for for r in await runs_of(app, job)] == [start]


async def test_a_cron_start_is_its_first_occurrence_at_or_after_it(
    app: AsyncApp, clock: FrozenClock
) -> None:
    t0 = clock.now()
    start = t0 + timedelta(minutes=30, seconds=20)
    job = await app.schedule("poll", task="duetime.noop", cron="*/5 * * * *", start_at=start)
    assert job.next_fire_at is not None
    assert start <= job.next_fire_at < start + timedelta(minutes=5)
    assert job.next_fire_at.minute % 5 == 0


async def test_the_planner_moves_up_to_start_at(app: AsyncApp, clock: FrozenClock) -> None:
    """A start moved later on an active job: the occurrences before it are not fired (and not
    recorded as missed)."""
    job = await app.schedule("poll", task="duetime.noop", every=60)
    await minutes(app, clock, 2)
    start = clock.now() + timedelta(minutes=10)
    changed = await app.update_job("poll", start_at=start)
    assert changed.next_fire_at == start
    clock.set(start - timedelta(seconds=11))
    assert await tick(app, clock) == 0
    clock.set(start)
    assert await tick(app, clock) == 1
    assert [r.scheduled_for for r in await runs_of(app, job)][-1] == start
    assert await app.store.skips_list(app.tenant, job.id) == []


# --- end_at -----------------------------------------------------------------------------------


async def test_end_at_stops_firing_and_completes_the_job(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, end_at=t0 + 150 * SECOND)
    await minutes(app, clock, 2)  # +0 s, +60 s
    assert (await app.get("poll")).status is JobStatus.ACTIVE
    await tick(app, clock)  # +120 s: the last occurrence before end_at
    done = await app.get("poll")
    assert done.status is JobStatus.COMPLETED
    assert done.next_fire_at is None
    await run_due(app, clock.now())
    clock.advance(60)
    assert await tick(app, clock) == 0
    assert [r.scheduled_for - t0 for r in await runs_of(app, job)] == [
        timedelta(0),
        MINUTE,
        2 * MINUTE,
    ]
    assert all(r.state is RunState.SUCCEEDED for r in await runs_of(app, job))
    assert await app.next_fires("poll") == []
    why = await app.explain("poll")
    assert "no occurrence is left within its bounds (end_at" in why.summary
    assert why.next == []


async def test_end_at_is_inclusive(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, end_at=t0 + MINUTE)
    await minutes(app, clock, 3)
    assert [r.scheduled_for - t0 for r in await runs_of(app, job)] == [timedelta(0), MINUTE]
    assert (await app.get("poll")).status is JobStatus.COMPLETED


async def test_a_job_whose_end_passed_is_completed_at_once(
    app: AsyncApp, clock: FrozenClock
) -> None:
    t0 = clock.now()
    job = await app.schedule(
        "poll",
        task="duetime.noop",
        cron="0 3 * * *",
        start_at=t0 - timedelta(days=3),
        end_at=t0 - timedelta(days=2),
    )
    assert (job.status, job.next_fire_at) == (JobStatus.COMPLETED, None)
    again = await app.schedule(  # declared again at the next start: still completed
        "poll",
        task="duetime.noop",
        cron="0 3 * * *",
        start_at=t0 - timedelta(days=3),
        end_at=t0 - timedelta(days=2),
    )
    assert again.status is JobStatus.COMPLETED


async def test_backfill_stops_at_end_at(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    job = await app.schedule(
        "poll", task="duetime.noop", every=60, misfire="backfill", end_at=t0 + 5 * MINUTE
    )
    clock.advance(30 * 60)  # the scheduler was down for half an hour
    await tick(app, clock)
    assert [r.scheduled_for - t0 for r in await runs_of(app, job)] == [k * MINUTE for k in range(6)]
    assert (await app.get("poll")).status is JobStatus.COMPLETED


async def test_a_shorter_end_skips_runs_written_ahead(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, max_runs=10)
    await minutes(app, clock, 1)
    clock.advance(-5)  # +55 s: the +60 s run is written ahead
    assert await tick(app, clock) == 1
    changed = await app.update_job("poll", end_at=t0 + 30 * SECOND)
    assert changed.status is JobStatus.COMPLETED
    # the run written ahead, never due, is withdrawn: gone, its count given back
    assert [r.scheduled_for - t0 for r in await runs_of(app, job)] == [timedelta(0)]
    assert changed.runs_created == 1
    assert changed.runs_left == 9


# --- max_runs ---------------------------------------------------------------------------------


async def test_max_runs_gives_exactly_that_many_runs_then_completes(
    app: AsyncApp, clock: FrozenClock
) -> None:
    job = await app.schedule("poll", task="duetime.noop", every=60, max_runs=3)
    assert (job.max_runs, job.runs_created, job.runs_left) == (3, 0, 3)
    await app.trigger("poll")  # a manual run does not count
    await minutes(app, clock, 2)
    assert (await app.get("poll")).runs_left == 1
    await minutes(app, clock, 5)
    done = await app.get("poll")
    assert (done.status, done.runs_created, done.runs_left, done.next_fire_at) == (
        JobStatus.COMPLETED,
        3,
        0,
        None,
    )
    assert len(await scheduled_runs(app, job)) == 3
    assert len(await runs_of(app, job)) == 4
    await app.trigger("poll")  # a completed job can still be triggered
    assert len(await runs_of(app, job)) == 5


async def test_backfill_stops_at_max_runs(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, misfire="backfill", max_runs=4)
    clock.advance(30 * 60)
    await tick(app, clock)
    assert [r.scheduled_for - t0 for r in await runs_of(app, job)] == [k * MINUTE for k in range(4)]
    assert (await app.get("poll")).status is JobStatus.COMPLETED


async def test_the_runs_left_are_editable(app: AsyncApp, clock: FrozenClock) -> None:
    """Raising max_runs re-activates a completed job from its next occurrence after now (the
    ones in between were never due); lowering it below the runs made completes it."""
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, max_runs=2)
    await minutes(app, clock, 2)
    assert (await app.get("poll")).status is JobStatus.COMPLETED
    clock.advance(10 * 60 + 30)  # +12.5 min
    more = await app.update_job("poll", max_runs=4)
    assert (more.status, more.runs_left) == (JobStatus.ACTIVE, 2)
    assert more.next_fire_at == t0 + 13 * MINUTE
    clock.set(t0 + 13 * MINUTE)
    await minutes(app, clock, 4)
    done = await app.get("poll")
    assert (done.status, done.runs_created, done.runs_left) == (JobStatus.COMPLETED, 4, 0)
    assert [r.scheduled_for - t0 for r in await runs_of(app, job)] == [
        timedelta(0),
        MINUTE,
        13 * MINUTE,
        14 * MINUTE,
    ]
    fewer = await app.update_job("poll", max_runs=10)
    assert fewer.status is JobStatus.ACTIVE
    assert (await app.update_job("poll", max_runs=1)).status is JobStatus.COMPLETED


async def test_setting_max_runs_later_counts_from_then(app: AsyncApp, clock: FrozenClock) -> None:
    await app.schedule("poll", task="duetime.noop", every=60)
    await minutes(app, clock, 3)
    limited = await app.update_job("poll", max_runs=2)
    assert (limited.status, limited.runs_created, limited.runs_left) == (JobStatus.ACTIVE, 0, 2)
    unlimited = await app.update_job("poll", max_runs=None)
    assert (unlimited.max_runs, unlimited.runs_left) == (None, None)


async def test_extending_end_at_reactivates_a_completed_job(
    app: AsyncApp, clock: FrozenClock
) -> None:
    t0 = clock.now()
    await app.schedule("poll", task="duetime.noop", every=60, end_at=t0 + MINUTE)
    await minutes(app, clock, 3)
    assert (await app.get("poll")).status is JobStatus.COMPLETED
    extended = await app.update_job("poll", end_at=t0 + 10 * MINUTE)
    assert (extended.status, extended.next_fire_at) == (JobStatus.ACTIVE, t0 + 4 * MINUTE)


async def test_resuming_past_the_bounds_completes(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    await app.schedule("poll", task="duetime.noop", every=60, end_at=t0 + 5 * MINUTE)
    await app.pause("poll")
    clock.advance(10 * 60)
    resumed = await app.resume("poll")
    assert (resumed.status, resumed.next_fire_at) == (JobStatus.COMPLETED, None)


async def test_previews_honour_the_bounds(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    start = t0 + 10 * MINUTE
    await app.schedule(
        "poll", task="duetime.noop", every=60, start_at=start, end_at=start + 5 * MINUTE
    )
    fires = [o.instant for o in await app.next_fires("poll", 20)]
    assert fires == [start + k * MINUTE for k in range(6)]
    previewed = [o.instant for o in await app.preview_job("poll", count=20)]
    assert previewed == fires
    await app.update_job("poll", max_runs=2)
    assert [o.instant for o in await app.next_fires("poll", 20)] == fires[:2]


async def test_concurrent_schedulers_never_exceed_max_runs(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """Many schedulers materializing the same jobs at once (a backfill of 30 missed
    occurrences each): every job gets exactly its max_runs."""
    jobs = [
        await app.schedule(
            f"poll-{i}", task="duetime.noop", every=60, misfire="backfill", max_runs=7
        )
        for i in range(12)
    ]
    clock.advance(30 * 60)
    for _ in range(3):
        await asyncio.gather(*(tick(app, clock, limit=3) for _ in range(6)))
    for job in jobs:
        current = await app.get(job.id)
        assert len(await runs_of(app, job)) == 7
        assert (current.status, current.runs_created) == (JobStatus.COMPLETED, 7)


# --- field errors -----------------------------------------------------------------------------


SECOND = timedelta(seconds=1)
NOON = datetime(2030, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("bounds", "field"),
    [
        ({"start_at": NOON, "end_at": NOON}, "end_at"),
        ({"start_at": NOON, "end_at": NOON - SECOND}, "end_at"),
        ({"max_runs": 0}, "max_runs"),
        ({"max_runs": -3}, "max_runs"),
        ({"max_runs": True}, "max_runs"),
        ({"max_runs": 2.0}, "max_runs"),
        ({"start_at": datetime(2030, 1, 1)}, "start_at"),  # no time zone
        ({"end_at": "2030-01-01T00:00:00Z"}, "end_at"),
    ],
)
async def test_bad_bounds_are_field_errors(
    app: AsyncApp, bounds: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        await app.schedule("poll", task="duetime.noop", every=60, **bounds)  # type: ignore[arg-type]
    assert raised.value.field == field
    await app.schedule("poll", task="duetime.noop", every=60)
    with pytest.raises(ValidationError) as changed:
        await app.update_job("poll", **bounds)  # type: ignore[arg-type]
    assert changed.value.field == field


@pytest.mark.parametrize("bound", ["start_at", "end_at", "max_runs"])
async def test_a_one_shot_has_no_bounds(app: AsyncApp, bound: str) -> None:
    value: object = 3 if bound == "max_runs" else NOON
    with pytest.raises(ValidationError) as raised:
        await app.schedule("once", task="duetime.noop", at=NOON, **{bound: value})  # type: ignore[arg-type]
    assert raised.value.field == bound
    assert "recurring" in raised.value.reason


# --- runs withdrawn before their instant ------------------------------------------------------


async def test_a_run_withdrawn_by_a_pause_does_not_count(app: AsyncApp, clock: FrozenClock) -> None:
    job = await app.schedule("poll", task="duetime.noop", every=60, max_runs=3)
    await minutes(app, clock, 1)
    clock.advance(-5)  # +55 s: the +60 s run is written ahead, and counted
    assert await tick(app, clock) == 1
    assert (await app.get("poll")).runs_created == 2
    paused = await app.pause("poll")  # the +60 s run is skipped: it gives its count back
    assert (paused.runs_created, paused.runs_left) == (1, 2)
    clock.advance(5 * 60)
    await app.resume("poll")
    await minutes(app, clock, 5)
    assert len(await scheduled_runs(app, job)) == 3  # 3 ran; the one withdrawn is gone
    assert [r.state for r in await scheduled_runs(app, job)].count(RunState.SUCCEEDED) == 3
    assert (await app.get("poll")).status is JobStatus.COMPLETED


async def test_a_run_withdrawn_by_a_schedule_change_does_not_count(
    app: AsyncApp, clock: FrozenClock
) -> None:
    await app.schedule("poll", task="duetime.noop", every=60, max_runs=2)
    await minutes(app, clock, 1)
    clock.advance(-5)
    assert await tick(app, clock) == 1  # the second and last run, written ahead
    assert (await app.get("poll")).status is JobStatus.COMPLETED
    changed = await app.update_job("poll", every=120)  # withdraws it: one run is left
    assert (changed.status, changed.runs_created, changed.runs_left) == (JobStatus.ACTIVE, 1, 1)


# --- bulk registration ------------------------------------------------------------------------


async def test_bulk_registration_keeps_the_bounds(app: AsyncApp, clock: FrozenClock) -> None:
    t0 = clock.now()
    start = t0 + 10 * MINUTE
    specs = [
        {"name": f"b{i}", "task": "duetime.noop", "every": 60, "start_at": start, "max_runs": 2}
        for i in range(3)
    ]
    specs.append({"name": "over", "task": "duetime.noop", "every": 60, "end_at": t0 - 10 * MINUTE})
    assert await app.schedule_many(specs, allow_unregistered=True) == 4
    first = await app.get("b0")
    assert (first.start_at, first.max_runs, first.next_fire_at) == (start, 2, start)
    clock.set(start)
    for _ in range(4):
        await tick(app, clock)
        clock.advance(60)
    for name in ("b0", "b1", "b2"):
        job = await app.get(name)
        assert (job.status, len(await runs_of(app, job))) == (JobStatus.COMPLETED, 2)
    over = await app.get("over")  # created active, completed when its first instant came
    assert over.status is JobStatus.COMPLETED
    assert await runs_of(app, over) == []
    with pytest.raises(ValidationError) as raised:
        await app.schedule_many(
            [{"name": "once", "task": "duetime.noop", "at": clock.now(), "max_runs": 1}],
            allow_unregistered=True,
        )
    assert raised.value.field.endswith("max_runs")


async def test_an_earlier_start_fires_from_the_next_occurrence_after_now(
    app: AsyncApp, clock: FrozenClock
) -> None:
    t0 = clock.now()
    job = await app.schedule(
        "poll", task="duetime.noop", cron="* * * * *", start_at=t0 + 60 * MINUTE
    )
    assert job.next_fire_at == t0 + 60 * MINUTE
    clock.advance(5 * 60 + 30)
    earlier = await app.update_job("poll", start_at=t0)
    assert earlier.next_fire_at == t0 + 6 * MINUTE  # not the 5 occurrences in between
    assert (await app.update_job("poll", start_at=None)).next_fire_at == t0 + 6 * MINUTE
    clock.set(t0 + 6 * MINUTE)
    assert await tick(app, clock) == 1
    assert [r.scheduled_for for r in await runs_of(app, job)] == [t0 + 6 * MINUTE]


async def test_an_every_anchored_at_its_start_follows_it(app: AsyncApp, clock: FrozenClock) -> None:
    """An every created with start_at and no anchor is anchored there, and the anchor follows
    a changed start_at; an anchor given explicitly stays."""
    t0 = clock.now()
    await app.schedule("poll", task="duetime.noop", every=3600, start_at=t0 + 90 * MINUTE)
    earlier = await app.update_job("poll", start_at=t0 + 30 * MINUTE)
    assert earlier.schedule.anchor == earlier.next_fire_at == t0 + 30 * MINUTE
    await app.update_job("poll", every=3600, anchor=t0)
    fixed = await app.update_job("poll", start_at=t0 + 90 * MINUTE)
    assert fixed.schedule.anchor == t0
    assert fixed.next_fire_at == t0 + 120 * MINUTE


# --- review fixes: what gives a count back, the count after a schedule change, start anchors ----


async def fail_due(app: AsyncApp, now: datetime, retry_at: datetime) -> None:
    """A worker claims the runs due at ``now``; each fails and waits for a retry at
    ``retry_at``."""
    claimed = await app.store.runs_claim(
        RunsClaimParams(
            worker_id="w1", tasks=("duetime.noop",), limit=100, lease_ttl=30.0, lookahead=0.0,
            now=now,
        )
    )  # fmt: skip
    completions = [
        RunCompletion(
            run_id=c.run.id,
            token=c.run.token,
            worker_id="w1",
            attempt=c.run.attempt,
            claimed_at=now,
            started_at=now,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.SCHEDULED,
            available_at=retry_at,
            error_class="Boom",
            error_message="boom",
        )
        for c in claimed
    ]
    assert all(await app.store.runs_complete(RunsCompleteParams(completions, now=now)))


async def test_a_pause_gives_no_count_back_for_a_run_that_already_ran(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """max_runs=2: the first run fails and waits for its retry; a pause skips that retry but
    the occurrence came (it ran): resumed, only one more occurrence runs."""
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, max_runs=2)
    await tick(app, clock)
    await fail_due(app, t0, retry_at=t0 + 10 * MINUTE)
    clock.advance(30)
    paused = await app.pause("poll")
    assert (paused.runs_created, paused.runs_left) == (1, 1)
    await app.resume("poll")
    await minutes(app, clock, 6)
    assert [r.scheduled_for - t0 for r in await scheduled_runs(app, job)] == [timedelta(0), MINUTE]
    assert (await app.get("poll")).status is JobStatus.COMPLETED


async def test_a_pause_gives_no_count_back_for_a_run_due_before_it(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """A run due but not yet claimed when the job is paused: its occurrence came; it counts."""
    await app.schedule("poll", task="duetime.noop", every=60, max_runs=3)
    await tick(app, clock)
    clock.advance(30)
    paused = await app.pause("poll")
    assert (paused.runs_created, paused.runs_left) == (1, 2)


async def test_a_changed_schedule_with_a_lower_max_runs_keeps_the_runs_left(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """Every 60 s, max_runs=4, two runs created (+0 s, and +60 s written ahead); changed to
    every 120 s with max_runs=2 at +55 s: the +60 s run is withdrawn, so one run is left — the
    new schedule's first instant (+120 s) is the one the job had already."""
    t0 = clock.now()
    job = await app.schedule("poll", task="duetime.noop", every=60, anchor=t0, max_runs=4)
    await tick(app, clock)
    clock.advance(55)
    await tick(app, clock)
    before = await app.get("poll")
    assert (before.next_fire_at, before.runs_created) == (t0 + 2 * MINUTE, 2)
    changed = await app.update_job("poll", every=120, max_runs=2)
    assert (changed.status, changed.next_fire_at) == (JobStatus.ACTIVE, t0 + 2 * MINUTE)
    assert (changed.runs_created, changed.runs_left) == (1, 1)
    clock.advance(65)
    assert await tick(app, clock) == 1
    assert [r.scheduled_for - t0 for r in await scheduled_runs(app, job)] == [
        timedelta(0),
        2 * MINUTE,
    ]


def _hour_tomorrow(clock: FrozenClock) -> datetime:
    return (clock.now() + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)


async def test_cron_changed_to_every_counts_from_start_at(
    app: AsyncApp, clock: FrozenClock
) -> None:
    start = _hour_tomorrow(clock)
    await app.schedule("poll", task="duetime.noop", cron="0 * * * *", start_at=start)
    clock.advance(37)
    job = await app.schedule("poll", task="duetime.noop", every=3600, start_at=start)
    assert job.schedule.anchor == job.next_fire_at == start


async def test_an_every_declared_again_with_a_start_counts_from_it(
    app: AsyncApp, clock: FrozenClock
) -> None:
    start = _hour_tomorrow(clock)
    await app.schedule("poll", task="duetime.noop", every=3600)
    clock.advance(37)
    job = await app.schedule("poll", task="duetime.noop", every=3600, start_at=start)
    assert job.schedule.anchor == job.next_fire_at == start


async def test_an_every_changed_with_its_start_counts_from_the_new_start(
    app: AsyncApp, clock: FrozenClock
) -> None:
    start = _hour_tomorrow(clock)
    await app.schedule("poll", task="duetime.noop", every=3600, start_at=start)
    later = start + 60 * MINUTE
    job = await app.update_job("poll", every=7200, start_at=later)
    assert job.schedule.anchor == job.next_fire_at == later


async def test_a_start_removed_no_longer_holds_the_anchor(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """A job created with a start_at (and no anchor) counted from it; with start_at removed and
    an end before the old start, it counts from the change — not completed with no run."""
    start = _hour_tomorrow(clock) + timedelta(days=30)
    await app.schedule("poll", task="duetime.noop", every=3600, start_at=start)
    clock.advance(37)
    job = await app.update_job("poll", start_at=None, end_at=start - timedelta(days=10))
    assert job.status is JobStatus.ACTIVE
    assert job.schedule.anchor == clock.now()
    assert job.next_fire_at == clock.now() + 60 * MINUTE


async def test_an_anchor_given_stays_when_the_interval_changes(
    app: AsyncApp, clock: FrozenClock
) -> None:
    """An anchor other than start_at was given: a changed interval keeps it (update_job keeps
    the anchor unless given), the start only bounds it."""
    start = _hour_tomorrow(clock)
    anchor = start - 15 * MINUTE
    await app.schedule("poll", task="duetime.noop", every=3600, anchor=anchor, start_at=start)
    job = await app.update_job("poll", every=1800)
    assert job.schedule.anchor == anchor
    assert job.next_fire_at == anchor + 30 * MINUTE
