"""Jobs: upsert, get, list, status moves, delete — and tenant isolation."""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storekit import (
    OTHER_TENANT,
    TASK,
    TENANT,
    claim,
    claim_one,
    complete,
    completion,
    every_schedule,
    fill_planner,
    get_job,
    get_run,
    is_utc,
    job_params,
    list_runs,
    make_job,
    materialize,
    ref,
    running_run,
    s,
    scheduled_run,
    upsert,
)

from duetime import _json
from duetime._types import (
    DeliveryMode,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    RunState,
    Schedule,
    ScheduleKind,
)
from duetime.errors import Conflict, NotFound
from duetime.store import Store
from duetime.store.base import (
    JobListParams,
    JobRef,
    JobSetStatusParams,
    RunStartParams,
    RunTriggerParams,
)

# --- upsert and get ----------------------------------------------------------------------------


async def test_upsert_creates_a_job_with_every_field(store: Store, t0: datetime) -> None:
    schedule = Schedule(kind=ScheduleKind.CRON, cron="*/5 * * * *", tz="Europe/Paris")
    params = job_params(
        "nightly",
        next_fire_at=t0 + s(300),
        schedule=schedule,
        payload={"n": 1, "s": "é✓", "l": [1.5, None, True], "d": {"k": []}},
        priority=7,
        retry=RetryPolicy(max_attempts=5, backoff_base=0.5, backoff_factor=3.0, backoff_cap=90),
        timeout=12.5,
        delivery=DeliveryMode.AT_MOST_ONCE,
        queue="critical",
        tags=("billing", "eu"),
        metadata={"owner": "ops", "n": 3},
        partition=42,
        misfire_policy=MisfirePolicy.BACKFILL,
        misfire_grace=15.0,
        overlap_policy=OverlapPolicy.SERIALIZE,
    )
    job, created = await upsert(store, params)

    assert created is True
    assert job.id == params.job_id
    assert (job.tenant, job.name, job.task) == (TENANT, "nightly", TASK)
    assert job.payload == {"n": 1, "s": "é✓", "l": [1.5, None, True], "d": {"k": []}}
    assert job.schedule == schedule
    assert job.status is JobStatus.ACTIVE
    assert job.priority == 7
    assert job.retry == RetryPolicy(5, 0.5, 3.0, 90)
    assert job.timeout == 12.5
    assert job.misfire_policy is MisfirePolicy.BACKFILL
    assert job.misfire_grace == 15.0
    assert job.overlap_policy is OverlapPolicy.SERIALIZE
    assert job.delivery is DeliveryMode.AT_MOST_ONCE
    assert job.queue == "critical"
    assert job.tags == ("billing", "eu")
    assert job.metadata == {"owner": "ops", "n": 3}
    assert job.partition == 42
    assert job.next_fire_at == t0 + s(300)
    assert all(is_utc(at) for at in (job.next_fire_at, job.created_at, job.updated_at))

    assert await store.job_get(JobRef(TENANT, id=job.id)) == job
    assert await store.job_get(JobRef(TENANT, name="nightly")) == job


@pytest.mark.parametrize(
    "kind",
    [ScheduleKind.NOW, ScheduleKind.AT, ScheduleKind.CRON, ScheduleKind.EVERY],
)
async def test_every_schedule_kind_round_trips(
    store: Store, t0: datetime, kind: ScheduleKind
) -> None:
    at = t0 + timedelta(seconds=3, microseconds=123456)
    schedule = {
        ScheduleKind.NOW: Schedule(kind=kind, at=at),
        ScheduleKind.AT: Schedule(kind=kind, at=at),
        ScheduleKind.CRON: Schedule(kind=kind, cron="0 9 * * MON-FRI", tz="America/New_York"),
        ScheduleKind.EVERY: Schedule(
            kind=kind, every=timedelta(hours=1, microseconds=7), anchor=at
        ),
    }[kind]
    job = await make_job(store, f"j-{kind}", next_fire_at=at, schedule=schedule)
    stored = await get_job(store, job.id)
    assert stored.schedule == schedule
    assert stored.schedule.one_shot is schedule.one_shot
    assert stored.next_fire_at == at
    if schedule.at is not None:
        assert is_utc(stored.schedule.at)
    if schedule.anchor is not None:
        assert is_utc(stored.schedule.anchor)


