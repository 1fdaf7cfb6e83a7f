"""``duetime jobs import --django-celery-beat DATABASE_URL``: django-celery-beat's tables (the
column layout its migrations create: data/django_celery_beat.*.sql) in a SQLite file and in a
scratch PostgreSQL schema become jobs with the timing the beat-schedule importer gives the
same schedules; disabled tasks are paused, one_off runs once, expires ends the job."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from clikit import Invoke, assert_usage_error, ok
from tests.conftest import make_pg_schema

from duetime.importers.celery_beat import convert as convert_beat_schedule

DATA = Path(__file__).parent / "data"

ROWS = """
INSERT INTO django_celery_beat_crontabschedule
    (id, minute, hour, day_of_week, day_of_month, month_of_year, timezone) VALUES
    (1, '30', '7', 'mon-fri', '*', '*', 'Europe/Paris'),
    (2, '*/15', '*', '*', '*', '*', 'UTC'),
    (3, '0', '4', '*', '1', '*', 'America/New_York');
INSERT INTO django_celery_beat_intervalschedule (id, every, period) VALUES
    (1, 90, 'seconds'), (2, 2, 'hours');
INSERT INTO django_celery_beat_clockedschedule (id, clocked_time) VALUES
    (1, '2030-01-01 09:00:00');
INSERT INTO django_celery_beat_solarschedule (id, event, latitude, longitude) VALUES
    (1, 'sunset', 48.85, 2.35);
INSERT INTO django_celery_beat_periodictask
    (id, name, task, args, kwargs, queue, expires, enabled, total_run_count, date_changed,
     description, crontab_id, interval_id, solar_id, clocked_id, one_off, start_time, priority,
     headers) VALUES
    (1, 'weekday-report', 'duetime.noop', '[]', '{"report": "daily"}', 'reports',
     '2031-01-01 00:00:00', TRUE, 3, '2026-01-01 00:00:00', '', 1, NULL, NULL, NULL, FALSE,
     NULL, NULL, '{}'),
    (2, 'quarter-hourly', 'duetime.noop', '[]', '{}', NULL, NULL, FALSE, 0,
     '2026-01-01 00:00:00', '', 2, NULL, NULL, NULL, FALSE, NULL, NULL, '{}'),
    (3, 'poll', 'duetime.noop', '[16, 16]', '{}', NULL, NULL, TRUE, 0, '2026-01-01 00:00:00',
     '', NULL, 1, NULL, NULL, TRUE, '2029-01-01 00:00:00', 5, '{}'),
    (4, 'every-2h', 'duetime.noop', '[]', '{}', NULL, NULL, TRUE, 0, '2026-01-01 00:00:00',
     '', NULL, 2, NULL, NULL, FALSE, NULL, NULL, '{}'),
    (5, 'new-year', 'duetime.noop', '[]', '{}', NULL, NULL, TRUE, 0, '2026-01-01 00:00:00',
     '', NULL, NULL, NULL, 1, TRUE, NULL, NULL, '{}'),
    (6, 'monthly', 'duetime.noop', '[]', '{}', NULL, NULL, TRUE, 0, '2026-01-01 00:00:00', '',
     3, NULL, NULL, NULL, FALSE, NULL, NULL, '{}'),
    (7, 'sunset', 'duetime.noop', '[]', '{}', NULL, NULL, TRUE, 0, '2026-01-01 00:00:00', '',
     NULL, NULL, 1, NULL, FALSE, NULL, NULL, '{}');
"""
IMPORTABLE = ["weekday-report", "quarter-hourly", "poll", "every-2h", "new-year", "monthly"]


def _sqlite(tmp_path: Path, rows: str) -> str:
    path = tmp_path / "django.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.executescript((DATA / "django_celery_beat.sqlite.sql").read_text() + rows)
    connection.close()
    return str(path)


def _postgres(pg_database: str, rows: str) -> str:
    url = make_pg_schema(pg_database)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET TIME ZONE 'UTC'")  # Django's naive text is UTC
        connection.execute((DATA / "django_celery_beat.postgres.sql").read_text().encode())
        connection.execute(rows.encode())
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database holding django-celery-beat's tables and the rows of ROWS."""
    if request.param == "sqlite":
        yield _sqlite(tmp_path, ROWS)
    else:
        yield _postgres(request.getfixturevalue("pg_database"), ROWS)


