"""``duetime migrate``: create or upgrade the database schema."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer

from duetime._run_partitions import check_run_partitions
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, fail, run_async, settings_for
from duetime.errors import NodesStillRunning, ValidationError

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
    hash_partitions: Annotated[
        int | None,
        typer.Option(
            help="PostgreSQL only, offline: then partition the runs table into this many "
            "partitions (2, 4, 8, 16, 32 or 64) by its job's partition key "
            "(docs/howto/hash-partitioning.md); waits for the processes to stop like a "
            "migration that is not a rolling upgrade",
        ),
    ] = None,
) -> None:
    """Create or upgrade the database schema (safe to run again, and concurrently).

    A migration that is not a rolling upgrade lists the processes still running and waits for
    them to stop before it applies."""
    if hash_partitions is not None:
        try:
            check_run_partitions(hash_partitions)
        except ValidationError as exc:
            fail(f"--hash-partitions: {exc.reason}")

    async def once() -> int:
        async with AsyncApp(settings=settings_for(db), migrate=True) as opened:
            version = await opened.migrate()
            if hash_partitions is not None:
                done = await opened.partition_runs(hash_partitions)
                typer.echo(
                    f"runs {'is now' if done else 'was already'} partitioned into "
                    f"{hash_partitions} by job partition key",
                    err=True,
                )
            return version

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
