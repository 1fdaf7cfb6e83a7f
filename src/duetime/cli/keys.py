"""``duetime keys …``: API keys for the REST API — create (the secret is printed once), list,
revoke."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime._types import ApiKey, ApiRole
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, JsonOption, command_group, print_json, with_app
from duetime.cli._output import (
    parse_choice,
    print_fields,
    print_result,
    print_rows,
    show_instant,
    to_jsonable,
)

commands = typer.Typer()
keys = command_group(
    commands, "keys", "API keys of the REST API: create (the secret is shown once), list, revoke."
)


@keys.command("create")
def create(
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="viewer (reads), operator (also writes, remote workers included), admin "
            "(also manages its tenant: keys, limits) or superadmin (manages the installation: "
            "acts on any tenant).",
        ),
    ],
    tenant: Annotated[
        str, typer.Option("--tenant", envvar="DUETIME_TENANT", help="The key's tenant.")
    ] = "default",
    name: Annotated[str, typer.Option("--name", help="A label to recognise the key by.")] = "",
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an API key. Its secret is printed this once: only its hash is stored."""
    chosen = parse_choice(role, ApiRole, "--role")
    assert chosen is not None

    async def body(app: AsyncApp) -> tuple[ApiKey, str]:
        return await app.create_key(chosen, name=name)

    key, secret = with_app(db, tenant, body)
    if as_json:
        print_json({**to_jsonable(key), "key": secret})
        return
    print_fields(
        [
            ("id", str(key.id)),
            ("tenant", key.tenant),
            ("role", str(key.role)),
            ("name", key.name),
            ("key", secret),
        ],
        title="API key created",
    )
    typer.echo("Store the key now: it is not shown again (only its hash is kept).", err=True)


@keys.command("list")
def list_keys(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's keys (default: all).")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List API keys (never their secrets), revoked ones included, oldest first."""

    async def body(app: AsyncApp) -> list[ApiKey]:
        return await app.keys(all_tenants=tenant is None)

    print_rows(
        with_app(db, tenant or "default", body, create=False),
        as_json,
        ["id", "tenant", "role", "name", "prefix", "created", "last used", "revoked"],
        lambda k: (
            str(k.id),
            k.tenant,
            str(k.role),
            k.name,
            k.prefix + "…",
            show_instant(k.created_at),
            show_instant(k.last_used_at),
            show_instant(k.revoked_at),
        ),
        empty="no API keys",
        data=lambda found: {"items": to_jsonable(found)},
    )


@keys.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The key's id.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke an API key (of any tenant): requests with it are refused from now on."""

    async def body(app: AsyncApp) -> ApiKey:
        return await app.revoke_key(key_id, any_tenant=True)

    print_result(
        with_app(db, "default", body),
        as_json,
        lambda key: typer.echo(f"revoked key {key.id} ({key.role} of tenant {key.tenant!r})"),
    )