def job(invoke: Invoke, name: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(ok(invoke("jobs", "show", name, "--json")).stdout)["job"]
    return shown


def names(invoke: Invoke) -> list[str]:
    listed = json.loads(ok(invoke("jobs", "list", "--json")).stdout)["items"]
    return sorted(item["name"] for item in listed)


def test_a_solar_task_is_refused_by_name_and_nothing_is_written(
    invoke: Invoke, source: str
) -> None:
    result = invoke("jobs", "import", "--django-celery-beat", source, "--allow-unregistered")
    assert result.exit_code == 2, result.output
    assert "refused: PeriodicTask 'sunset' (id 7): solar: solar('sunset')" in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: 1 periodic task(s) cannot be imported")
    )
    assert names(invoke) == []


def test_the_tables_become_jobs_with_the_beat_importers_timing(invoke: Invoke, source: str) -> None:
    celery = pytest.importorskip("celery.schedules")
    args = ("jobs", "import", "--django-celery-beat", source, "--allow-unregistered")
    result = ok(invoke(*args, "--skip-refused"))
    assert "imported 6 jobs (6 created, 0 updated, 1 paused)" in result.stdout
    assert "note: poll: ignored priority" in result.stderr
    assert names(invoke) == sorted(IMPORTABLE)
    # the same schedules, as a beat_schedule, through the beat importer's mapping
    expected = {
        name: convert_beat_schedule({name: {"task": "t", "schedule": schedule}}, tz=tz).specs[0]
        for name, schedule, tz in [
            ("weekday-report", celery.crontab(minute="30", hour="7", day_of_week="mon-fri"),
             "Europe/Paris"),
            ("quarter-hourly", celery.crontab(minute="*/15"), "UTC"),
            ("monthly", celery.crontab(minute="0", hour="4", day_of_month="1"),
             "America/New_York"),
            ("poll", timedelta(seconds=90), "UTC"),
            ("every-2h", timedelta(hours=2), "UTC"),
        ]
    }  # fmt: skip
    for name, spec in expected.items():
        schedule = job(invoke, name)["schedule"]
        if "cron" in spec:
            assert (schedule["cron"], schedule["tz"]) == (spec["cron"], spec["tz"]), name
        else:
            assert schedule["every_seconds"] == spec["every"], name
    report = job(invoke, "weekday-report")
    assert report["schedule"]["cron"] == "30 7 * * 1,2,3,4,5"
    assert (report["queue"], report["payload"]) == ("reports", {"report": "daily"})
    assert report["end_at"] == "2031-01-01T00:00:00Z"
    assert report["status"] == "active"
    assert job(invoke, "quarter-hourly")["status"] == "paused"
    poll = job(invoke, "poll")
    assert (poll["max_runs"], poll["start_at"]) == (1, "2029-01-01T00:00:00Z")
    assert poll["payload"] == {"args": [16, 16], "kwargs": {}}
    once = job(invoke, "new-year")["schedule"]
    assert (once["kind"], once["at"]) == ("at", "2030-01-01T09:00:00Z")
    # again: the same jobs, updated in place; the paused one stays paused
    again = ok(invoke(*args, "--skip-refused"))
    assert "(0 created, 6 updated, 1 paused)" in again.stdout
    assert names(invoke) == sorted(IMPORTABLE)
    assert job(invoke, "quarter-hourly")["status"] == "paused"


def test_dry_run_writes_nothing(invoke: Invoke, source: str) -> None:
    result = ok(invoke("jobs", "import", "--django-celery-beat", source, "--skip-refused",
                       "--dry-run"))  # fmt: skip
    assert "would import quarter-hourly (paused): {'cron': '*/15 * * * *'" in result.stdout
    assert result.stdout.count("would import ") == len(IMPORTABLE)
    assert names(invoke) == []


