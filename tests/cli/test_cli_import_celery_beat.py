"""``duetime jobs import --celery-beat MODULE:ATTR``: celery beat entries become jobs with the
same timing (celery's own crontab and schedule objects, and duck-typed ones)."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from clikit import Invoke, assert_usage_error, ok

from duetime.importers.celery_beat import crontab_expression


def beat_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """A module holding ``source`` importable under a fresh name; returns the name."""
    name = f"beat_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


CELERY_APP = """
    from datetime import timedelta
    from celery import Celery
    from celery.schedules import crontab, schedule

    app = Celery("proj")
    app.conf.timezone = "Europe/Paris"
    app.conf.beat_schedule = {
        "quarter-hourly": {"task": "duetime.noop", "schedule": crontab(minute="*/15")},
        "weekday-mornings": {
            "task": "duetime.noop",
            "schedule": crontab(minute=30, hour=7, day_of_week="mon-fri"),
            "kwargs": {"report": "daily"},
            "options": {"queue": "reports", "expires": 60},
        },
        "every-30s": {"task": "duetime.noop", "schedule": 30.0, "args": (16, 16)},
        "every-2h": {"task": "duetime.noop", "schedule": timedelta(hours=2)},
        "every-5m": {"task": "duetime.noop", "schedule": schedule(timedelta(minutes=5))},
    }
"""


def job(invoke: Invoke, name: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(ok(invoke("jobs", "show", name, "--json")).stdout)["job"]
    return shown


def schedule(invoke: Invoke, name: str) -> dict[str, Any]:
    value: dict[str, Any] = job(invoke, name)["schedule"]
    return value


def test_a_celery_app_schedule_becomes_jobs_with_the_same_timing(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = beat_module(tmp_path, monkeypatch, CELERY_APP)
    result = ok(invoke("jobs", "import", "--celery-beat", f"{module}:app"))
    assert "imported 5 jobs (0 existed already) from 5 celery beat entries" in result.stdout
    assert "note: weekday-mornings: ignored expires" in result.stderr
    quarter = schedule(invoke, "quarter-hourly")
    assert (quarter["cron"], quarter["tz"]) == ("*/15 * * * *", "Europe/Paris")
    assert schedule(invoke, "weekday-mornings")["cron"] == "30 7 * * 1,2,3,4,5"
    mornings = job(invoke, "weekday-mornings")
    assert (mornings["payload"], mornings["queue"]) == ({"report": "daily"}, "reports")
    assert job(invoke, "every-30s")["payload"] == {"args": [16, 16], "kwargs": {}}
    assert schedule(invoke, "every-30s")["every_seconds"] == 30
    assert schedule(invoke, "every-2h")["every_seconds"] == 7200
    assert schedule(invoke, "every-5m")["every_seconds"] == 300
    again = ok(invoke("jobs", "import", "--celery-beat", f"{module}:app"))
    assert "imported 0 jobs (5 existed already)" in again.stdout


def test_a_plain_dict_and_the_tz_option(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = beat_module(
        tmp_path,
        monkeypatch,
        """
        class Crontab:  # the attributes celery's crontab has, nothing else
            minute, hour, day_of_month, month_of_year = {0}, {3}, set(range(1, 32)), {1, 7}
            day_of_week = set(range(7))
            _orig_day_of_month = "*"

        beat_schedule = {"nightly": {"task": "duetime.noop", "schedule": Crontab()}}
        """,
    )
    ok(invoke("jobs", "import", "--celery-beat", f"{module}:beat_schedule", "--tz", "Asia/Tokyo"))
    assert schedule(invoke, "nightly")["cron"] == "0 3 * 1,7 *"
    assert schedule(invoke, "nightly")["tz"] == "Asia/Tokyo"


@pytest.mark.parametrize(
    ("source", "needles"),
    [
        (
            # celery's solar needs ephem installed: this has its attributes
            "class solar:\n  event, lat, lon = 'sunrise', 48.8, 2.3\n"
            "s = {'dawn': {'task': 'duetime.noop', 'schedule': solar()}}",
            ("beat_schedule['dawn'].schedule", "solar('sunrise')", "no duetime equivalent"),
        ),
        (
            "from celery.schedules import crontab\n"
            "s = {'both': {'task': 'duetime.noop',"
            " 'schedule': crontab(0, 0, day_of_month='1', day_of_week='mon')}}",
            ("beat_schedule['both'].schedule", "day_of_month (1)", "day_of_week (1)"),
        ),
        (
            "s = {'odd': {'task': 'duetime.noop', 'schedule': 'hourly'}}",
            ("beat_schedule['odd'].schedule", "str is not a schedule"),
        ),
        (
            "s = {'neg': {'task': 'duetime.noop', 'schedule': -5}}",
            ("beat_schedule['neg'].schedule", "must be positive"),
        ),
        (
            "s = {'lost': {'task': 'reports.build', 'schedule': 60}}",
            ("beat_schedule['lost'].task", "unknown task 'reports.build'", "--allow-unregistered"),
        ),
        ("s = 42", ("--celery-beat", "not a beat_schedule dict")),
    ],
)
def test_what_cannot_be_carried_over_is_named(
    invoke: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    needles: tuple[str, ...],
) -> None:
    module = beat_module(tmp_path, monkeypatch, source)
    assert_usage_error(invoke("jobs", "import", "--celery-beat", f"{module}:s"), *needles)
    assert json.loads(ok(invoke("jobs", "list", "--json")).stdout)["items"] == []


def test_bad_targets_and_arguments(invoke: Invoke, tmp_path: Path) -> None:
    assert_usage_error(invoke("jobs", "import", "--celery-beat", "nope"), "module:attribute")
    assert_usage_error(
        invoke("jobs", "import", "--celery-beat", "no_such_module_x:app"), "cannot import"
    )
    assert_usage_error(invoke("jobs", "import", "--celery-beat", "json:nothing"), "no 'nothing'")
    file = tmp_path / "jobs.jsonl"
    file.write_text("")
    assert_usage_error(
        invoke("jobs", "import", str(file), "--celery-beat", "json:x"), "give one of FILE.jsonl"
    )
    assert_usage_error(invoke("jobs", "import"), "give one of FILE.jsonl")


def test_wildcard_fields_stay_wildcards_for_the_dst_rule() -> None:
    celery = pytest.importorskip("celery.schedules")
    assert crontab_expression(celery.crontab(minute="*/5", hour="*")) == "*/5 * * * *"
    assert crontab_expression(celery.crontab(minute=0, hour="9-17/2")) == "0 9-17/2 * * *"
    assert (
        crontab_expression(celery.crontab(0, 0, day_of_month="*/2", day_of_week="sat,sun"))
        == "0 0 */2 * 0,6"
    )
