"""``duetime preview``: the next fire instants of a cron expression or of an interval
(``--every``; pure time math, no database), or of a job's schedule with ``--job`` (its ``H``
values are the job's own)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from duetime._types import Occurrence, Schedule, ScheduleKind
from duetime.app import AsyncApp
from duetime.cli._common import JsonOption, fail, print_json, with_app
from duetime.cli._output import (
    occurrence_jsonable,
    parse_every_option,
    parse_instant,
    print_table,
    show_instant,
    show_local,
)
from duetime.errors import DuetimeError
from duetime.schedules import every_schedule, validate_schedule
from duetime.schedules import preview as preview_schedule

# Accepted like every other command's; only --job opens the database.
UnusedDb = Annotated[
    str | None,
    typer.Option(
        "--db", envvar="DUETIME_DATABASE_URL", help="With --job: SQLite path or postgresql:// URL."
    ),
]
UnusedTenant = Annotated[
    str,
    typer.Option("--tenant", envvar="DUETIME_TENANT", help="With --job: the job's tenant."),
]


commands = typer.Typer()


@commands.command("preview")
def preview(
    expression: Annotated[
        str | None,
        typer.Argument(
            metavar="[EXPR]",
            help="Cron expression, e.g. '30 2 * * *' (H hashes the expression's text).",
        ),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option(
            "--job", metavar="NAME", help="Preview this job's schedule (of --tenant, in --db)."
        ),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every",
            metavar="INTERVAL",
            help="Preview an interval instead, as jobs add --every takes it ('1 day' in --tz).",
        ),
    ] = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            metavar="INSTANT",
            help="With --every: where it counts from (default: --from).",
        ),
    ] = None,
    tz: Annotated[
        str, typer.Option("--tz", help="IANA time zone the expression (or --every) is in.")
    ] = "UTC",
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="INSTANT",
            help="List fires strictly after this ISO 8601 instant with offset or Z (default: now).",
        ),
    ] = None,
    count: Annotated[int, typer.Option("--count", help="How many fire instants (1-1000).")] = 10,
    db: UnusedDb = None,
    tenant: UnusedTenant = "default",
    as_json: JsonOption = False,
) -> None:
    """The next fire instants of a cron expression (or of an interval, --every, or of a job's
    schedule, --job), in UTC and local time; fires a DST change moved or doubled are marked."""
    after = datetime.now(UTC) if start is None else parse_instant(start, "--from")
    if (expression is not None) + (job is not None) + (every is not None) != 1:
        fail("give a cron expression, --every INTERVAL or --job NAME (one of them)")
    if anchor is not None and every is None:
        fail("--anchor goes with --every")
    bounded: list[Occurrence] | None = None  # a job's, within its bounds (start_at, end_at, …)
    if job is not None:

        async def body(app: AsyncApp) -> tuple[Schedule, list[Occurrence]]:
            found = await app.get(job)
            return found.schedule, await app.preview_job(found.id, after=after, count=count)

        schedule, bounded = with_app(db, tenant, body, create=False)
        tz = schedule.tz
    elif every is not None:
        interval = parse_every_option(every, "--every")
        start_at = after if anchor is None else parse_instant(anchor, "--anchor")
        if isinstance(interval, float):
            try:
                interval = timedelta(seconds=interval)
            except (OverflowError, ValueError):
                fail(f"--every: {every!r} is not a usable number of seconds")
        schedule = every_schedule(interval, tz, start_at)
    else:
        assert expression is not None
        schedule = Schedule(ScheduleKind.CRON, cron=expression.strip(), tz=tz)
    try:
        validate_schedule(schedule, after)
        occurrences = preview_schedule(schedule, after, count)
    except DuetimeError as exc:
        fail(str(exc))
    occurrences = occurrences if bounded is None else bounded
    if as_json:
        print_json([occurrence_jsonable(o) for o in occurrences])
        return
    print_table(
        ["#", "UTC", f"local ({tz})", "note"],
        [
            (i, show_instant(o.instant), show_local(o.local), o.note)
            for i, o in enumerate(occurrences, 1)
        ],
        empty="no fire instants",
    )