def test_unreadable_sources_exit_2(invoke: Invoke, tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite3"
    assert_usage_error(
        invoke("jobs", "import", "--django-celery-beat", str(missing)), "cannot open"
    )
    assert not missing.exists()
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()
    assert_usage_error(
        invoke("jobs", "import", "--django-celery-beat", str(empty)),
        "has no table django_celery_beat_periodictask",
    )
    bad = _sqlite(
        tmp_path,
        ROWS.replace("(1, 90, 'seconds')", "(1, 90, 'fortnights')").replace(
            "'America/New_York'", "'Mars/Olympus'"
        ),
    )
    result = invoke("jobs", "import", "--django-celery-beat", bad, "--allow-unregistered")
    assert result.exit_code == 2
    assert "PeriodicTask 'poll' (id 3): interval.period: 'fortnights' is not a period" in (
        result.stderr
    )
    assert "PeriodicTask 'monthly' (id 6): tz: unknown time zone 'Mars/Olympus'" in result.stderr
    assert "error: 3 periodic task(s) cannot be imported" in result.stderr  # with the solar one


def test_tasks_no_worker_serves_are_refused_before_anything_is_written(
    invoke: Invoke, tmp_path: Path
) -> None:
    rows = ROWS.replace("'weekday-report', 'duetime.noop'", "'weekday-report', 'reports.build'")
    source = _sqlite(tmp_path, rows.replace("'poll', 'duetime.noop'", "'poll', 'feeds.poll'"))
    result = invoke("jobs", "import", "--django-celery-beat", source, "--skip-refused")
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no worker serves the task of 'weekday-report', 'poll' yet")
    assert "nothing was written" in last
    assert names(invoke) == []


def test_a_task_the_app_would_refuse_stops_the_import_before_any_job(
    invoke: Invoke, tmp_path: Path
) -> None:
    """'every-2h' starts after it expires: app.schedule refuses it; the tasks before it in
    id order must not have been written already. --skip-refused leaves it out."""
    rows = ROWS.replace(
        "'', NULL, 2, NULL, NULL, FALSE, NULL, NULL, '{}'",
        "'', NULL, 2, NULL, NULL, FALSE, '2031-01-01 00:00:00', NULL, '{}'",
    ).replace("'every-2h', 'duetime.noop', '[]', '{}', NULL, NULL,",
              "'every-2h', 'duetime.noop', '[]', '{}', NULL, '2030-01-01 00:00:00',")  # fmt: skip
    without_solar = rows.split("    (7, 'sunset'")[0].rstrip().rstrip(",") + ";\n"
    source = _sqlite(tmp_path, without_solar)
    args = ("jobs", "import", "--django-celery-beat", source, "--allow-unregistered")
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "refused: PeriodicTask 'every-2h': end_at: must be after start_at" in result.stderr
    assert names(invoke) == []
    ok(invoke(*args, "--skip-refused"))
    assert names(invoke) == sorted(set(IMPORTABLE) - {"every-2h"})


def test_an_interval_that_is_no_number_is_refused_by_name(invoke: Invoke, tmp_path: Path) -> None:
    source = _sqlite(tmp_path, ROWS.replace("(1, 90, 'seconds')", "(1, 'ninety', 'seconds')"))
    result = invoke("jobs", "import", "--django-celery-beat", source, "--allow-unregistered")
    assert result.exit_code == 2, result.output
    assert "PeriodicTask 'poll' (id 3): interval.every: 'ninety' is not a whole number" in (
        result.stderr
    )
    assert "Traceback" not in result.output


def test_a_table_without_a_needed_column_is_named(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "odd.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE django_celery_beat_intervalschedule (every, period);"
            "INSERT INTO django_celery_beat_intervalschedule VALUES (5, 'minutes');"
            "CREATE TABLE django_celery_beat_periodictask (id, name, task, interval_id);"
            "INSERT INTO django_celery_beat_periodictask VALUES (1, 'a', 't.a', 1);"
        )
    connection.close()
    assert_usage_error(
        invoke("jobs", "import", "--django-celery-beat", str(path), "--dry-run"),
        "table django_celery_beat_intervalschedule has no column 'id'",
    )
