"""``duetime migrate``: create or upgrade the database schema."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer

from duetime.app import AsyncApp
from duetime.cli._common import DbOption, run_async, settings_for
from duetime.errors import NodesStillRunning

commands = typer.Typer()

POLL_SECONDS = 2.0


@commands.command()
def migrate(
    db: DbOption = None,
    wait: Annotated[
        float,
        typer.Option(
            help="When a migration needs the previous release stopped, wait this many seconds "
            "for its processes to stop (0: fail at once)",
            min=0,
        ),
    ] = 600.0,
) -> None:
    """Create or upgrade the database schema (safe to run again, and concurrently).

    A migration that is not a rolling upgrade lists the processes still running and waits for
    them to stop before it applies."""

    async def once() -> int:
        async with AsyncApp(settings=settings_for(db), migrate=True) as opened:
            return await opened.migrate()

    async def go() -> int:
        deadline = time.monotonic() + wait
        told: list[str] = []
        while True:
            try:
                return await once()
            except NodesStillRunning as exc:
                if time.monotonic() + POLL_SECONDS > deadline:
                    raise
                if exc.nodes != told:
                    typer.echo(f"{exc}; waiting up to {wait:g}s", err=True)
                    told = exc.nodes
                await asyncio.sleep(POLL_SECONDS)

    version = run_async(go)
    typer.echo(f"schema is at version {version}")
