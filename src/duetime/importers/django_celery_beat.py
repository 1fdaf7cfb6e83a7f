"""django-celery-beat's tables → job specs with the same timing, read straight from the
database (a ``postgresql://`` URL, or a SQLite file): Django is not imported.

The tables are those django-celery-beat's migrations create (names with the default
``django_celery_beat_`` prefix): ``periodictask`` rows, each pointing at one of
``crontabschedule`` (``minute``, ``hour``, ``day_of_week``, ``day_of_month``,
``month_of_year``, ``timezone``), ``intervalschedule`` (``every``, ``period``),
``clockedschedule`` (``clocked_time``) or ``solarschedule``. Columns an older release lacks are
read as absent.

Each row's timing goes through the beat-schedule importer's mapping
(:func:`duetime.importers.celery_beat.timing`): a crontab becomes a cron job in the row's
``timezone`` (names such as ``mon-fri`` are expanded by celery when it is installed — it is
wherever django-celery-beat runs — else refused), an interval an ``every`` job, a clocked
time a one-shot ``at``, a solar event is refused. Besides: ``enabled = false`` → the job is
paused; ``one_off`` → at most one run (``max_runs=1``); ``start_time`` → ``start_at``;
``expires`` → ``end_at``; ``args``/``kwargs`` (JSON text) → the payload; ``queue`` → the
queue. ``exchange``, ``routing_key``, ``headers``, ``priority`` and ``expire_seconds`` are
reported as not carried over. Datetimes stored without an offset (SQLite, Django's
``USE_TZ = True``) are UTC.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.errors import ValidationError
from duetime.importers import celery_beat

TABLES = ("periodictask", "crontabschedule", "intervalschedule", "clockedschedule", "solarschedule")
"""django-celery-beat's tables, without the ``django_celery_beat_`` prefix."""
PERIODS = frozenset({"days", "hours", "minutes", "seconds", "microseconds"})
IGNORED_COLUMNS = ("exchange", "routing_key", "priority", "expire_seconds")


@dataclass(frozen=True)
class Refused:
    """A row that cannot be imported: its task's name and id, and why."""

    name: str
    row_id: Any
    reason: str

    def __str__(self) -> str:
        return f"PeriodicTask {self.name!r} (id {self.row_id}): {self.reason}"


@dataclass
class BeatTablesImport:
    """What the tables become: ``specs`` (``app.schedule`` fields, by the rows' ids), the
    names of the jobs to pause (``enabled`` false), notes and refused rows."""

    specs: list[dict[str, Any]] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


Rows = dict[str, list[dict[str, Any]]]
"""Each table's rows (by the short names of :data:`TABLES`) as column → value."""


