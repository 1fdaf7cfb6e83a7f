"""``duetime audit``: the audit trail of a tenant — who created, changed, paused, resumed,
triggered, replayed, cancelled, deleted or revoked what, when (docs/audit.md). The CLI's own
changes are recorded as ``cli:<OS user>@<database>``."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime._audit import ACTIONS, AuditRecord
from duetime._types import Page
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, JsonOption, TenantOption
from duetime.cli._output import (
    AllPagesOption,
    CursorOption,
    clip,
    compact_json,
    parse_instant,
    print_listing,
    read_listing,
    show_instant,
)

commands = typer.Typer()


@commands.command("audit")
def list_audit(
    actor: Annotated[
        str | None, typer.Option("--actor", help="Only records of this actor.")
    ] = None,
    action: Annotated[
        str | None,
        typer.Option("--action", help=f"Only this action: {', '.join(ACTIONS)}."),
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            "--subject",
            metavar="NAME_OR_ID",
            help="Only records about this job, run, key or tenant (its id or name).",
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Recorded at or after (ISO 8601 with offset).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Recorded before (ISO 8601 with offset).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Records per page (1-1000).")] = 100,
    cursor: CursorOption = None,
    every: AllPagesOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """The audit trail: who changed what, when, newest first (a page at a time, or --all)."""
    start = None if since is None else parse_instant(since, "--since")
    end = None if until is None else parse_instant(until, "--until")

    async def fetch(app: AsyncApp, at: str | None) -> Page[AuditRecord]:
        return await app.audit(
            actor=actor,
            action=action,
            subject=subject,
            since=start,
            until=end,
            limit=limit,
            cursor=at,
        )

    page = read_listing(
        db, tenant, fetch, limit=limit, cursor=cursor, every=every, what="audit records"
    )
    print_listing(
        page,
        as_json,
        ["at", "actor", "action", "subject", "change"],
        lambda r: (
            show_instant(r.at),
            r.actor,
            r.action,
            f"{r.subject_kind} {r.subject_name or r.subject_id or ''}".strip(),
            clip(compact_json(r.change)) if r.change is not None else "",
        ),
        empty="no audit records",
    )
