"""The root Typer application; each command group lives in its own module."""

from __future__ import annotations

import typer

cli = typer.Typer(
    name="duetime",
    help="duetime: a distributed job scheduler. Every command takes --db (or "
    "DUETIME_DATABASE_URL): a SQLite path (default ./duetime.db) or a postgresql:// URL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules register themselves on import.
from duetime.cli import (  # noqa: E402,F401
    bulk,
    explain,
    jobs,
    keys,
    nodes,
    preview,
    runs,
    serve,
    server,
    tenants,
)
