"""``duetime jobs import --celery-beat MODULE:ATTR``: a celery beat schedule → jobs.

The translation is :mod:`duetime.importers.celery_beat`; this registers its specs like a
JSON Lines import (existing names are left as they are) and prints what was not carried
over."""

from __future__ import annotations

import typer

from duetime.app import AsyncApp
from duetime.cli._common import fail, with_app
from duetime.errors import ValidationError
from duetime.importers import celery_beat


def _explain(error: ValidationError, names: list[str]) -> str:
    """``specs[3].cron: …`` → ``beat_schedule['name'].cron: …``."""
    if error.field.startswith("specs["):
        end = error.field.index("]")
        rest = error.field[end + 1 :]
        reason = error.reason.replace("allow_unregistered=True", "--allow-unregistered")
        return f"beat_schedule[{names[int(error.field[len('specs[') : end])]!r}]{rest}: {reason}"
    return str(error)


def import_celery_beat(
    target: str, tz: str | None, db: str | None, tenant: str, *, allow_unregistered: bool
) -> None:
    """Import every entry of the beat schedule ``target``, or none (exit 2 naming the entry)."""
    try:
        schedule, app_tz = celery_beat.load(target)
        converted = celery_beat.convert(schedule, tz=tz or app_tz or "UTC")
    except ValidationError as exc:
        fail(str(exc))
    names = [spec["name"] for spec in converted.specs]

    async def body(app: AsyncApp) -> int:
        try:
            return await app.schedule_many(converted.specs, allow_unregistered=allow_unregistered)
        except ValidationError as exc:
            fail(_explain(exc, names))

    created = with_app(db, tenant, body)
    for note in converted.notes:
        typer.echo(f"note: {note}", err=True)
    total = len(converted.specs)
    typer.echo(
        f"imported {created} jobs ({total - created} existed already) "
        f"from {total} celery beat entries"
    )
