"""``BulkValidator``: bulk registration validates a spec as ``build_upsert`` would, while specs
that share everything but their name, schedule, payload and metadata share one shape."""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from duetime import ValidationError
from duetime._config import Settings
from duetime._types import RetryPolicy, ScheduleKind
from duetime.registration import BulkValidator, JobSpec, build_upsert, partition_of

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@pytest.fixture
def validator() -> BulkValidator:
    return BulkValidator(tenant="acme", settings=Settings(), now=NOW)


def spec(name: str = "job", **fields: object) -> JobSpec:
    values: dict[str, object] = {"task": "reports.build", "cron": "0 3 * * *", **fields}
    return JobSpec(name=name, **values)  # type: ignore[arg-type]


def test_a_job_is_what_build_upsert_makes_of_its_spec(validator: BulkValidator) -> None:
    fields = {"priority": 3, "queue": "night", "tags": ("a",), "payload": {"n": 1}}
    validator.job(spec("first", **fields))
    job = validator.job(spec("second", metadata={"team": "ops"}, **fields))
    alone = build_upsert(
        spec("second", metadata={"team": "ops"}, **fields),
        tenant="acme",
        settings=Settings(),
        now=NOW,
        create_only=True,
    )
    assert job.shape.name == "first"  # the shape is the first spec of its kind …
    assert (job.name, job.payload, job.metadata) == ("second", '{"n":1}', '{"team":"ops"}')
    assert (job.schedule, job.next_fire_at) == (alone.schedule, alone.next_fire_at)
    shared = ("task", "priority", "queue", "tags", "retry", "misfire_policy", "delivery")
    for name in shared:  # … and lends the rest
        assert getattr(job.shape, name) == getattr(alone, name), name


def test_specs_that_differ_in_a_shared_field_get_their_own_shape(
    validator: BulkValidator,
) -> None:
    night = validator.job(spec("a", queue="night"))
    day = validator.job(spec("b", queue="day"))
    night_again = validator.job(spec("c", queue="night"))
    assert (night.shape.queue, day.shape.queue) == ("night", "day")
    assert night_again.shape is night.shape


def test_a_value_equal_to_a_valid_one_but_of_another_type_is_still_checked(
    validator: BulkValidator,
) -> None:
    """``True == 1`` and they hash alike, but a priority may not be a bool."""
    validator.job(spec("one", priority=1))
    with pytest.raises(ValidationError) as caught:
        validator.job(spec("true", priority=True))
    assert caught.value.field == "priority"


def test_unhashable_shared_fields_are_validated_on_their_own(validator: BulkValidator) -> None:
    target = {"type": "http", "url": "http://127.0.0.1:9/hook"}
    first = validator.job(JobSpec(name="h1", target=target, cron="0 3 * * *"))
    second = validator.job(JobSpec(name="h2", target=target, cron="0 3 * * *"))
    assert first.shape.target is not None
    assert second.shape.name == "h2"
    listed = validator.job(spec("listed", tags=["x"]))  # type: ignore[arg-type]
    assert listed.shape.tags == ("x",)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "bad\nname"}, "name"),
        ({"payload": {1j}}, "payload"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": None}, "schedule"),
        ({"cron": "0 3 * * *", "at": NOW}, "schedule"),
        ({"tz": "Mars/Olympus"}, "tz"),
    ],
)
def test_a_job_of_a_known_shape_still_has_its_own_fields_checked(
    validator: BulkValidator, fields: dict[str, object], field: str
) -> None:
    validator.job(spec("shape"))
    name = str(fields.pop("name", "other"))
    with pytest.raises(ValidationError) as caught:
        validator.job(spec(name, **fields))
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"queue": "tab\tqueue"}, "queue"),
        ({"misfire_grace": math.nan}, "misfire_grace"),
    ],
)
def test_shared_fields_are_refused_with_their_name(
    validator: BulkValidator, fields: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        validator.job(spec("x", **fields))
    assert caught.value.field == field


def test_ids_are_time_ordered_version_7_uuids_with_their_partitions(
    validator: BulkValidator,
) -> None:
    before = time.time_ns() // 1_000_000
    jobs = [validator.job(spec(f"j{i}")) for i in range(1000)]
    after = time.time_ns() // 1_000_000
    ids = {job.job_id for job in jobs}
    assert len(ids) == 1000
    for job in jobs:
        assert job.job_id.version == 7
        assert job.job_id.variant == uuid.RFC_4122
        assert job.partition == partition_of(job.job_id)
        assert before <= job.job_id.int >> 80 <= after  # the creation's Unix milliseconds
    assert len({job.partition for job in jobs}) > 200  # spread over the 256 partitions


def test_every_at_and_now_schedules_are_resolved_per_job(validator: BulkValidator) -> None:
    every = validator.job(JobSpec(name="e", task="reports.build", every=60))
    at = validator.job(JobSpec(name="a", task="reports.build", at=timedelta(hours=1)))
    now = validator.job(JobSpec(name="n", task="reports.build", now=True))
    assert every.schedule.kind is ScheduleKind.EVERY
    assert every.schedule.anchor == NOW
    assert at.next_fire_at == NOW + timedelta(hours=1)
    assert now.next_fire_at == NOW
    assert len({every.shape.name, at.shape.name, now.shape.name}) == 1  # one shape for all


def test_a_job_registered_alone_gets_a_version_7_id() -> None:
    params = build_upsert(spec("alone"), tenant="acme", settings=Settings(), now=NOW)
    assert params.job_id.version == 7
    assert params.partition == partition_of(params.job_id)


def test_retry_values_are_stored_as_an_int_and_floats(validator: BulkValidator) -> None:
    job = validator.job(spec("decimal", retry=RetryPolicy(backoff_base=Decimal("1.5"))))
    retry = job.shape.retry
    assert retry == RetryPolicy(3, 1.5, 2.0, 600.0)
    assert type(retry.backoff_base) is float


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        (RetryPolicy(max_attempts=True), "retry.max_attempts"),
        (RetryPolicy(max_attempts=3.0), "retry.max_attempts"),  # type: ignore[arg-type]
        (RetryPolicy(backoff_base=math.nan), "retry.backoff"),
        (RetryPolicy(backoff_cap=math.inf), "retry.backoff"),
        (RetryPolicy(backoff_factor="2"), "retry.backoff"),  # type: ignore[arg-type]
    ],
)
def test_a_retry_value_of_the_wrong_kind_is_refused_after_an_equal_valid_one(
    validator: BulkValidator, retry: RetryPolicy, field: str
) -> None:
    """``RetryPolicy(max_attempts=True) == RetryPolicy(max_attempts=1)``: the shape of the
    first must not be lent to the second."""
    validator.job(spec("valid", retry=RetryPolicy(max_attempts=1)))
    validator.job(spec("valid-default", retry=RetryPolicy()))
    with pytest.raises(ValidationError) as caught:
        validator.job(spec("wrong", retry=retry))
    assert caught.value.field == field
