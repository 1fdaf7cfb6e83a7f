"""``duetime jobs history JOB``, ``jobs pause-on-failure JOB`` and ``jobs sync FILE.jsonl``: a
job's lifecycle history, its pause on failure, and declared jobs kept in sync (decision 0023).
Mounted into ``duetime jobs`` by the root."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import typer

from duetime._types import Job, JobEvent
from duetime.app import AsyncApp, SyncPlan
from duetime.cli._common import (
    AllowUnregisteredOption,
    DbOption,
    JsonOption,
    TenantOption,
    fail,
    with_app,
)
from duetime.cli._job_specs import spec_fields
from duetime.cli._output import print_result, print_rows, show_instant
from duetime.errors import ValidationError

commands = typer.Typer()
"""Mounted into ``duetime jobs`` by the root."""

JobArgument = Annotated[str, typer.Argument(metavar="JOB", help="The job's name or id.")]


def _detail(event: JobEvent) -> str:
    parts = [f"{k}: {v}" for k, v in event.detail.items() if v is not None]
    return ", ".join(parts)


@commands.command("history")
def history(
    job: JobArgument,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Events shown.")] = 50,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """The job's lifecycle events, newest first: pauses (with their notes), resumes
    (auto_resumed when a pause ended), paused_on_failure, retired (by a sync)."""

    print_rows(
        with_app(db, tenant, lambda app: app.job_history(job, limit=limit), create=False),
        as_json,
        ["at", "event", "by", "detail"],
        lambda e: (show_instant(e.at), e.kind, e.actor, _detail(e)),
        title=f"history of job {job!r}",
        empty="history: none yet",
    )


@commands.command("pause-on-failure")
def pause_on_failure(
    job: JobArgument,
    after: Annotated[
        int | None,
        typer.Option(
            "--after", min=1, max=1000, help="Pause after this many consecutive dead runs."
        ),
    ] = None,
    off: Annotated[bool, typer.Option("--off", help="Never pause it on failure.")] = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Pause the job by itself after N consecutive dead runs (an alert says so; resuming it
    starts the count again), or --off."""
    if (after is None) == (not off):
        fail("give exactly one of --after N or --off")

    changed = with_app(db, tenant, lambda app: app.pause_on_failure(job, None if off else after))
    print_result(changed, as_json, _say_pause_on_failure)


def _say_pause_on_failure(changed: Job) -> None:
    if changed.pause_after_dead is None:
        typer.echo(f"job {changed.name!r} never pauses on failure")
    else:
        typer.echo(
            f"job {changed.name!r} pauses after {changed.pause_after_dead} consecutive dead runs"
        )


def _declared(path: str) -> list[dict[str, Any]]:
    """The jobs of a JSON Lines file (the ``jobs import`` format), a bad line named."""
    if not Path(path).is_file():
        fail(f"{path}: no such file")
    specs = []
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                specs.append(spec_fields(orjson.loads(raw)))
            except orjson.JSONDecodeError as exc:
                fail(f"line {number}: not valid JSON ({exc})")
            except ValidationError as exc:
                fail(f"line {number}: {exc}")
    return specs


@commands.command("sync")
def sync(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE.jsonl", help="Every job the program declares, one JSON object a line."
        ),
    ],
    source: Annotated[
        str, typer.Option("--source", help="The declaring program: only its jobs are retired.")
    ] = "default",
    retire: Annotated[
        str, typer.Option("--retire", help="pause (default) or delete the jobs no longer declared.")
    ] = "pause",
    apply: Annotated[
        bool, typer.Option("--apply", help="Make the changes (default: print the plan only).")
    ] = False,
    allow_unregistered: AllowUnregisteredOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Keep declared jobs in sync: create or update the jobs of FILE.jsonl (the jobs import
    format) and retire this --source's jobs it no longer lists; a dry run unless --apply."""
    if retire not in ("pause", "delete"):
        fail(f"--retire: {retire!r} is not one of: pause, delete")
    how: Literal["pause", "delete"] = "delete" if retire == "delete" else "pause"
    specs = _declared(file)

    async def body(app: AsyncApp) -> SyncPlan:
        return await app.sync(
            specs,
            source=source,
            retire=how,
            dry_run=not apply,
            allow_unregistered=allow_unregistered,
        )

    print_result(with_app(db, tenant, body, create=apply), as_json, _print_plan)


def _print_plan(plan: SyncPlan) -> None:
    head = "synced" if not plan.dry_run else "dry run (give --apply to make these changes):"
    typer.echo(f"{head} source {plan.source!r}")
    for label, names in (
        ("create", plan.create),
        ("update", plan.update),
        ("adopt", plan.adopt),
        (f"retire ({plan.retire_by})", plan.retire),
    ):
        typer.echo(f"  {label}: {', '.join(names) if names else '-'}")