async def test_next_fire_at_may_be_none(store: Store) -> None:
    job = await make_job(store, "idle", next_fire_at=None)
    assert (await get_job(store, job.id)).next_fire_at is None


async def test_reupsert_with_equivalent_schedule_keeps_next_fire_at_and_pending_runs(
    store: Store, t0: datetime
) -> None:
    run = await scheduled_run(store, t0, "j")
    before = await store.job_get(JobRef(TENANT, name="j"))
    assert before.next_fire_at == t0 + s(1)  # advanced by the materializer

    params = job_params(
        "j",
        next_fire_at=t0 + s(999),
        schedule=before.schedule,
        payload={"v": 2},
        priority=3,
        tags=("x",),
        job_id=uuid.uuid4(),
    )

    job, created = await upsert(store, params)

    assert created is False
    assert job.id == before.id  # the existing job, not the id of the request
    assert job.next_fire_at == t0 + s(1)
    assert job.schedule == before.schedule
    assert (job.payload, job.priority, job.tags) == ({"v": 2}, 3, ("x",))
    assert await get_job(store, before.id) == job
    kept = await get_run(store, run.id)
    assert kept.state is RunState.SCHEDULED
    assert kept.token == run.token


async def test_reupsert_with_changed_schedule_replaces_it_and_skips_pending_runs(
    store: Store, t0: datetime
) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await materialize(store, t0, planner=fill_planner(1), horizon=2)  # runs at t0, +1, +2
    started = await claim_one(store, t0, limit=1)  # due: started at once
    ahead = await claim_one(store, t0, limit=1, lookahead=1)  # t0+1, claimed ahead
    assert started.run.scheduled_for == t0
    assert started.run.started_at == t0
    assert ahead.run.scheduled_for == t0 + s(1)
    assert ahead.run.started_at is None

    new_schedule = every_schedule(t0 + s(60), 5)
    params = job_params("j", next_fire_at=t0 + s(60), schedule=new_schedule)
    updated, created = await upsert(store, replace(params, declared_at=t0 + s(0.5)))

    assert created is False
    assert updated.id == job.id
    assert updated.schedule == new_schedule
    assert updated.next_fire_at == t0 + s(60)
    # the runs not yet due, the one claimed ahead too, are withdrawn: deleted (decision 0019)
    runs = {r.scheduled_for: r for r in await list_runs(store, job_id=job.id)}
    assert list(runs) == [t0]
    assert not await store.run_start(RunStartParams(ahead.run.id, ahead.run.token, now=t0 + s(1)))
    # a run that already started is not "pending": it goes on
    still = runs[t0]
    assert still.state is RunState.RUNNING
    assert still.token == started.run.token


async def test_changed_schedule_leaves_manual_runs_and_other_jobs_alone(
    store: Store, t0: datetime
) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    other = await scheduled_run(store, t0, "other")
    manual, _ = await store.run_trigger(RunTriggerParams(ref(job), now=t0))
    await upsert(store, job_params("j", next_fire_at=t0 + s(60), schedule=every_schedule(t0, 60)))
    assert (await get_run(store, manual.id)).state is RunState.SCHEDULED
    assert (await get_run(store, other.id)).state is RunState.SCHEDULED


async def test_create_only_refuses_an_existing_name(store: Store, t0: datetime) -> None:
    job, created = await upsert(store, job_params("j", next_fire_at=t0, create_only=True))
    assert created
    with pytest.raises(Conflict):
        await upsert(
            store, job_params("j", next_fire_at=t0 + s(5), payload={"x": 1}, create_only=True)
        )
    assert await get_job(store, job.id) == job  # unchanged


