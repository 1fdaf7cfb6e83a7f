"""A celery beat schedule (``app.conf.beat_schedule``) → job specs with the same timing.

Celery is never imported: an entry's ``schedule`` is read by shape. A number or a
``timedelta`` (or an object with ``run_every``, celery's ``schedule``) becomes ``every``; an
object with celery's crontab fields (``minute``, ``hour``, ``day_of_week``, ``day_of_month``,
``month_of_year``) becomes a 5-field ``cron`` in the app's time zone; anything else (a
``solar`` event, a custom schedule class) is refused with the entry's name.

A crontab field keeps the user's text when it is plain cron (digits, ``*``, ``-``, ``/``,
``,``) — so ``minute="*/15"`` stays a wildcard job under duetime's DST rule — and is otherwise
written as the list of values celery expanded it to (``day_of_week="mon-fri"`` → ``1,2,3,4,5``).
Celery matches a day when day-of-month AND day-of-week match; cron (Vixie) matches either when
both are restricted, so an entry restricting both is refused unless one of them starts with
``*`` (where cron's rule is an AND too). ``args``/``kwargs`` become the payload, the
``queue`` option the queue; other options are reported as ignored.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from duetime.errors import ValidationError

CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day_of_month", 1, 31),
    ("month_of_year", 1, 12),
    ("day_of_week", 0, 6),
)
"""Celery's crontab attributes in cron's field order, with the range each expands over."""

PLAIN_CRON = re.compile(r"^[0-9*/,\-]+$")
KNOWN_KEYS = frozenset({"task", "schedule", "args", "kwargs", "options", "relative"})
MAPPED_OPTIONS = frozenset({"queue"})


@dataclass(frozen=True)
class BeatImport:
    """What a beat schedule becomes: one spec (``app.schedule`` fields) per entry, in the
    schedule's order, and notes on what did not carry over (one line each)."""

    specs: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def load(target: str) -> tuple[Mapping[str, Any], str | None]:
    """Import ``module:attr`` (dots allowed after the colon: ``proj.celery:app.conf``).

    The object is a beat schedule (a mapping of entry name → entry) or anything with a
    ``conf`` (a Celery app) or a ``beat_schedule`` attribute; returns the schedule and the
    app's time zone if the object names one (``conf.timezone``)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValidationError("--celery-beat", f"must look like module:attribute, got {target!r}")
    sys.path.insert(0, "")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValidationError("--celery-beat", f"cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValidationError("--celery-beat", f"{module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    tz = None
    conf = getattr(obj, "conf", None)
    if conf is not None:
        tz = getattr(conf, "timezone", None)
        obj = getattr(conf, "beat_schedule", None)
    elif not isinstance(obj, Mapping) and hasattr(obj, "beat_schedule"):
        tz = getattr(obj, "timezone", None)
        obj = obj.beat_schedule
    if not isinstance(obj, Mapping):
        raise ValidationError(
            "--celery-beat", f"{target!r} is not a beat_schedule dict nor a Celery app"
        )
    return obj, (str(tz) if tz else None)


def convert(schedule: Mapping[str, Any], *, tz: str = "UTC") -> BeatImport:
    """The specs of every entry of ``schedule``; a ``ValidationError`` names the first entry
    that cannot be carried over (``beat_schedule['name'].schedule: …``) and why."""
    specs: list[dict[str, Any]] = []
    notes: list[str] = []
    for name, entry in schedule.items():
        where = f"beat_schedule[{name!r}]"
        if not isinstance(entry, Mapping):
            raise ValidationError(where, "each entry must be a dict with task and schedule")
        if not isinstance(entry.get("task"), str) or not entry["task"]:
            raise ValidationError(f"{where}.task", "a task name is required")
        if "schedule" not in entry:
            raise ValidationError(f"{where}.schedule", "is required")
        spec: dict[str, Any] = {"name": str(name), "task": entry["task"]}
        spec |= timing(entry["schedule"], f"{where}.schedule", tz)
        payload = payload_of(entry.get("args"), entry.get("kwargs"), where)
        if payload is not None:
            spec["payload"] = payload
        options = entry.get("options") or {}
        if not isinstance(options, Mapping):
            raise ValidationError(f"{where}.options", "must be a dict")
        if "queue" in options:
            spec["queue"] = str(options["queue"])
        ignored = sorted(set(options) - MAPPED_OPTIONS) + sorted(set(entry) - KNOWN_KEYS)
        if entry.get("relative"):
            ignored.append("relative")
        if ignored:
            notes.append(f"{name}: ignored {', '.join(ignored)}")
        specs.append(spec)
    return BeatImport(specs, notes)


def timing(value: Any, where: str, tz: str) -> dict[str, Any]:
    """The ``every`` or ``cron``/``tz`` fields of one celery schedule (a number, a
    ``timedelta``, an object with ``run_every`` or with crontab fields); a ValidationError at
    ``where`` for anything else (a solar event: ``event`` and ``lat`` attributes)."""
    if isinstance(value, bool):
        raise ValidationError(where, f"{value!r} is not a schedule")
    if isinstance(value, int | float):
        return {"every": _seconds(timedelta(seconds=value), where)}
    if isinstance(value, timedelta):
        return {"every": _seconds(value, where)}
    run_every = getattr(value, "run_every", None)
    if isinstance(run_every, timedelta):
        return {"every": _seconds(run_every, where)}
    if all(hasattr(value, name) for name, _, _ in CRON_FIELDS):
        return {"cron": crontab_expression(value, where), "tz": tz}
    if hasattr(value, "event") and hasattr(value, "lat"):
        raise ValidationError(
            where,
            f"solar({value.event!r}) has no duetime equivalent (its instants move every day); "
            "schedule it by hand or leave it out",
        )
    raise ValidationError(where, f"{type(value).__name__} is not a schedule duetime can import")


def _seconds(delta: timedelta, where: str) -> float:
    seconds = delta.total_seconds()
    if seconds <= 0:
        raise ValidationError(where, f"the interval must be positive, got {seconds:g} s")
    return seconds


def crontab_expression(crontab: Any, where: str = "schedule") -> str:
    """A celery crontab (duck-typed) → the 5-field cron expression with the same instants."""
    fields = [_field(crontab, name, low, high, where) for name, low, high in CRON_FIELDS]
    day_of_month, day_of_week = fields[2], fields[4]
    if not day_of_month.startswith("*") and not day_of_week.startswith("*"):
        raise ValidationError(
            where,
            f"restricts both day_of_month ({day_of_month}) and day_of_week ({day_of_week}): "
            "celery runs on days matching both, cron on days matching either; "
            "no cron expression has celery's meaning",
        )
    return " ".join(fields)


def _field(crontab: Any, name: str, low: int, high: int, where: str) -> str:
    text = getattr(crontab, f"_orig_{name}", None)
    if isinstance(text, str) and PLAIN_CRON.match(text.strip()):
        return text.strip()
    expanded = getattr(crontab, name)
    if isinstance(expanded, int) and not isinstance(expanded, bool):
        expanded = {expanded}
    try:
        values = sorted({int(v) for v in expanded})
    except (TypeError, ValueError):
        raise ValidationError(f"{where}.{name}", f"{expanded!r} is not numbers") from None
    if not values or values[0] < low or values[-1] > high:
        raise ValidationError(f"{where}.{name}", f"{values} is outside {low}-{high}")
    if values == list(range(low, high + 1)):
        return "*"
    return ",".join(str(v) for v in values)


def payload_of(args: Any, kwargs: Any, where: str) -> Any:
    """A task's payload from celery's ``args`` and ``kwargs``. No arguments → no payload;
    keyword arguments only → them; positional ones →
    ``{"args": [...], "kwargs": {...}}``."""
    if args is not None and not isinstance(args, list | tuple):
        raise ValidationError(f"{where}.args", "must be a list or tuple")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ValidationError(f"{where}.kwargs", "must be a dict")
    if args:
        return {"args": list(args), "kwargs": dict(kwargs or {})}
    if kwargs:
        return dict(kwargs)
    return None
