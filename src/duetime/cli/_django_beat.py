"""``duetime jobs import --django-celery-beat DATABASE_URL``: django-celery-beat's periodic
tasks → jobs, read from its tables (:mod:`duetime.importers.django_celery_beat`).

Rows that cannot be carried over are printed by name and id, and nothing is written (exit 2)
unless ``--skip-refused``. Jobs are upserted under the tasks' names, so importing again
changes nothing; a disabled task's job is paused (left as it is if it is paused already)."""

from __future__ import annotations

import typer

from duetime.app import AsyncApp
from duetime.app.importing import django_celery_beat, refused_specs, unserved
from duetime.cli._common import fail, refuse, with_app
from duetime.errors import ValidationError

PAUSE_NOTE = "disabled in django-celery-beat"
TASKS = "periodic task(s)"
"""What a refusal counts (``N periodic task(s) cannot be imported``)."""


def import_django_celery_beat(
    url: str,
    *,
    tz: str | None,
    skip_refused: bool,
    dry_run: bool,
    db: str | None,
    tenant: str,
    allow_unregistered: bool,
) -> None:
    """The CLI's django-celery-beat import (module docstring)."""
    try:
        converted = django_celery_beat(url, tz=tz)
    except ValidationError as exc:
        fail(str(exc))
    refuse([f"refused: {r}" for r in converted.refused], TASKS, skip=skip_refused)
    for note in converted.notes:
        typer.echo(f"note: {note}", err=True)
    if dry_run:
        for spec in converted.specs:
            timing = {k: spec[k] for k in ("cron", "tz", "every", "at") if k in spec}
            paused = " (paused)" if spec["name"] in converted.paused else ""
            typer.echo(f"would import {spec['name']}{paused}: {timing}")
        return

    async def body(app: AsyncApp) -> tuple[int, int]:
        missing = [] if allow_unregistered else await unserved(app, converted.specs)
        if missing:
            fail(
                f"no worker serves the task of {', '.join(map(repr, missing))} yet: start the "
                "workers first, or pass --allow-unregistered (the jobs then wait for them); "
                "nothing was written"
            )
        bad = refused_specs(app, converted.specs)
        refuse([f"refused: PeriodicTask {n!r}: {exc}" for n, exc in bad], TASKS, skip=skip_refused)
        names = {name for name, _ in bad}
        converted.specs = [spec for spec in converted.specs if spec["name"] not in names]
        converted.paused = [name for name in converted.paused if name not in names]
        created = 0
        for spec in converted.specs:
            try:
                job = await app.schedule(**spec, allow_unregistered=allow_unregistered)
            except ValidationError as exc:
                fail(f"PeriodicTask {spec['name']!r}: {exc}".replace(
                    "allow_unregistered=True", "--allow-unregistered"
                ))  # fmt: skip
            created += bool(job.created)
            if spec["name"] in converted.paused and job.status.value != "paused":
                await app.pause(spec["name"], note=PAUSE_NOTE)
        return created, len(converted.specs) - created

    created, updated = with_app(db, tenant, body)
    typer.echo(
        f"imported {created + updated} jobs ({created} created, {updated} updated, "
        f"{len(converted.paused)} paused) from django-celery-beat's tables"
    )
