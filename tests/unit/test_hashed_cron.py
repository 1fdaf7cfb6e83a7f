"""Burst smoothing: Jenkins-style ``H`` in the seconds, minute and hour fields (stable per seed,
evenly spread, errors naming the field), a job's hash seed, and per-job jitter."""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from duetime._config import Settings
from duetime._types import (
    DeliveryMode,
    Job,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    Schedule,
    ScheduleKind,
    cron_uses_hash,
    job_hash_seed,
)
from duetime.errors import ValidationError
from duetime.registration import JobSpec, build_upsert
from duetime.scheduler.planner import plan_job
from duetime.schedules import CronExpression, jitter_offset, next_fire_after
from duetime.schedules.cron import _parse_cached, hashed_value

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def fields(expr: str, seed: str | None = None) -> tuple[str, ...]:
    return CronExpression.parse(expr, "UTC", seed).fields


# --- the value: sha256, stable, spread -----------------------------------------------------------


def test_the_value_is_sha256_of_seed_field_and_item() -> None:
    digest = hashlib.sha256(b"acme\x1fnightly\x1fminute\x1f0").digest()
    expected = int.from_bytes(digest[:8], "big") % 60
    assert fields("H * * * *", "acme\x1fnightly")[1] == str(expected)


def test_the_same_seed_always_gives_the_same_schedule() -> None:
    seed = job_hash_seed("acme", "reports.daily", "H H * * *")
    assert seed == "acme\x1freports.daily"
    first = fields("H H * * *", seed)
    _parse_cached.cache_clear()  # parsing is cached: parse afresh
    assert fields("H H * * *", seed) == first
    assert fields("h h * * *", seed)[1:3] == first[1:3]  # case does not matter


def test_a_bare_expression_hashes_its_own_text() -> None:
    assert CronExpression.parse("H * * * *") == CronExpression.parse("H * * * *", seed="H * * * *")
    assert CronExpression.parse("H * * * *").seed == "H * * * *"
    assert CronExpression.parse("0 * * * *", seed="ignored").seed is None  # no H: no seed


@pytest.mark.parametrize(("expr", "index", "buckets"), [("H * * * *", 1, 60), ("0 H * * *", 2, 24)])
def test_100_000_jobs_spread_evenly(expr: str, index: int, buckets: int) -> None:
    """100,000 hourly (daily) jobs over the 60 minutes (24 hours): a chi-square test at the
    0.1% level and no bucket more than 10% above the mean."""
    counts = Counter(
        hashed_value(f"tenant-{n % 7}\x1fjob-{n}", index, 0) % buckets for n in range(100_000)
    )
    expected = 100_000 / buckets
    chi2 = sum((counts[b] - expected) ** 2 / expected for b in range(buckets))
    critical = {60: 95.75, 24: 49.73}[buckets]  # chi-square 0.999 quantile, buckets-1 dof
    assert chi2 < critical
    assert max(counts.values()) < expected * 1.10
    assert min(counts.values()) > expected * 0.90


def test_seeds_differ_by_tenant_and_name() -> None:
    seeds = [job_hash_seed(t, n, "H") for t in ("a", "b") for n in ("x", "y", "z")]
    values = {fields("H H * * *", seed)[1:3] for seed in seeds}
    assert len(values) >= 5
    assert job_hash_seed("a/b", "c", "H") != job_hash_seed("a", "b/c", "H")


def test_fields_are_hashed_independently() -> None:
    """The minute and the hour of one job do not move together."""
    pairs = Counter(
        (hashed_value(f"s{n}", 1, 0) % 60, hashed_value(f"s{n}", 2, 0) % 24) for n in range(20_000)
    )
    assert len(pairs) > 1400  # of 1440: all but a handful of (minute, hour) pairs occur


# --- the forms -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [f"seed-{n}" for n in range(40)])
def test_each_form_stays_in_its_range(seed: str) -> None:
    second, minute, hour = fields("H H(10-19) H(2-4) * * *", seed)[:3]
    assert 0 <= int(second) <= 59
    assert 10 <= int(minute) <= 19
    assert 2 <= int(hour) <= 4
    step = fields("H/15 * * * *", seed)[1]
    start, _, rest = step.partition("-")
    assert 0 <= int(start) < 15
    assert rest == "59/15"
    ranged = fields("0 H(9-17)/4 * * *", seed)[2]
    start, _, rest = ranged.partition("-")
    assert 9 <= int(start) < 13
    assert rest == "17/4"


def test_step_forms_fire_every_n_from_the_offset() -> None:
    expr = CronExpression.parse("H/15 * * * *", seed="x")
    offset = int(expr.fields[1].split("-")[0])
    fires = [T0]
    for _ in range(5):
        nxt = expr.next_after(fires[-1])
        assert nxt is not None
        fires.append(nxt)
    assert [f.minute for f in fires[1:]] == [(offset + 15 * k) % 60 for k in range(5)]


def test_h_in_a_list_and_with_a_range_wider_than_the_step() -> None:
    minute = fields("H(0-29),H(30-59) * * * *", "s")[1]
    low, high = (int(v) for v in minute.split(","))
    assert 0 <= low <= 29 < 30 <= high <= 59
    assert fields("0 H/90 * * *", "s")[2].endswith("-23/90")  # one value a day


