"""The planner within a job's bounds (issue 16, item 5), pure: ``start_at`` moves the first
occurrence up, ``end_at`` cuts the plan and completes it, ``max_runs`` caps the runs (misfire
backfill included), and the bounded previews agree."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

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
from duetime.errors import ValidationError
from duetime.scheduler.bounds import Bounds, bounded_first, validated_bounds
from duetime.scheduler.planner import plan_job
from duetime.store.base import PlannedRun

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
EVERY_MINUTE = Schedule(ScheduleKind.EVERY, every=MINUTE, anchor=T0)


def job(
    next_fire_at: datetime | None = T0,
    *,
    policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    runs_created: int = 0,
) -> Job:
    return Job(
        id=uuid.uuid4(),
        tenant="t",
        name="j",
        task="duetime.noop",
        payload=None,
        schedule=EVERY_MINUTE,
        status=JobStatus.ACTIVE,
        priority=0,
        retry=RetryPolicy(),
        timeout=None,
        misfire_policy=policy,
        misfire_grace=60.0,
        overlap_policy=OverlapPolicy.SKIP,
        delivery=DeliveryMode.AT_LEAST_ONCE,
        queue="default",
        tags=(),
        metadata={},
        partition=0,
        next_fire_at=next_fire_at,
        created_at=T0 - timedelta(days=1),
        updated_at=T0 - timedelta(days=1),
        start_at=start_at,
        end_at=end_at,
        max_runs=max_runs,
        runs_created=runs_created,
    )


def instants(plan_runs: list[PlannedRun]) -> list[timedelta]:
    return [r.scheduled_for - T0 for r in plan_runs]


def test_an_unbounded_plan_is_unchanged() -> None:
    plan = plan_job(job(), T0, T0 + 3 * MINUTE)
    assert instants(plan.runs) == [timedelta(0), MINUTE, 2 * MINUTE, 3 * MINUTE]
    assert (plan.next_fire_at, plan.complete) == (T0 + 4 * MINUTE, False)


def test_start_at_moves_the_first_occurrence_up() -> None:
    plan = plan_job(job(start_at=T0 + 90 * timedelta(seconds=1)), T0, T0 + 3 * MINUTE)
    assert instants(plan.runs) == [2 * MINUTE, 3 * MINUTE]
    assert plan.skips == []  # not missed: never due


def test_end_at_cuts_the_plan_and_completes_it() -> None:
    plan = plan_job(job(end_at=T0 + 2 * MINUTE), T0, T0 + 10 * MINUTE)
    assert instants(plan.runs) == [timedelta(0), MINUTE, 2 * MINUTE]
    assert (plan.next_fire_at, plan.complete) == (None, True)


def test_a_plan_before_the_end_does_not_complete() -> None:
    plan = plan_job(job(end_at=T0 + 30 * MINUTE), T0, T0 + 2 * MINUTE)
    assert (plan.next_fire_at, plan.complete) == (T0 + 3 * MINUTE, False)


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_max_runs_caps_the_runs_missed_ones_included(policy: MisfirePolicy) -> None:
    """30 minutes behind: whatever the misfire policy, no more runs than are left."""
    now = T0 + 30 * MINUTE
    plan = plan_job(job(policy=policy, max_runs=5, runs_created=3), now, now + MINUTE)
    assert len(plan.runs) == 2
    assert plan.runs == sorted(plan.runs, key=lambda r: r.scheduled_for)


def test_backfill_stops_at_end_at() -> None:
    now = T0 + 30 * MINUTE
    plan = plan_job(job(policy=MisfirePolicy.BACKFILL, end_at=T0 + 4 * MINUTE), now, now)
    assert instants(plan.runs) == [k * MINUTE for k in range(5)]
    assert plan.complete


def test_no_run_left_plans_none() -> None:
    plan = plan_job(job(max_runs=2, runs_created=2), T0, T0 + 5 * MINUTE)
    assert plan.runs == []


def test_previews_stay_within_the_bounds() -> None:
    bounds = Bounds(start_at=T0 + 2 * MINUTE, end_at=T0 + 5 * MINUTE, runs_left=3)
    shown = [o.instant - T0 for o in bounds.preview(EVERY_MINUTE, T0, 10)]
    assert shown == [2 * MINUTE, 3 * MINUTE, 4 * MINUTE]
    ahead = bounds.preview(EVERY_MINUTE, T0, 10, created_before=T0 + 4 * MINUTE)
    assert [o.instant - T0 for o in ahead] == [2 * MINUTE, 3 * MINUTE, 4 * MINUTE, 5 * MINUTE]
    assert Bounds(runs_left=0).preview(EVERY_MINUTE, T0, 10) == []


def test_an_every_without_anchor_counts_from_start_at() -> None:
    requested = Schedule(ScheduleKind.EVERY, every=timedelta(hours=1))
    resolved = replace(requested, anchor=T0)
    start = T0 + timedelta(days=1, hours=9)
    bounds = validated_bounds(start, None, None)
    schedule, first = bounded_first(requested, resolved, T0, bounds, T0)
    assert (schedule.anchor, first) == (start, start)


def test_bound_values_are_checked() -> None:
    with pytest.raises(ValidationError) as raised:
        validated_bounds(T0, T0, None)
    assert raised.value.field == "end_at"
    east = timezone(timedelta(hours=5))
    with pytest.raises(ValidationError) as out_of_range:  # before year 1 in UTC
        validated_bounds(datetime.min.replace(tzinfo=east), None, None)
    assert out_of_range.value.field == "start_at"


def test_backfill_records_the_missed_occurrences_past_max_runs() -> None:
    """Missed ones the cut drops are a skip (``max_runs``), not silently gone; older ones than
    ``max_backfill`` keep their misfire skip."""
    now = T0 + 30 * MINUTE  # occurrences T0 .. T0+28 min are missed (60 s grace)
    backlog = replace(job(policy=MisfirePolicy.BACKFILL, max_runs=3), max_backfill=10)
    plan = plan_job(backlog, now, now)
    assert instants(plan.runs) == [19 * MINUTE, 20 * MINUTE, 21 * MINUTE]
    assert [(s.first - T0, s.last - T0, s.count, s.reason) for s in plan.skips] == [
        (timedelta(0), 18 * MINUTE, 19, "misfire_backfill"),
        (22 * MINUTE, 28 * MINUTE, 7, "max_runs"),
    ]