def read_tables(url: str, *, prefix: str = "django_celery_beat_") -> Rows:
    """Every row of the tables at ``url`` (``postgresql://…``, ``sqlite:///path`` or a
    path); a missing table is an empty one, but ``periodictask`` must exist. Raises
    ValidationError naming the URL when it cannot be read."""
    if url.startswith(("postgresql://", "postgres://")):
        return _read_postgres(url, prefix)
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ValidationError("--django-celery-beat", f"cannot open {path!r}: {exc}") from None
    try:
        connection.row_factory = sqlite3.Row
        names = {
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        rows: Rows = {}
        for table in TABLES:
            if prefix + table not in names:
                rows[table] = []
                continue
            cursor = connection.execute(f'SELECT * FROM "{prefix}{table}" ORDER BY 1')
            rows[table] = [dict(r) for r in cursor]
    except sqlite3.Error as exc:
        raise ValidationError("--django-celery-beat", f"cannot read {path!r}: {exc}") from None
    finally:
        connection.close()
    _require(rows, names, prefix, url)
    return rows


def _read_postgres(url: str, prefix: str) -> Rows:
    import psycopg
    from psycopg.rows import dict_row

    from duetime._redact import redact_url

    rows: Rows = {}
    try:
        with psycopg.connect(url, row_factory=dict_row) as connection:
            connection.read_only = True
            found = {
                r["relname"]
                for r in connection.execute(
                    "SELECT c.relname FROM pg_class c WHERE c.relkind = 'r' "
                    "AND pg_catalog.pg_table_is_visible(c.oid)"
                )
            }
            for table in TABLES:
                if prefix + table not in found:
                    rows[table] = []
                    continue
                query = f'SELECT * FROM "{prefix}{table}" ORDER BY 1'
                rows[table] = list(connection.execute(query))
    except psycopg.Error as exc:
        raise ValidationError(
            "--django-celery-beat", f"cannot read {redact_url(url)}: {exc}".strip()
        ) from None
    _require(rows, found, prefix, redact_url(url))
    return rows


REQUIRED_COLUMNS = {"periodictask": ("id", "name")} | {table: ("id",) for table in TABLES[1:]}
"""The columns :func:`convert` cannot do without (every release has them)."""


def _require(rows: Rows, names: set[str], prefix: str, where: str) -> None:
    if prefix + "periodictask" not in names:
        raise ValidationError(
            "--django-celery-beat",
            f"{where} has no table {prefix}periodictask (is django-celery-beat migrated there?)",
        )
    for table, columns in REQUIRED_COLUMNS.items():
        missing = [c for c in columns if rows[table] and c not in rows[table][0]]
        if missing:
            raise ValidationError(
                "--django-celery-beat",
                f"{where}: table {prefix}{table} has no column {missing[0]!r} (is it "
                "django-celery-beat's?)",
            )


def convert(rows: Rows, *, default_tz: str = "UTC") -> BeatTablesImport:
    """The specs of every ``periodictask`` row (module docstring). ``default_tz``: the zone
    of a crontab row without a ``timezone`` column (releases before 1.5)."""
    by_id = {table: {r["id"]: r for r in rows.get(table, [])} for table in TABLES[1:]}
    result = BeatTablesImport()
    for task in rows.get("periodictask", []):
        name = str(task["name"])
        try:
            spec = _spec(task, by_id, default_tz)
        except ValidationError as exc:
            result.refused.append(Refused(name, task.get("id"), str(exc)))
            continue
        result.specs.append(spec)
        if not _true(task.get("enabled", True)):
            result.paused.append(name)
        ignored = [c for c in IGNORED_COLUMNS if task.get(c) not in (None, "")]
        if task.get("headers") not in (None, "", "{}"):
            ignored.append("headers")
        if ignored:
            result.notes.append(f"{name}: ignored {', '.join(ignored)}")
    return result


def _spec(
    task: Mapping[str, Any], by_id: dict[str, dict[Any, Any]], default_tz: str
) -> dict[str, Any]:
    name = str(task["name"])
    where = f"PeriodicTask[{name!r}]"
    if not task.get("task"):
        raise ValidationError("task", "is empty")
    spec: dict[str, Any] = {
        "name": name,
        "task": str(task["task"]),
        "metadata": {"periodic_task_id": task.get("id")},
    }
    one_off = _true(task.get("one_off", False))
    if task.get("clocked_id") is not None:
        clocked = _row(by_id, "clockedschedule", task["clocked_id"])
        spec["at"] = _instant(clocked["clocked_time"], "clocked_time")
        spec["allow_past"] = True  # celery beat runs a past clocked task at once
    elif task.get("crontab_id") is not None:
        row = _row(by_id, "crontabschedule", task["crontab_id"])
        spec |= celery_beat.timing(_crontab(row), "crontab", str(row.get("timezone") or default_tz))
    elif task.get("interval_id") is not None:
        row = _row(by_id, "intervalschedule", task["interval_id"])
        if row.get("period") not in PERIODS:
            raise ValidationError("interval.period", f"{row.get('period')!r} is not a period")
        try:
            every = timedelta(**{str(row["period"]): int(row["every"])})
        except (TypeError, ValueError, OverflowError):
            raise ValidationError(
                "interval.every", f"{row.get('every')!r} is not a whole number of {row['period']}"
            ) from None
        spec |= celery_beat.timing(every, "interval", default_tz)
    elif task.get("solar_id") is not None:
        row = _row(by_id, "solarschedule", task["solar_id"])
        spec |= celery_beat.timing(_Solar(row), "solar", default_tz)
    else:
        raise ValidationError("schedule", "the row names no crontab, interval, clocked or solar")
    if one_off and "at" not in spec:
        spec["max_runs"] = 1
    if task.get("start_time") is not None and "at" not in spec:
        spec["start_at"] = _instant(task["start_time"], "start_time")
    if task.get("expires") is not None:
        expires = _instant(task["expires"], "expires")
        if "at" in spec:
            if expires < spec["at"]:
                raise ValidationError("expires", "is before its clocked time: it never runs")
        else:
            spec["end_at"] = expires
    payload = celery_beat.payload_of(
        _json(task.get("args"), "args"), _json(task.get("kwargs"), "kwargs"), where
    )
    if payload is not None:
        spec["payload"] = payload
    if task.get("queue"):
        spec["queue"] = str(task["queue"])
    return spec


def _row(by_id: dict[str, dict[Any, Any]], table: str, row_id: Any) -> dict[str, Any]:
    row: dict[str, Any] | None = by_id[table].get(row_id)
    if row is None:
        raise ValidationError(f"{table}_id", f"no {table} row has id {row_id}")
    return row


def _true(value: Any) -> bool:
    return bool(value) and value not in ("0", "false", "f")


def _json(text: Any, column: str) -> Any:
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise ValidationError(column, f"{text!r} is not JSON") from None


def _instant(value: Any, column: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(column, f"{value!r} is not a datetime") from None
    if not isinstance(value, datetime):
        raise ValidationError(column, f"{value!r} is not a datetime")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _crontab(row: Mapping[str, Any]) -> Any:
    """The row as a celery crontab (celery's own when installed: it expands names the way
    celery beat does), else as plain text fields."""
    values = {name: str(row.get(name, "*")) for name, _, _ in celery_beat.CRON_FIELDS}
    try:
        from celery.schedules import crontab  # type: ignore[import-untyped]
    except ImportError:
        return _PlainCrontab(values)
    try:
        return crontab(**values)
    except (ValueError, TypeError) as exc:
        raise ValidationError("crontab", f"celery refuses it: {exc}") from None


class _PlainCrontab:
    """A crontab row's fields without celery: plain cron text only (module docstring)."""

    def __init__(self, values: dict[str, str]) -> None:
        for name, text in values.items():
            if not celery_beat.PLAIN_CRON.match(text.strip()):
                raise ValidationError(
                    f"crontab.{name}",
                    f"{text!r} needs celery to read (pip install celery), or plain cron text "
                    "(digits, *, -, /, ',')",
                )
            setattr(self, f"_orig_{name}", text)
            setattr(self, name, text)


class _Solar:
    """A solar row as the beat importer reads one (``event``, ``lat``): it refuses it."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.event = row.get("event")
        self.lat = row.get("latitude")
