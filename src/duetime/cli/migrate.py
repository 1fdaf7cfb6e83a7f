"""``duetime migrate``: create or upgrade the database schema."""

from __future__ import annotations

import typer

from duetime.app import AsyncApp
from duetime.cli._common import DbOption, run_async, settings_for

commands = typer.Typer()


@commands.command()
def migrate(db: DbOption = None) -> None:
    """Create or upgrade the database schema (safe to run again, and concurrently)."""

    async def go() -> int:
        async with AsyncApp(settings=settings_for(db), migrate=True) as opened:
            return await opened.migrate()

    version = run_async(go)
    typer.echo(f"schema is at version {version}")
