"""The scheduler's planner: which occurrences become runs, which are skipped (misfire)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from duetime._types import (
    DeliveryMode,
    Job,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    Schedule,
    ScheduleKind,
)
from duetime.scheduler.planner import BACKFILL_RATE, plan_job

MAX_BACKFILL = 100

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def job(
    schedule: Schedule,
    next_fire_at: datetime | None,
    *,
    policy: MisfirePolicy,
    grace: float = 60.0,
    created_at: datetime = T0 - timedelta(days=1),
) -> Job:
    return Job(
        id=uuid.uuid4(),
        tenant="t",
        name="j",
        task="duetime.noop",
        payload=None,
        schedule=schedule,
        status=JobStatus.ACTIVE,
        priority=0,
        retry=RetryPolicy(),
        timeout=None,
        misfire_policy=policy,
        misfire_grace=grace,
        overlap_policy=OverlapPolicy.SKIP,
        delivery=DeliveryMode.AT_LEAST_ONCE,
        queue="default",
        tags=(),
        metadata={},
        partition=0,
        next_fire_at=next_fire_at,
        created_at=created_at,
        updated_at=created_at,
    )


EVERY_SECOND = Schedule(ScheduleKind.CRON, cron="* * * * * *", tz="UTC")


def test_on_time_job_gets_every_occurrence_up_to_the_horizon() -> None:
    plan = plan_job(job(EVERY_SECOND, T0, policy=MisfirePolicy.FIRE_ONCE), T0, T0 + 10 * SECOND)
    assert [r.scheduled_for for r in plan.runs] == [T0 + i * SECOND for i in range(11)]
    assert all(r.available_at == r.scheduled_for for r in plan.runs)
    assert plan.skips == []
    assert plan.next_fire_at == T0 + 11 * SECOND


def test_occurrences_within_grace_are_not_missed() -> None:
    now = T0 + 60 * SECOND
    plan = plan_job(job(EVERY_SECOND, T0, policy=MisfirePolicy.SKIP), now, now)
    assert len(plan.runs) == 61
    assert plan.skips == []


@pytest.mark.parametrize(
    ("policy", "fired_missed"),
    [(MisfirePolicy.SKIP, 0), (MisfirePolicy.FIRE_ONCE, 1), (MisfirePolicy.BACKFILL, MAX_BACKFILL)],
)
def test_outage_is_judged_by_the_misfire_policy(policy: MisfirePolicy, fired_missed: int) -> None:
    # down for an hour: 3600 - 10 occurrences are older than the 10 s grace
    now = T0 + 3600 * SECOND
    plan = plan_job(job(EVERY_SECOND, T0, policy=policy, grace=10), now, now)
    missed = 3590
    runs = [r.scheduled_for for r in plan.runs]
    within_grace = [now - i * SECOND for i in range(10, -1, -1)]
    assert runs[fired_missed:] == within_grace
    assert runs[:fired_missed] == [
        T0 + (missed - fired_missed + i) * SECOND for i in range(fired_missed)
    ]
    (skip,) = plan.skips
    assert skip.count == missed - fired_missed
    assert skip.first == T0
    assert skip.last == T0 + (missed - fired_missed - 1) * SECOND
    assert skip.reason == f"misfire_{policy}"
    # every occurrence is accounted for: a run or a recorded skip
    assert len(runs) + skip.count == 3601


def test_one_shot_registered_in_the_past_fires_instead_of_misfiring() -> None:
    at = T0 - timedelta(hours=2)
    schedule = Schedule(ScheduleKind.AT, at=at)
    plan = plan_job(job(schedule, at, policy=MisfirePolicy.SKIP, created_at=T0), T0, T0)
    assert [r.scheduled_for for r in plan.runs] == [at]
    assert plan.next_fire_at is None


def test_one_shot_missed_during_an_outage_follows_the_policy() -> None:
    at = T0 - timedelta(hours=2)
    schedule = Schedule(ScheduleKind.AT, at=at)
    created = at - timedelta(days=1)
    plan = plan_job(job(schedule, at, policy=MisfirePolicy.SKIP, created_at=created), T0, T0)
    assert plan.runs == []
    assert plan.skips[0].count == 1
    assert plan.next_fire_at is None


def test_every_schedule_steps_from_its_anchor() -> None:
    schedule = Schedule(ScheduleKind.EVERY, every=timedelta(seconds=3), anchor=T0)
    plan = plan_job(job(schedule, T0, policy=MisfirePolicy.FIRE_ONCE), T0, T0 + 10 * SECOND)
    assert [r.scheduled_for for r in plan.runs] == [T0 + i * 3 * SECOND for i in range(4)]
    assert plan.next_fire_at == T0 + 12 * SECOND


def test_backfill_releases_missed_occurrences_at_a_limited_rate() -> None:
    now = T0 + 3600 * SECOND
    plan = plan_job(job(EVERY_SECOND, T0, policy=MisfirePolicy.BACKFILL, grace=10), now, now)
    missed = plan.runs[:MAX_BACKFILL]
    assert [r.available_at for r in missed] == [
        now + timedelta(seconds=i / BACKFILL_RATE) for i in range(MAX_BACKFILL)
    ]
    assert all(r.available_at == r.scheduled_for for r in plan.runs[MAX_BACKFILL:])