def test_an_h_field_is_fixed_time_for_dst() -> None:
    assert not CronExpression.parse("H H * * *", seed="s").wildcard
    assert CronExpression.parse("H * * * *", seed="s").wildcard  # the hour field is '*'


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 H * *", "day-of-month field 'H' is invalid: 'H' is only allowed in the second"),
        ("0 0 * H *", "month field 'H' is invalid"),
        ("0 0 * * H", "day-of-week field 'H' is invalid"),
        ("H(50-10) * * * *", "minute field 'H(50-10)' is invalid: 'H(50-10)': range 50-10 runs"),
        ("0 H(0-24) * * *", "hour field 'H(0-24)' is invalid: 'H(0-24)': 24 is out of range 0-23"),
        ("H(0-60) * * * * *", "second field 'H(0-60)' is invalid"),
        ("H/0 * * * *", "minute field 'H/0' is invalid: 'H/0': step must be at least 1"),
        ("H(1-2 * * * *", "minute field 'H(1-2' is invalid: 'H(1-2': H takes the forms"),
        ("HX * * * *", "minute field 'HX' is invalid: 'HX': H takes the forms"),
        ("H-5 * * * *", "minute field 'H-5' is invalid"),
        ("5,H/x * * * *", "minute field '5,H/x' is invalid: 'H/X': H takes the forms"),
    ],
)
def test_errors_name_the_field(expr: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        CronExpression.parse(expr, "UTC", "seed")
    assert info.value.field == "cron"
    assert message in str(info.value)


def test_names_with_an_h_are_not_hashes() -> None:
    assert not cron_uses_hash("0 0 * * THU")
    assert not cron_uses_hash("@hourly")
    assert cron_uses_hash("H * * * *")
    assert fields("0 0 * * THU", "s")[5] == "THU"


# --- a job's seed --------------------------------------------------------------------------------


def test_registration_gives_a_cron_job_its_seed() -> None:
    params = build_upsert(
        JobSpec(name="nightly", task="t", cron="H H(0-5) * * *"),
        tenant="acme",
        settings=Settings(),
        now=T0,
    )
    assert params.schedule.hash_seed == "acme\x1fnightly"
    assert params.next_fire_at == next_fire_after(params.schedule, T0)
    other = build_upsert(
        JobSpec(name="nightly", task="t", cron="H H(0-5) * * *"),
        tenant="globex",
        settings=Settings(),
        now=T0,
    )
    assert other.schedule.hash_seed == "globex\x1fnightly"
    plain = build_upsert(
        JobSpec(name="n", task="t", cron="0 0 * * *"), tenant="a", settings=Settings(), now=T0
    )
    assert plain.schedule.hash_seed is None


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(1001, id="too-high"),
        pytest.param(-1001, id="too-low"),
        pytest.param(True, id="bool"),
        pytest.param(1.5, id="fraction"),
    ],
)
def test_priorities_are_checked(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        build_upsert(
            JobSpec(name="n", task="t", now=True, priority=bad),  # type: ignore[arg-type]
            tenant="a",
            settings=Settings(),
            now=T0,
        )
    assert info.value.field == "priority"


# --- jitter --------------------------------------------------------------------------------------


def test_jitter_is_stable_within_its_window_and_spread() -> None:
    offsets = [jitter_offset("job-1", T0 + timedelta(minutes=k), 30.0) for k in range(2000)]
    assert offsets == [jitter_offset("job-1", T0 + timedelta(minutes=k), 30.0) for k in range(2000)]
    assert all(timedelta(0) <= o < timedelta(seconds=30) for o in offsets)
    per_5s = Counter(int(o.total_seconds() // 5) for o in offsets)
    assert min(per_5s.values()) > 2000 / 6 * 0.8
    assert jitter_offset("job-1", T0, 0.0) == timedelta(0)
    assert jitter_offset("job-1", T0, 30.0) != jitter_offset("job-2", T0, 30.0)


def _job(jitter: float, misfire: MisfirePolicy = MisfirePolicy.FIRE_ONCE) -> Job:
    return Job(
        id=uuid.UUID(int=7),
        tenant="acme",
        name="j",
        task="t",
        payload=None,
        schedule=Schedule(ScheduleKind.EVERY, every=timedelta(seconds=10), anchor=T0),
        status=JobStatus.ACTIVE,
        priority=0,
        retry=RetryPolicy(),
        timeout=None,
        misfire_policy=misfire,
        misfire_grace=60.0,
        overlap_policy=OverlapPolicy.ALLOW,
        delivery=DeliveryMode.AT_LEAST_ONCE,
        queue="default",
        tags=(),
        metadata={},
        partition=0,
        next_fire_at=T0,
        created_at=T0,
        updated_at=T0,
        jitter=jitter,
    )


def test_jitter_moves_only_available_at() -> None:
    plain = plan_job(_job(0.0), T0, T0 + timedelta(seconds=60))
    jittered = plan_job(_job(5.0), T0, T0 + timedelta(seconds=60))
    assert [r.scheduled_for for r in jittered.runs] == [r.scheduled_for for r in plain.runs]
    assert jittered.next_fire_at == plain.next_fire_at
    assert all(r.available_at == r.scheduled_for for r in plain.runs)
    moved = [r.available_at - r.scheduled_for for r in jittered.runs]
    assert all(timedelta(0) <= m < timedelta(seconds=5) for m in moved)
    assert len(set(moved)) > 1
    # two schedulers planning the same job agree
    assert plan_job(_job(5.0), T0, T0 + timedelta(seconds=60)) == jittered
