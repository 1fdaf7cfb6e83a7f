"""``schedule_many``: bulk registration through the Python API (SQLite file)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime import App, ValidationError
from duetime.registration import JobSpec


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with App(str(tmp_path / "bulk.db")) as opened:
        yield opened


def test_creates_jobs_from_specs_and_mappings(app: App) -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    specs = [
        JobSpec(name="daily", task="duetime.noop", cron="0 3 * * *"),
        {"name": "once", "task": "duetime.noop", "at": at, "tags": ["a"]},
        {"name": "tick", "task": "duetime.noop", "every": 60},
    ]
    assert app.schedule_many(specs, batch_size=2) == 3
    assert app.get("once").next_fire_at == at
    assert app.get("once").tags == ("a",)
    assert app.get("daily").schedule.cron == "0 3 * * *"
    assert app.get("tick").next_fire_at is not None


def test_existing_names_are_left_alone(app: App) -> None:
    app.schedule("daily", task="duetime.noop", cron="0 3 * * *")
    created = app.schedule_many(
        [
            {"name": "daily", "task": "duetime.noop", "cron": "0 4 * * *"},
            {"name": "new", "task": "duetime.noop", "cron": "0 4 * * *"},
        ]
    )
    assert created == 1
    assert app.get("daily").schedule.cron == "0 3 * * *"


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"name": "x", "task": "duetime.noop", "cron": "61 * * * *"}, "specs[3].cron"),
        ({"name": "x", "task": "duetime.noop"}, "specs[3].schedule"),
        ({"name": "x", "task": "no.such.task", "cron": "0 1 * * *"}, "specs[3].task"),
        ({"name": "x", "task": "duetime.noop", "at": datetime(2030, 1, 1)}, "specs[3].at"),
        (
            {"name": "x", "task": "duetime.noop", "cron": "0 1 * * *", "colour": 1},
            "specs[3].colour",
        ),
        ({"task": "duetime.noop", "cron": "0 1 * * *"}, "specs[3].name"),
        (
            {"name": "x", "task": "duetime.noop", "cron": "0 1 * * *", "delivery": "exactly_once"},
            "specs[3].delivery",
        ),
    ],
)
def test_a_bad_spec_is_named_by_index_and_field(
    app: App, bad: dict[str, object], field: str
) -> None:
    good = [{"name": f"ok-{i}", "task": "duetime.noop", "cron": "0 1 * * *"} for i in range(3)]
    with pytest.raises(ValidationError) as caught:
        app.schedule_many([*good, bad], batch_size=10)
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ": ")
    # nothing of the failed batch was written
    assert app.jobs.find().items == []


def test_earlier_batches_stay_written_when_a_later_spec_is_bad(app: App) -> None:
    specs = [
        {"name": f"ok-{i}", "task": "duetime.noop", "at": timedelta(hours=1)} for i in range(5)
    ]
    specs.append({"name": "bad", "task": "duetime.noop", "cron": "nope"})
    with pytest.raises(ValidationError, match=r"specs\[5\]\.cron"):
        app.schedule_many(specs, batch_size=2)
    assert sorted(j.name for j in app.jobs.find().items) == ["ok-0", "ok-1", "ok-2", "ok-3"]


def test_batch_size_must_be_positive(app: App) -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        app.schedule_many([], batch_size=0)


def test_repeated_cron_expressions_fire_as_if_registered_one_by_one(
    app: App, tmp_path: Path
) -> None:
    """Bulk registration reuses a validated expression's first instant (a per-call cache):
    every job still gets the instant its own schedule gives — hashed (``H``) ones their own,
    from their names — the same as registered one by one (in another database, same tenant)."""
    specs = [
        {"name": f"j{i}", "task": "duetime.noop", "cron": cron, "tz": tz}
        for i, (cron, tz) in enumerate(
            [("0 3 * * *", "UTC"), ("0 3 * * *", "Europe/Paris")] * 3 + [("H H * * *", "UTC")] * 6
        )
    ]
    assert app.schedule_many(specs) == len(specs)
    with App(str(tmp_path / "one-by-one.db")) as other:
        for spec in specs:
            name, cron, tz = spec["name"], spec["cron"], spec["tz"]
            single = other.schedule(name, task="duetime.noop", cron=cron, tz=tz)
            assert app.get(spec["name"]).next_fire_at == single.next_fire_at, spec
    hashed = {app.get(f"j{i}").next_fire_at for i in range(6, 12)}
    assert len(hashed) > 1  # not one cached instant for every H job


def test_an_invalid_cron_repeated_is_refused_each_time_it_is_named(app: App) -> None:
    specs = [{"name": "ok", "task": "duetime.noop", "cron": "0 3 * * *"}] * 1 + [
        {"name": "bad", "task": "duetime.noop", "cron": "0 0 30 2 *"}
    ]
    with pytest.raises(ValidationError) as caught:
        app.schedule_many(specs)
    assert caught.value.field == "specs[1].cron"


def test_a_malformed_zone_in_a_bulk_cron_spec_is_named(app: App) -> None:
    specs = [
        {"name": "ok", "task": "duetime.noop", "cron": "0 3 * * *"},
        {"name": "bad", "task": "duetime.noop", "cron": "0 3 * * *", "tz": ["UTC"]},
    ]
    with pytest.raises(ValidationError) as caught:
        app.schedule_many(specs)
    assert caught.value.field == "specs[1].tz"


def test_the_first_batches_are_small_so_writing_starts_early(app: App) -> None:
    """Batches of 1,000, then 2,000 … up to ``batch_size``: a bad spec at index 2,400 fails
    the second batch (1,000-2,999) and leaves the first written."""
    specs: list[dict[str, object]] = [
        {"name": f"ok-{i:04}", "task": "duetime.noop", "cron": "0 3 * * *"} for i in range(2500)
    ]
    specs[2400] = {"name": "bad", "task": "duetime.noop", "cron": "nope"}
    with pytest.raises(ValidationError, match=r"specs\[2400\]\.cron"):
        app.schedule_many(specs, batch_size=10_000)
    first = app.jobs.find(limit=1000)
    assert [j.name for j in first.items] == [f"ok-{i:04}" for i in range(1000)]
    assert first.next_cursor is None  # nothing after them
