"""``duetime jobs import FILE.jsonl``: bulk registration from JSON Lines.

One job per line, with the fields of ``app.schedule`` (``name``, ``task`` or ``target``, one
of ``cron`` / ``at`` / ``every`` / ``now``, and optionally ``tz``, ``anchor``, ``payload``,
``retry``, ``priority``, ``timeout``, ``misfire``, ``misfire_grace``, ``overlap``,
``delivery``, ``queue``, ``tags``, ``metadata`` and the other fields of a ``JobSpec``).
``at``, ``anchor``, ``start_at`` and ``end_at`` are ISO 8601 instants with an offset (``at``
may also be a delay such as ``PT3H`` or ``90s``); ``every`` is seconds, a duration or words
(``"1 day"``); ``retry`` is an object with ``max_attempts``, ``backoff_base``,
``backoff_factor``, ``backoff_cap``. Names that exist already are left as they are (import
only creates). The command's help and docs/cli.md describe the format to users.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import orjson
import typer

from duetime.app import AsyncApp
from duetime.cli._celery_beat import import_celery_beat
from duetime.cli._common import (
    AllowUnregisteredOption,
    DbOption,
    TenantOption,
    fail,
    with_app,
)
from duetime.cli._crontab import import_crontab
from duetime.cli._django_beat import import_django_celery_beat
from duetime.cli._job_specs import spec_fields
from duetime.cli._output import ProgressBar
from duetime.errors import ValidationError

commands = typer.Typer()
"""Mounted into ``duetime jobs`` by the root."""

PROGRESS_EVERY = 1000
"""Lines read between two updates of the progress bar (a terminal's only)."""


class _Lines:
    """JSON Lines → spec mappings, remembering blank lines so an index maps back to a line."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.blank_before: list[int] = []  # spec index at each blank line
        self.bytes_read = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        index = 0
        for number, raw in enumerate(self.stream, start=1):
            self.bytes_read += len(raw)
            if not raw.strip():
                self.blank_before.append(index)
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ValidationError(f"line {number}", f"not valid JSON ({exc})") from None
            try:
                yield spec_fields(obj)
            except ValidationError as exc:
                raise ValidationError(f"line {number}: {exc.field}", exc.reason) from None
            index += 1

    def line_of(self, index: int) -> int:
        return index + 1 + sum(1 for b in self.blank_before if b <= index)


def _explain(error: ValidationError, lines: _Lines) -> str:
    """``specs[3].cron: …`` → ``line 5: cron: …`` (the file's line, then the field)."""
    if error.field.startswith("specs["):
        end = error.field.index("]")
        index = int(error.field[len("specs[") : end])
        field = error.field[end + 1 :].lstrip(".")
        reason = error.reason.replace("allow_unregistered=True", "--allow-unregistered")
        return f"line {lines.line_of(index)}: {f'{field}: ' if field else ''}{reason}"
    return str(error)


@commands.command("import")
def import_jobs(
    file: Annotated[
        str | None,
        typer.Argument(
            metavar="FILE.jsonl", help="JSON Lines file, one job per line; - reads stdin."
        ),
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    batch_size: Annotated[int, typer.Option("--batch-size", help="Jobs per transaction.")] = 10_000,
    allow_unregistered: AllowUnregisteredOption = False,
    celery_beat: Annotated[
        str | None,
        typer.Option(
            "--celery-beat",
            metavar="MODULE:ATTR",
            help="Import a celery beat schedule (a beat_schedule dict or a Celery app) instead "
            "of FILE.jsonl (docs/moving-from-celery-beat.md).",
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            help="With --celery-beat: the crontabs' zone (default the app's, or UTC). With "
            "--crontab: the zone of lines before any CRON_TZ (cron's: the machine's). With "
            "--django-celery-beat: the zone of crontab rows without one (default UTC).",
        ),
    ] = None,
    crontab: Annotated[
        str | None,
        typer.Option(
            "--crontab",
            metavar="FILE",
            help="Import a crontab's lines as command jobs instead of FILE.jsonl; - reads "
            "stdin (crontab -l | duetime jobs import --crontab - …; docs/moving-from-cron.md).",
        ),
    ] = None,
    commands_out: Annotated[
        str | None,
        typer.Option(
            "--commands-out",
            metavar="FILE",
            help="With --crontab: the JSON allow-list (DUETIME_COMMANDS) to write the "
            "crontab's commands to (merged into the file if it exists); deploy it to workers.",
        ),
    ] = None,
    system: Annotated[
        bool,
        typer.Option("--system", help="With --crontab: lines have a user column (/etc/crontab)."),
    ] = False,
    allow_shell: Annotated[
        bool,
        typer.Option(
            "--allow-shell",
            help="With --crontab: run lines that need a shell (pipes, redirections, $VAR …) "
            "as SHELL -c LINE instead of refusing them.",
        ),
    ] = False,
    like_cron: Annotated[
        bool,
        typer.Option(
            "--like-cron",
            help="With --crontab: keep cron's behaviour (misfire skip, overlap allow, no "
            "retry) instead of duetime's defaults.",
        ),
    ] = False,
    prefix: Annotated[
        str, typer.Option("--prefix", help="With --crontab: the job names' prefix.")
    ] = "cron",
    django_celery_beat: Annotated[
        str | None,
        typer.Option(
            "--django-celery-beat",
            metavar="DATABASE_URL",
            help="Import django-celery-beat's periodic tasks from its tables (a postgresql:// "
            "URL or a SQLite file) instead of FILE.jsonl (docs/moving-from-celery-beat.md).",
        ),
    ] = None,
    skip_refused: Annotated[
        bool,
        typer.Option(
            "--skip-refused",
            help="With --crontab or --django-celery-beat: import what can be, reporting the "
            "rest, instead of importing nothing.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="With --crontab or --django-celery-beat: print what would be imported, write "
            "nothing.",
        ),
    ] = False,
) -> None:
    """Create many jobs fast from a JSON Lines file (existing names are left unchanged).

    FILE.jsonl holds one JSON object per line, one job each, with the fields of app.schedule:
    name and task (or target, a webhook: {"type": "http", "url": ...}), exactly one of cron,
    at, every or now, and optionally tz, anchor, payload, retry, priority, timeout, misfire,
    misfire_grace, overlap, delivery, queue, tags, metadata, max_concurrency, concurrency_key,
    max_backfill, sla, expected_duration, jitter, start_at, end_at, max_runs. at, anchor,
    start_at and end_at are ISO 8601 instants with an offset (at may also be a delay: PT3H,
    90s); every is seconds, a duration (90s, 1h30m) or words ("2 hours", "1 day"); retry is
    an object with max_attempts, backoff_base, backoff_factor, backoff_cap. Blank lines are
    skipped. A bad line is named by its number; nothing of its batch is written (earlier
    batches are). On a terminal, a progress bar runs on stderr.

    Instead of FILE.jsonl, --celery-beat MODULE:ATTR imports a celery beat schedule (a Celery
    app or its beat_schedule dict): crontabs become cron jobs in the app's zone (or --tz),
    intervals every jobs; an entry with no duetime equivalent is named and nothing is written
    (docs/moving-from-celery-beat.md). --django-celery-beat DATABASE_URL reads
    django-celery-beat's tables the same way (disabled tasks become paused jobs).

    --crontab FILE imports a crontab's lines as jobs running commands, and writes the
    commands to the allow-list --commands-out FILE that workers read (DUETIME_COMMANDS).
    CRON_TZ sets the lines' zone; lines that need a shell, @reboot and bad lines are listed
    with their numbers and nothing is imported (docs/moving-from-cron.md).

    \b
    Example FILE.jsonl (see docs/cli.md):
    {"name": "nightly-report", "task": "reports.build", "cron": "0 3 * * *", "tz": "UTC"}
    {"name": "reminder", "task": "mail.send", "at": "2030-01-01T09:00:00Z"}
    {"name": "poll", "task": "feeds.poll", "every": "90s", "retry": {"max_attempts": 5}}"""
    sources = [file, celery_beat, crontab, django_celery_beat]
    if sum(source is not None for source in sources) != 1:
        fail(
            "give one of FILE.jsonl, --celery-beat MODULE:ATTR, --crontab FILE or "
            "--django-celery-beat DATABASE_URL"
        )
    if crontab is not None:
        import_crontab(
            crontab, commands_out=commands_out, tz=tz, system=system, allow_shell=allow_shell,
            skip_refused=skip_refused, prefix=prefix, like_cron=like_cron, dry_run=dry_run,
            db=db, tenant=tenant, allow_unregistered=allow_unregistered,
        )  # fmt: skip
        return
    if django_celery_beat is not None:
        import_django_celery_beat(
            django_celery_beat, tz=tz, skip_refused=skip_refused, dry_run=dry_run, db=db,
            tenant=tenant, allow_unregistered=allow_unregistered,
        )  # fmt: skip
        return
    if celery_beat is not None:
        import_celery_beat(celery_beat, tz, db, tenant, allow_unregistered=allow_unregistered)
        return
    assert file is not None
    if file != "-" and not Path(file).is_file():
        fail(f"{file}: no such file")
    stream: IO[bytes] = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115
    lines = _Lines(stream)
    total = 0
    size = None if file == "-" else Path(file).stat().st_size
    bar = ProgressBar("importing jobs", total=size)

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal total
        for spec in lines:
            total += 1
            if total % PROGRESS_EVERY == 0:  # per chunk of lines, not per line
                bar.update(lines.bytes_read, f"{total:,} lines")
            yield spec

    async def body(app: AsyncApp) -> int:
        try:
            created = await app.schedule_many(
                counted(), allow_unregistered=allow_unregistered, batch_size=batch_size
            )
        except ValidationError as exc:
            fail(_explain(exc, lines))
        bar.update(lines.bytes_read, f"{total:,} lines")
        return created

    started = time.perf_counter()
    try:
        with bar:
            created = with_app(db, tenant, body)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    elapsed = time.perf_counter() - started
    rate = total / elapsed if elapsed > 0 else 0.0
    typer.echo(
        f"imported {created} jobs ({total - created} existed already) from {total} lines "
        f"in {elapsed:.1f} s ({rate:,.0f} jobs/s)"
    )
