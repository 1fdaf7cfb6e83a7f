"""``duetime preview``: the next fire instants of a cron expression (pure time math, no
database)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from duetime._types import Schedule, ScheduleKind
from duetime.cli._common import JsonOption, fail, print_json
from duetime.cli._output import (
    occurrence_jsonable,
    parse_instant,
    print_table,
    show_instant,
    show_local,
)
from duetime.cli._root import cli
from duetime.errors import DuetimeError
from duetime.schedules import preview as preview_schedule
from duetime.schedules import validate_schedule

# Accepted like every other command's, and ignored: a preview opens no database.
UnusedDb = Annotated[
    str | None,
    typer.Option(
        "--db", envvar="DUETIME_DATABASE_URL", hidden=True, help="Ignored: needs no database."
    ),
]
UnusedTenant = Annotated[
    str,
    typer.Option(
        "--tenant", envvar="DUETIME_TENANT", hidden=True, help="Ignored: needs no database."
    ),
]


@cli.command("preview")
def preview(
    expression: Annotated[
        str, typer.Argument(metavar="EXPR", help="Cron expression, e.g. '30 2 * * *'.")
    ],
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone the expression is in.")] = "UTC",
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="INSTANT",
            help="List fires strictly after this ISO 8601 instant with offset or Z [default: now].",
        ),
    ] = None,
    count: Annotated[int, typer.Option("--count", help="How many fire instants (1-1000).")] = 10,
    db: UnusedDb = None,
    tenant: UnusedTenant = "default",
    as_json: JsonOption = False,
) -> None:
    """The next fire instants of a cron expression, in UTC and local time; fires a DST change
    moved or doubled are marked."""
    after = datetime.now(UTC) if start is None else parse_instant(start, "--from")
    schedule = Schedule(ScheduleKind.CRON, cron=expression.strip(), tz=tz)
    try:
        validate_schedule(schedule, after)
        occurrences = preview_schedule(schedule, after, count)
    except DuetimeError as exc:
        fail(str(exc))
    if as_json:
        print_json([occurrence_jsonable(o) for o in occurrences])
        return
    print_table(
        ["#", "UTC", f"local ({tz})", "DST"],
        [
            (i, show_instant(o.instant), show_local(o.local), o.dst_note)
            for i, o in enumerate(occurrences, 1)
        ],
        empty="no fire instants",
    )