async def test_names_are_unique_per_tenant_only(store: Store, t0: datetime) -> None:
    a = await make_job(store, "same", next_fire_at=t0, payload={"t": "a"})
    b = await make_job(store, "same", next_fire_at=t0, tenant=OTHER_TENANT, payload={"t": "b"})
    assert a.id != b.id
    assert (await store.job_get(JobRef(TENANT, name="same"))).payload == {"t": "a"}
    assert (await store.job_get(JobRef(OTHER_TENANT, name="same"))).payload == {"t": "b"}


async def test_a_tenant_cannot_reach_another_tenants_job(store: Store, t0: datetime) -> None:
    job = await make_job(store, "secret", next_fire_at=t0)
    with pytest.raises(NotFound):
        await store.job_get(JobRef(OTHER_TENANT, id=job.id))
    with pytest.raises(NotFound):
        await store.job_get(JobRef(OTHER_TENANT, name="secret"))
    with pytest.raises(NotFound):
        await store.job_set_status(
            JobSetStatusParams(JobRef(OTHER_TENANT, id=job.id), JobStatus.PAUSED, now=t0)
        )
    with pytest.raises(NotFound):
        await store.job_delete(JobRef(OTHER_TENANT, id=job.id))
    page = await store.job_list(JobListParams(tenant=OTHER_TENANT))
    assert page.items == []
    assert (await get_job(store, job.id)).status is JobStatus.ACTIVE


