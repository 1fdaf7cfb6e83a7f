"""``duetime calendars …`` (a tenant's exclusion calendars) and ``duetime jobs backfill``
(mounted into ``duetime jobs`` by the root, through :data:`backfill_commands`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from duetime._types import StoredCalendar
from duetime.app import AsyncApp
from duetime.app.backfill import BackfillResult
from duetime.cli._common import DbOption, JsonOption, TenantOption, command_group, fail, with_app
from duetime.cli._output import (
    ProgressBar,
    parse_instant,
    print_fields,
    print_result,
    print_rows,
    print_table,
    show_instant,
)

commands = typer.Typer()
calendars = command_group(commands, "calendars", "Exclusion calendars that jobs name.")
backfill_commands = typer.Typer()
"""Mounted into ``duetime jobs`` by the root."""

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="Calendar name.")]


def _rules(rule: list[str] | None, file: Path | None) -> list[Any]:
    """The rules given as ``--rule JSON`` (repeatable) and/or a JSON file holding a list."""
    rules: list[Any] = []
    if file is not None:
        try:
            loaded = json.loads(file.read_text())
        except (OSError, ValueError) as exc:
            fail(f"--file: cannot read a JSON list of rules from {str(file)!r}: {exc}")
        if not isinstance(loaded, list):
            fail(f"--file: {str(file)!r} must hold a JSON list of rules")
        rules += loaded
    for text in rule or []:
        try:
            rules.append(json.loads(text))
        except ValueError:
            fail(f'--rule: {text!r} is not JSON (e.g. \'{{"weekdays": ["sat", "sun"]}}\')')
    if not rules:
        fail("give at least one --rule (or --file)")
    return rules


def _print(calendar: StoredCalendar) -> None:
    print_fields(
        [
            ("name", calendar.name),
            ("description", calendar.description or "-"),
            *((f"rule {i + 1}", json.dumps(r)) for i, r in enumerate(calendar.rules)),
            ("updated", show_instant(calendar.updated_at)),
        ]
    )


@calendars.command("set")
def set_calendar(
    name: NameArg,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            metavar="JSON",
            help='A rule (repeatable): {"date": "2026-12-25"}, {"from": "…", "to": "…"}, '
            '{"weekdays": ["sat", "sun"]}, {"cron": "* 0-5 * * *"}, {"holidays": "US", '
            '"subdiv": "CA"}.',
        ),
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="A JSON file holding a list of rules.")
    ] = None,
    description: Annotated[str, typer.Option("--description", help="What it is for.")] = "",
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Create a calendar, or replace its rules. An occurrence of a job that names it is
    skipped (or moved, with the job's --calendar-shift) when a rule matches its day or minute in
    the job's zone."""
    rules = _rules(rule, file)

    async def body(app: AsyncApp) -> StoredCalendar:
        return await app.calendars.set(name, rules, description=description)

    print_result(with_app(db, tenant, body), as_json, _print_saved)


def _print_saved(calendar: StoredCalendar) -> None:
    typer.echo(f"saved calendar {calendar.name!r}")
    _print(calendar)


@calendars.command("list")
def list_calendars(
    db: DbOption = None, tenant: TenantOption = "default", as_json: JsonOption = False
) -> None:
    """The tenant's calendars."""
    print_rows(
        with_app(db, tenant, lambda app: app.calendars.find(), create=False),
        as_json,
        ["name", "rules", "description"],
        lambda c: (c.name, len(c.rules), c.description),
        empty="no calendars",
    )


@calendars.command("show")
def show_calendar(
    name: NameArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """One calendar and its rules."""
    found = with_app(db, tenant, lambda app: app.calendars.get(name), create=False)
    print_result(found, as_json, _print)


@calendars.command("delete")
def delete_calendar(name: NameArg, db: DbOption = None, tenant: TenantOption = "default") -> None:
    """Delete a calendar (refused while a job names it)."""

    async def body(app: AsyncApp) -> None:
        await app.calendars.delete(name)

    with_app(db, tenant, body)
    typer.echo(f"deleted calendar {name!r}")


@backfill_commands.command("backfill")
def backfill(
    job: Annotated[str, typer.Argument(metavar="NAME_OR_ID", help="Job name or id.")],
    start: Annotated[
        str, typer.Option("--from", metavar="INSTANT", help="First instant (2026-11-01T00:00Z).")
    ],
    end: Annotated[
        str, typer.Option("--to", metavar="INSTANT", help="Last instant, included (not future).")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Create nothing; list what would run.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm a range longer than a year.")] = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Create the missing runs of the job's occurrences from --from to --to.

    Idempotent (run it again: nothing new), through the job's calendars, released at
    DUETIME_BACKFILL_RATE runs per second, never misfired (origin 'backfill')."""
    since, until = parse_instant(start, "--from"), parse_instant(end, "--to")

    async def body(app: AsyncApp) -> BackfillResult:
        with ProgressBar("backfilling") as bar:
            return await app.jobs.backfill(
                job,
                since,
                until,
                dry_run=dry_run,
                yes=yes,
                progress=lambda done, total: bar.update(done, f"{done}/{total} runs"),
            )

    print_result(with_app(db, tenant, body), as_json, _print_backfill)


def _print_backfill(result: BackfillResult) -> None:
    dry_run = result.dry_run
    verb = "would create" if dry_run else "created"
    typer.echo(
        f"{verb} {result.created} runs of {result.job!r} ({result.existing} already had one, "
        f"{result.skipped} skipped by calendars, {result.occurrences} occurrences)"
    )
    if result.warning:
        typer.echo(f"warning: {result.warning}", err=True)
    if dry_run:
        rows: list[tuple[str, str, str]] = [
            (show_instant(o.scheduled_for), show_instant(o.available_at), "run")
            for o in result.runs
        ]
        rows += [
            (show_instant(o.scheduled_for), "-", f"skipped: calendar {o.skipped_by}")
            for o in result.skips
        ]
        rows.sort()
        print_table(["occurrence", "available", "what"], rows, empty="nothing to backfill")
