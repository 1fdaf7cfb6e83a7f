"""The checks importers leave to the app: the schedules and zones of a crontab
(:func:`crontab`) and of django-celery-beat's rows (:func:`django_celery_beat`), the
allow-list a crontab import writes for the workers (:func:`merge_allow_list`), and which
imported jobs no worker serves yet (:func:`unserved`). The importers translate; this layer
knows the cron grammar, the worker's ``DUETIME_COMMANDS`` format and the known tasks, so an
import can refuse everything before it writes anything."""

from __future__ import annotations

import json
from typing import Any

from duetime.app._service import Scope, check_task
from duetime.errors import UnknownTask, ValidationError
from duetime.importers import django_celery_beat as beat_tables
from duetime.importers.crontab import CrontabImport, Refused, convert, lines_of
from duetime.registration import JobSpec, build_upsert
from duetime.schedules.cron import parse_cron
from duetime.targets.command import command_task, load_commands

__all__ = ["crontab", "django_celery_beat", "merge_allow_list", "refused_specs", "unserved"]


def crontab(text: str, *, tz: str | None = None, **options: Any) -> CrontabImport:
    """:func:`duetime.importers.crontab.convert` of ``text``, with the lines whose schedule
    or zone duetime would refuse moved to ``refused`` (their commands dropped). ``tz`` is
    checked first: a ValidationError names ``--tz``."""
    if tz is not None:
        _check_zone(tz, "--tz")
    result = convert(text, tz=tz, **options)
    lines = lines_of(text)
    kept: list[dict[str, Any]] = []
    for spec in result.specs:
        number = spec["metadata"]["crontab_line"]
        try:
            parse_cron(spec["cron"], spec["tz"])
        except ValidationError as exc:
            reason = (
                f"unknown time zone {spec['tz']!r} (from CRON_TZ)"
                if exc.field == "tz"
                else f"{spec['cron']!r} is not a cron schedule ({exc.reason})"
            )
            result.refused.append(Refused(number, lines[number - 1], reason))
            del result.commands[spec["name"]]
            continue
        kept.append(spec)
    result.specs = kept
    result.refused.sort(key=lambda refused: refused.line)
    return result


def _check_zone(name: str, where: str) -> None:
    try:
        parse_cron("0 0 * * *", name)
    except ValidationError:
        raise ValidationError(where, f"unknown time zone {name!r} (an IANA name)") from None


def merge_allow_list(existing: str | None, commands: dict[str, dict[str, Any]]) -> str:
    """The allow-list file's new text: the JSON object ``existing`` (None: no file yet) with
    ``commands`` added or replaced, checked as a worker reads ``DUETIME_COMMANDS``. Raises
    ValidationError (field ``commands``…) when the result is not one."""
    merged: dict[str, Any] = {}
    if existing is not None:
        try:
            found = json.loads(existing)
        except ValueError as exc:
            raise ValidationError("commands", f"the file is not valid JSON ({exc})") from None
        if not isinstance(found, dict):
            raise ValidationError("commands", "the file holds no JSON object of commands")
        merged |= found
    merged |= commands
    text = json.dumps(merged, indent=2) + "\n"
    load_commands(text)
    return text


def django_celery_beat(url: str, *, tz: str | None = None) -> beat_tables.BeatTablesImport:
    """django-celery-beat's rows at ``url`` as job specs
    (:mod:`duetime.importers.django_celery_beat`), a crontab row whose expression or zone
    duetime would refuse moved to ``refused``. Raises ValidationError when the tables cannot
    be read or ``tz`` is unknown."""
    if tz is not None:
        _check_zone(tz, "--tz")
    result = beat_tables.convert(beat_tables.read_tables(url), default_tz=tz or "UTC")
    kept: list[dict[str, Any]] = []
    for spec in result.specs:
        if "cron" in spec:
            try:
                parse_cron(spec["cron"], spec["tz"])
            except ValidationError as exc:
                result.refused.append(
                    beat_tables.Refused(
                        spec["name"], spec["metadata"]["periodic_task_id"], str(exc)
                    )
                )
                if spec["name"] in result.paused:
                    result.paused.remove(spec["name"])
                continue
        kept.append(spec)
    result.specs = kept
    return result


async def unserved(app: Scope, specs: list[dict[str, Any]]) -> list[str]:
    """The names of the specs whose task (or command target's task) no worker serves yet,
    in order: registering them would raise UnknownTask."""
    missing: list[str] = []
    for spec in specs:
        target = spec.get("target")
        task = command_task(target["name"]) if isinstance(target, dict) else spec.get("task")
        try:
            await check_task(app, str(task), False)
        except UnknownTask:
            missing.append(str(spec["name"]))
    return missing


def refused_specs(app: Scope, specs: list[dict[str, Any]]) -> list[tuple[str, ValidationError]]:
    """Each spec that ``app.schedule`` would refuse now (its name and why), in order, checked
    without writing anything: an import stops before its first job rather than after some
    (e.g. an ``end_at`` before the ``start_at``, a cron that never fires, a payload too big)."""
    now = app.clock.now()
    found: list[tuple[str, ValidationError]] = []
    for spec in specs:
        try:
            build_upsert(JobSpec(**spec), tenant=app.tenant, settings=app.settings, now=now)
        except ValidationError as exc:
            found.append((str(spec["name"]), exc))
    return found