async def test_job_get_unknown(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.job_get(JobRef(TENANT, id=uuid.uuid4()))
    with pytest.raises(NotFound):
        await store.job_get(JobRef(TENANT, name="nope"))


# --- list ---------------------------------------------------------------------------------------


async def _names(store: Store, **kwargs) -> list[str]:
    page = await store.job_list(JobListParams(tenant=TENANT, **kwargs))
    return [j.name for j in page.items]


async def test_job_list_filters(store: Store, t0: datetime) -> None:
    await make_job(store, "report-daily", next_fire_at=t0, tags=("billing", "eu"))
    await make_job(store, "report-weekly", next_fire_at=t0, tags=("billing",))
    await make_job(store, "Report-upper", next_fire_at=t0, tags=("bill",))
    await make_job(store, "a_b", next_fire_at=t0, tags=("eu",))
    await make_job(store, "axb", next_fire_at=t0)
    await make_job(store, "a%c", next_fire_at=t0)
    await make_job(store, "abc", next_fire_at=t0)
    paused = await make_job(store, "report-paused", next_fire_at=t0, tags=("billing",))
    await store.job_set_status(JobSetStatusParams(ref(paused), JobStatus.PAUSED, now=t0))
    await make_job(store, "report-other-tenant", next_fire_at=t0, tenant=OTHER_TENANT)

    everything = await _names(store)
    assert sorted(everything) == sorted(
        [
            "report-daily",
            "report-weekly",
            "Report-upper",
            "a_b",
            "axb",
            "a%c",
            "abc",
            "report-paused",
        ]
    )
    assert sorted(await _names(store, name_prefix="report-")) == [
        "report-daily",
        "report-paused",
        "report-weekly",
    ]
    # the prefix is literal and case-sensitive: no LIKE wildcards
    assert await _names(store, name_prefix="a_") == ["a_b"]
    assert await _names(store, name_prefix="a%") == ["a%c"]
    assert await _names(store, name_prefix="nothing") == []
    # tags match whole elements
    assert sorted(await _names(store, tag="billing")) == [
        "report-daily",
        "report-paused",
        "report-weekly",
    ]
    assert await _names(store, tag="bil") == []
    assert sorted(await _names(store, tag="eu")) == ["a_b", "report-daily"]
    assert await _names(store, status=JobStatus.PAUSED) == ["report-paused"]
    assert len(await _names(store, status=JobStatus.ACTIVE)) == 7
    assert await _names(store, status=JobStatus.CANCELLED) == []
    assert sorted(
        await _names(store, status=JobStatus.ACTIVE, tag="billing", name_prefix="report-")
    ) == ["report-daily", "report-weekly"]


@pytest.mark.parametrize(("total", "limit"), [(23, 5), (10, 5), (3, 10), (0, 4)])
async def test_job_list_keyset_pagination(
    store: Store, t0: datetime, total: int, limit: int
) -> None:
    names = [f"job-{i:03d}" for i in range(total)]
    for name in reversed(names):
        await make_job(store, name, next_fire_at=t0)
    await make_job(store, "job-zzz", next_fire_at=t0, tenant=OTHER_TENANT)

    seen: list[str] = []
    after = None
    for _ in range(total + 2):
        page = await store.job_list(JobListParams(tenant=TENANT, limit=limit, after_name=after))
        assert len(page.items) <= limit
        seen.extend(j.name for j in page.items)
        if page.next_cursor is None:
            break
        assert len(page.items) == limit
        after = page.items[-1].name
    else:
        pytest.fail("pagination never ended")
    assert seen == names  # ordered by name, each once, none missing
    assert len(seen) == len(set(seen))


async def test_job_list_after_name_is_strict(store: Store, t0: datetime) -> None:
    for name in ("a", "b", "c"):
        await make_job(store, name, next_fire_at=t0)
    assert await _names(store, after_name="a") == ["b", "c"]
    assert await _names(store, after_name="aa") == ["b", "c"]
    assert await _names(store, after_name="c") == []


# --- status ---------------------------------------------------------------------------------------


async def _set(store: Store, job, status: JobStatus, now: datetime, **kwargs):
    return await store.job_set_status(JobSetStatusParams(ref(job), status, now=now, **kwargs))


async def test_pause_skips_scheduled_and_claimed_ahead_runs(store: Store, t0: datetime) -> None:
    """Paused at t0+1.5 s: the run claimed ahead for t0+1 s (its instant passed, not started)
    is skipped and fenced; those not yet due (t0+2 s, t0+3 s) are withdrawn: deleted."""
    job = await make_job(store, "j", next_fire_at=t0)
    await materialize(store, t0, planner=fill_planner(1), horizon=3)  # t0 .. t0+3
    started = await claim_one(store, t0, limit=1)
    ahead = await claim_one(store, t0, limit=1, lookahead=1)
    assert ahead.run.started_at is None

    paused = await _set(store, job, JobStatus.PAUSED, t0 + s(1.5))

    assert paused.status is JobStatus.PAUSED
    assert (await get_job(store, job.id)).status is JobStatus.PAUSED
    runs = {r.scheduled_for: r for r in await list_runs(store, job_id=job.id)}
    assert sorted(runs) == [t0, t0 + s(1)]
    fenced = runs[t0 + s(1)]
    assert (fenced.state, fenced.reason) == (RunState.SKIPPED, "paused")
    assert fenced.token > ahead.run.token
    assert fenced.lease_owner is None
    assert not await store.run_start(RunStartParams(ahead.run.id, ahead.run.token, now=t0 + s(1)))
    assert await complete(store, t0 + s(2), completion(ahead)) == [False]
    assert (await get_run(store, ahead.run.id)).state is RunState.SKIPPED
    # the run that had already started goes on
    assert runs[t0].state is RunState.RUNNING
    assert runs[t0].token == started.run.token
    # and a paused job is not materialized
    result = await materialize(store, t0 + s(10), planner=fill_planner(1), horizon=10)
    assert result.jobs == 0
    assert result.runs_created == 0


async def test_resume_sets_the_given_next_fire_at(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await _set(store, job, JobStatus.PAUSED, t0)
    resumed = await _set(store, job, JobStatus.ACTIVE, t0 + s(100), next_fire_at=t0 + s(120))
    assert resumed.status is JobStatus.ACTIVE
    assert resumed.next_fire_at == t0 + s(120)
    assert await get_job(store, job.id) == resumed
    result = await materialize(store, t0 + s(120))
    assert result.runs_created == 1
    (run,) = await list_runs(store, job_id=job.id)
    assert run.scheduled_for == t0 + s(120)


async def test_cancel_marks_pending_runs_cancelled(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await materialize(store, t0, planner=fill_planner(1), horizon=2)
    started = await claim_one(store, t0, limit=1)
    assert started.run.scheduled_for == t0
    ahead2 = await claim_one(store, t0, limit=1, lookahead=1)
    assert ahead2.run.started_at is None

    cancelled = await _set(store, job, JobStatus.CANCELLED, t0 + s(0.5))

    assert cancelled.status is JobStatus.CANCELLED
    runs = {r.scheduled_for: r for r in await list_runs(store, job_id=job.id)}
    assert runs[t0 + s(2)].state is RunState.CANCELLED
    assert runs[t0 + s(1)].state is RunState.CANCELLED
    assert runs[t0 + s(2)].reason is not None  # says why
    assert runs[t0 + s(1)].token > ahead2.run.token
    assert not await store.run_start(RunStartParams(ahead2.run.id, ahead2.run.token, now=t0 + s(1)))
    assert runs[t0].state is RunState.RUNNING
    result = await materialize(store, t0 + s(10), planner=fill_planner(1), horizon=10)
    assert result.jobs == 0
    assert await claim(store, t0 + s(10)) == []


async def test_paused_job_can_be_cancelled(store: Store, t0: datetime) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    await _set(store, job, JobStatus.PAUSED, t0)
    assert (await _set(store, job, JobStatus.CANCELLED, t0)).status is JobStatus.CANCELLED


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ((JobStatus.CANCELLED,), JobStatus.ACTIVE),
        ((JobStatus.CANCELLED,), JobStatus.PAUSED),
        ((JobStatus.PAUSED, JobStatus.CANCELLED), JobStatus.ACTIVE),
        ((), JobStatus.COMPLETED),
        ((JobStatus.PAUSED,), JobStatus.COMPLETED),
    ],
)
async def test_illegal_status_moves_conflict(
    store: Store, t0: datetime, path: tuple[JobStatus, ...], illegal: JobStatus
) -> None:
    job = await make_job(store, "j", next_fire_at=t0)
    for status in path:
        await _set(store, job, status, t0)
    before = await get_job(store, job.id)
    with pytest.raises(Conflict):
        await _set(store, job, illegal, t0 + s(1), next_fire_at=t0 + s(5))
    assert await get_job(store, job.id) == before


@pytest.mark.parametrize("target", [JobStatus.ACTIVE, JobStatus.PAUSED, JobStatus.CANCELLED])
async def test_completed_job_cannot_move(store: Store, t0: datetime, target: JobStatus) -> None:
    at = t0 + s(1)
    job = await make_job(
        store, "once", next_fire_at=at, schedule=Schedule(kind=ScheduleKind.AT, at=at)
    )
    await materialize(store, at)
    claimed = await claim_one(store, at)
    assert await complete(store, at + s(1), completion(claimed, completes_job=True)) == [True]
    assert (await get_job(store, job.id)).status is JobStatus.COMPLETED
    with pytest.raises(Conflict):
        await _set(store, job, target, at + s(2), next_fire_at=at + s(10))
    assert (await get_job(store, job.id)).status is JobStatus.COMPLETED


async def test_set_status_of_unknown_job(store: Store, t0: datetime) -> None:
    with pytest.raises(NotFound):
        await store.job_set_status(
            JobSetStatusParams(JobRef(TENANT, id=uuid.uuid4()), JobStatus.PAUSED, now=t0)
        )
    with pytest.raises(NotFound):
        await store.job_set_status(
            JobSetStatusParams(JobRef(TENANT, name="nope"), JobStatus.PAUSED, now=t0)
        )


async def test_set_status_by_name(store: Store, t0: datetime) -> None:
    job = await make_job(store, "by-name", next_fire_at=t0)
    paused = await store.job_set_status(
        JobSetStatusParams(JobRef(TENANT, name="by-name"), JobStatus.PAUSED, now=t0)
    )
    assert paused.id == job.id
    assert paused.status is JobStatus.PAUSED


# --- delete -------------------------------------------------------------------------------------


async def test_delete_removes_the_job_and_its_runs(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0, "doomed")
    keep = await scheduled_run(store, t0 + s(1), "kept")
    await store.job_delete(JobRef(TENANT, name="doomed"))
    with pytest.raises(NotFound):
        await store.job_get(JobRef(TENANT, id=run.job_id))
    with pytest.raises(NotFound):
        await get_run(store, run.id)
    assert [r.id for r in await list_runs(store)] == [keep.id]
    with pytest.raises(NotFound):
        await store.job_delete(JobRef(TENANT, name="doomed"))
    # the name is free again
    await make_job(store, "doomed", next_fire_at=t0)


async def test_delete_removes_attempts_and_skips_too(store: Store, t0: datetime) -> None:
    claimed = await running_run(store, t0, "j")
    assert await complete(store, t0 + s(1), completion(claimed)) == [True]
    await store.job_delete(JobRef(TENANT, id=claimed.run.job_id))
    # gone for every reader
    with pytest.raises(NotFound):
        await get_run(store, claimed.run.id)
    with contextlib.suppress(NotFound):
        assert await store.attempts_list(TENANT, claimed.run.id) == []


# --- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"s": "nul\x00byte"}, id="nul-char"),
        pytest.param({"f": 1e20, "g": 7.205759403792155e16}, id="big-floats"),
        pytest.param([1.5e300, -2.5e-300, 0.1], id="float-extremes"),
        pytest.param({"i": 2**63 - 1, "n": -(2**63)}, id="int64"),
        pytest.param({"u": "ünïcødé ✓ 𝄞", "e": "", "q": '"\\/'}, id="text"),
    ],
)
async def test_payload_round_trips_exactly(store: Store, t0: datetime, payload) -> None:
    """Payloads are JSON: what goes in comes out — same values, same types — in the job, its
    scheduled runs and its triggered runs."""
    job = await make_job(store, "j", next_fire_at=t0, payload=payload)
    await materialize(store, t0)
    manual, _ = await store.run_trigger(
        RunTriggerParams(ref(job), payload=_json.dumps(payload), now=t0)
    )
    (scheduled,) = [r for r in await list_runs(store, job_id=job.id) if r.id != manual.id]
    for got in (
        (await get_job(store, job.id)).payload,
        (await get_run(store, scheduled.id)).payload,
        (await get_run(store, manual.id)).payload,
    ):
        assert got == payload
        assert _canonical(got) == _canonical(payload)  # types too: a float stays a float


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# --- round trips (property) -----------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    # |x| < 1e15: larger floats are covered by test_payload_round_trips_exactly
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15)
    | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=12,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(
    name=st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
        min_size=1,
        max_size=40,
    ),
    payload=_json_values,
    metadata=st.dictionaries(_text, _json_values, max_size=4),
    tags=st.lists(_text.filter(bool), max_size=4, unique=True),
    priority=st.integers(min_value=-(2**31), max_value=2**31 - 1),
)
async def test_job_fields_round_trip(
    store: Store, name: str, payload, metadata, tags, priority: int
) -> None:
    t = datetime(2024, 3, 31, 1, 30, 0, 1, tzinfo=UTC)
    params = job_params(
        name, next_fire_at=t, payload=payload, metadata=metadata, tags=tags, priority=priority
    )
    job, _ = await upsert(store, params)
    for got in (job, await store.job_get(JobRef(TENANT, name=name))):
        assert got.name == name
        assert got.payload == payload
        assert got.metadata == metadata
        assert got.tags == tuple(tags)
        assert got.priority == priority
        assert got.next_fire_at == t
    if tags:
        page = await store.job_list(JobListParams(tenant=TENANT, tag=tags[0], limit=1000))
        assert job.id in {j.id for j in page.items}
