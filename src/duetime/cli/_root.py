"""The root Typer application: it mounts each command module's ``commands`` (a Typer), in the
order ``duetime --help`` lists them. Command modules never import this one (nor each other):
what they share is in ``_common``, ``_output`` and ``_lifecycle``."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.cli import (
    api_server,
    bulk,
    explain,
    jobs,
    keys,
    migrate,
    nodes,
    preview,
    processes,
    runs,
    tenants,
)

cli = typer.Typer(
    name="duetime",
    help="duetime: a distributed job scheduler. Every command takes --db (or "
    "DUETIME_DATABASE_URL): a SQLite path (default ./duetime.db) or a postgresql:// URL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

jobs.jobs.add_typer(bulk.commands)  # `duetime jobs import`

for module in (explain, nodes, preview, migrate, processes, api_server, jobs, keys, runs, tenants):
    cli.add_typer(module.commands)


def _print_version(value: bool) -> None:
    if value:
        from duetime import __version__

        typer.echo(f"duetime {__version__}")
        raise typer.Exit()


@cli.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            expose_value=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    del version
