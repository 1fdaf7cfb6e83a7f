"""``duetime outbox``: broker messages (docs/brokers.md) — the outbox's depth, the tenant's
dead messages (refused by their broker for good), and replaying them."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.app import AsyncApp
from duetime.cli._common import (
    DbOption,
    JsonOption,
    TenantOption,
    command_group,
    fail,
    print_json,
    with_app,
)
from duetime.cli._output import check_limit, clip, print_fields, print_table, show_instant

commands = typer.Typer()
outbox = command_group(
    commands, "outbox", "Broker messages: the outbox's depth, dead messages, replays."
)


@outbox.command("status")
def status(
    db: DbOption = None, tenant: TenantOption = "default", as_json: JsonOption = False
) -> None:
    """Unpublished messages (every tenant's), the oldest one, and dead messages."""
    depth = with_app(db, tenant, lambda app: app.outbox.depth(), create=False)
    if as_json:
        print_json(
            {
                "pending": depth.pending,
                "oldest": None if depth.oldest is None else depth.oldest.isoformat(),
                "dead": depth.dead,
                "by_connection": depth.by_connection,
            }
        )
        return
    print_fields(
        [
            ("pending", depth.pending),
            ("oldest", show_instant(depth.oldest)),
            ("dead", depth.dead),
            ("by connection", ", ".join(f"{k}: {v}" for k, v in depth.by_connection.items())),
        ]
    )


@outbox.command("dead")
def dead(
    limit: Annotated[int, typer.Option("--limit", help="Messages to list (1-1000).")] = 100,
    after: Annotated[
        int | None, typer.Option("--after", help="List those after this outbox id.")
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """The tenant's dead messages (their broker refused them for good), oldest first."""
    check_limit(limit)
    rows = with_app(db, tenant, lambda app: app.outbox.dead(limit=limit, after=after), create=False)
    if as_json:
        print_json(
            [
                {
                    "id": r.id,
                    "message_id": r.message_id,
                    "run_id": str(r.run_id),
                    "attempt": r.attempt,
                    "connection": r.connection,
                    "target": r.target,
                    "headers": r.headers,
                    "body": r.body,
                    "tries": r.tries,
                    "last_error": r.last_error,
                    "created_at": r.created_at.isoformat(),
                    "dead_at": None if r.dead_at is None else r.dead_at.isoformat(),
                }
                for r in rows
            ]
        )
        return
    print_table(
        ["id", "message id", "connection", "dead at", "error"],
        [
            (r.id, r.message_id, r.connection, show_instant(r.dead_at), clip(r.last_error or ""))
            for r in rows
        ],
        empty="no dead broker messages",
    )


@outbox.command("replay")
def replay(
    ids: Annotated[
        list[int] | None, typer.Argument(metavar="[ID]...", help="Outbox ids (see `dead`).")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Replay every dead message.")] = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Put dead messages back in the outbox: the relays publish them again (same ids)."""
    if bool(ids) == every:
        fail("give outbox ids or --all (not both)")

    async def body(app: AsyncApp) -> int:
        return await app.outbox.replay(None if every else ids)

    count = with_app(db, tenant, body)
    typer.echo(f"replayed {count} message(s)")
