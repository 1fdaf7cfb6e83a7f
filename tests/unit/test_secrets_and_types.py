"""The Python API on a real SQLite file: a target header whose value is the redaction marker
keeps the stored value (or is refused with nothing to keep); a bool is not a number, and NaN
or an infinity is refused where it is, payloads and metadata included."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import App, Retry, ValidationError
from duetime._config import Settings
from duetime._json import encode_payload
from duetime._redact import REDACTED, keep_redacted, redact_target

SECRET = "Bearer s3cret"
TARGET = {
    "type": "http",
    "url": "https://hooks.example.com/x",
    "headers": {"Authorization": SECRET},
}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with App(str(tmp_path / "app.db")) as opened:
        yield opened


def test_redact_target_keeps_names_and_hides_values() -> None:
    target = {**TARGET, "headers": {"Authorization": SECRET, "X-A": "1"}}
    assert redact_target(target) == {
        **TARGET,
        "headers": {"Authorization": REDACTED, "X-A": REDACTED},
    }
    assert target["headers"]["Authorization"] == SECRET  # a copy
    assert redact_target(None) is None
    assert redact_target({"type": "http", "url": "u"}) == {"type": "http", "url": "u"}
    assert REDACTED == "<redacted>"


def test_keep_redacted_matches_names_without_regard_to_case() -> None:
    written = {**TARGET, "headers": {"authorization": REDACTED, "X-B": "2"}}
    kept = keep_redacted(written, TARGET)
    assert kept["headers"] == {"authorization": SECRET, "X-B": "2"}
    with pytest.raises(ValidationError) as caught:
        keep_redacted({**TARGET, "headers": {"X-B": REDACTED}}, TARGET)
    assert caught.value.field == "target.headers.X-B"


def test_schedule_written_back_with_the_marker_keeps_the_secret(app: App) -> None:
    app.schedule("hook", target=TARGET, cron="0 3 * * *")
    read = redact_target(app.get("hook").target)
    assert read is not None
    app.schedule("hook", target={**read, "timeout": 5}, cron="0 3 * * *")
    job = app.get("hook")
    assert job.target is not None
    assert (job.target["headers"], job.target["timeout"]) == ({"Authorization": SECRET}, 5.0)
    # rotating: write the new value
    app.schedule(
        "hook", target={**TARGET, "headers": {"Authorization": "Bearer new"}}, cron="0 3 * * *"
    )
    assert app.get("hook").target["headers"] == {"Authorization": "Bearer new"}  # type: ignore[index]


@pytest.mark.parametrize("name", ["fresh", "hook"])
def test_the_marker_without_a_stored_value_is_refused(app: App, name: str) -> None:
    app.schedule("hook", target=TARGET, cron="0 3 * * *")
    headers = {"X-Other": REDACTED} if name == "hook" else {"Authorization": REDACTED}
    with pytest.raises(ValidationError) as caught:
        app.schedule(name, target={**TARGET, "headers": headers}, cron="0 3 * * *")
    assert caught.value.field == f"target.headers.{next(iter(headers))}"
    assert REDACTED in caught.value.reason
    assert app.get("hook").target["headers"] == {"Authorization": SECRET}  # type: ignore[index]


def test_bulk_registration_refuses_the_marker(app: App) -> None:
    spec = {
        "name": "bulk",
        "target": {**TARGET, "headers": {"Authorization": REDACTED}},
        "cron": "0 3 * * *",
    }
    with pytest.raises(ValidationError) as caught:
        app.schedule_many([spec])
    assert caught.value.field == "specs[0].target.headers.Authorization"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"every": True}, "every"),
        ({"every": float("nan")}, "every"),
        ({"every": float("inf")}, "every"),
        ({"every": 1e300}, "every"),
        ({"cron": "* * * * *", "timeout": True}, "timeout"),
        ({"cron": "* * * * *", "timeout": float("nan")}, "timeout"),
        ({"cron": "* * * * *", "timeout": float("inf")}, "timeout"),
        ({"cron": "* * * * *", "misfire_grace": True}, "misfire_grace"),
        ({"cron": "* * * * *", "misfire_grace": float("inf")}, "misfire_grace"),
        ({"cron": "* * * * *", "misfire_grace": 1e12}, "misfire_grace"),
        ({"cron": "* * * * *", "timeout": 1e12}, "timeout"),
        ({"cron": "* * * * *", "priority": True}, "priority"),
        ({"cron": "* * * * *", "jitter": True}, "jitter"),
        ({"cron": "* * * * *", "sla": True}, "sla"),
        ({"cron": "* * * * *", "max_backfill": True}, "max_backfill"),
        ({"cron": "* * * * *", "retry": Retry(max_attempts=True)}, "retry.max_attempts"),  # type: ignore[arg-type]
        ({"cron": "* * * * *", "retry": Retry(backoff_base=float("nan"))}, "retry.backoff"),
        ({"cron": "* * * * *", "payload": {"x": float("nan")}}, "payload.x"),
        ({"cron": "* * * * *", "payload": [1, {"y": float("-inf")}]}, "payload[1].y"),
        ({"cron": "* * * * *", "payload": float("inf")}, "payload"),
        ({"cron": "* * * * *", "metadata": {"m": [float("nan")]}}, "metadata.m[0]"),
    ],
)
def test_bools_and_non_finite_numbers_are_refused(
    app: App, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        app.schedule("job", task="duetime.noop", **kwargs)
    assert caught.value.field == field
    assert app.jobs.find().items == []


def test_non_finite_payload_message_says_what(app: App) -> None:
    with pytest.raises(ValidationError, match=r"payload\.x: is NaN: JSON has no NaN or Infinity"):
        app.schedule("job", task="duetime.noop", now=True, payload={"x": float("nan")})
    app.schedule("job", task="duetime.noop", cron="0 3 * * *", payload={"x": None, "s": "null"})
    with pytest.raises(ValidationError) as caught:
        app.trigger("job", payload={"n": [float("inf")]})
    assert caught.value.field == "payload.n[0]"
    with pytest.raises(ValidationError) as many:
        app.schedule_many(
            [{"name": "b", "task": "duetime.noop", "now": True, "payload": float("nan")}]
        )
    assert many.value.field == "specs[0].payload"


def test_numbers_and_timedeltas_are_still_accepted(app: App) -> None:
    job = app.schedule(
        "job",
        task="duetime.noop",
        every=timedelta(minutes=2),
        timeout=3,
        misfire_grace=0,
        payload=1.5,
    )
    assert (job.timeout, job.misfire_grace, job.payload) == (3.0, 0.0, 1.5)
    assert app.schedule("job2", task="duetime.noop", every=90).schedule.every == timedelta(
        seconds=90
    )


def test_timeline_refuses_bools(app: App) -> None:
    with pytest.raises(ValidationError) as caught:
        app._call(lambda: app.aio.timeline(window=600, step=True))  # type: ignore[arg-type]
    assert caught.value.field == "step"


def test_encode_payload_finds_nan_in_dataclasses() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Point:
        x: float

    with pytest.raises(ValidationError) as caught:
        encode_payload({"p": Point(float("nan"))}, limit=1000)
    assert caught.value.field == "payload.p.x"
    assert encode_payload({"p": Point(1.0)}, limit=1000) == '{"p":{"x":1.0}}'


@pytest.mark.parametrize("grace", ["1e12", "-1", "nan"])
def test_a_default_misfire_grace_out_of_range_is_refused_by_name(grace: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings.from_env({"DUETIME_MISFIRE_GRACE": grace})
    assert caught.value.field == "misfire_grace"


@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("DUETIME_DATABASE_CHECKOUT_WAIT", "database_checkout_wait"),
        ("DUETIME_LEASE_TTL", "lease_ttl"),
    ],
)
def test_an_infinite_wait_setting_is_refused_by_name(variable: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings.from_env({variable: "inf"})
    assert caught.value.field == field
