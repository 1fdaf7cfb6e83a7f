"""The root Typer application: it mounts each command module's ``commands`` (a Typer), in the
order ``duetime --help`` lists them. Command modules never import this one (nor each other):
what they share is in ``_common``, ``_output`` and ``_lifecycle``.

The root also owns how help reads, for every command at once (:func:`_reflow_help`,
:func:`_flags_take_no_metavar`), and ``duetime completion SHELL``."""

from __future__ import annotations

import inspect
from typing import Annotated

import typer
from typer._click.core import Context as ClickContext
from typer._completion_classes import completion_init
from typer._completion_shared import get_completion_script
from typer.core import TyperOption

from duetime.cli import (
    api_server,
    audit,
    bench,
    bulk,
    calendars,
    doctor,
    explain,
    job_lifecycle,
    jobs,
    keys,
    migrate,
    nodes,
    outbox,
    preview,
    processes,
    runs,
    tenants,
    workflows,
)
from duetime.cli._common import fail

cli = typer.Typer(
    name="duetime",
    help="duetime: a distributed job scheduler. Every command takes --db (or "
    "DUETIME_DATABASE_URL): a SQLite path (default ./duetime.db) or a postgresql:// URL.",
    no_args_is_help=True,
    add_completion=False,  # `duetime completion SHELL` instead: it names the shell it prints
    pretty_exceptions_enable=False,
)

jobs.jobs.add_typer(bulk.commands)  # `duetime jobs import`
jobs.jobs.add_typer(calendars.backfill_commands)  # `duetime jobs backfill`
jobs.jobs.add_typer(job_lifecycle.commands)  # `jobs history`, `pause-on-failure`, `sync`

for module in (
    explain,
    nodes,
    preview,
    migrate,
    doctor,
    processes,
    api_server,
    jobs,
    keys,
    runs,
    tenants,
    calendars,
    audit,
    workflows,
    outbox,
    bench,
):
    cli.add_typer(module.commands)


# --- completion -------------------------------------------------------------------------------

PROG_NAME = "duetime"
COMPLETE_VAR = "_DUETIME_COMPLETE"
"""The variable the shell sets when it asks ``duetime`` for completions."""
SHELLS = ("bash", "zsh", "fish", "powershell")

completion_init()  # answer `_DUETIME_COMPLETE=complete_<shell> duetime …` (typer's protocol)
_completion = typer.Typer()
cli.add_typer(_completion)  # mounted last: listed after the other commands


@_completion.command("completion")
def completion(
    shell: Annotated[str, typer.Argument(metavar="SHELL", help="bash, zsh, fish or powershell.")],
) -> None:
    """Print the shell completion script for SHELL (bash, zsh, fish or powershell).

    Load it in the current shell with `eval "$(duetime completion bash)"`, or save it where
    your shell reads completions (docs/cli.md)."""
    if shell not in SHELLS:
        fail(f"SHELL: {shell!r} is not one of: {', '.join(SHELLS)}")
    typer.echo(get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell))


# --- the root's own option --------------------------------------------------------------------


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


# --- how help reads ---------------------------------------------------------------------------


def reflow(text: str) -> str:
    """Help text whose paragraphs are one line each, so the terminal wraps them (never the
    docstring's source lines). Paragraphs are separated by a blank line; one that starts with
    ``\\b`` (click's "keep as written") keeps its lines, without the marker."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p.removeprefix("\b").strip("\n") if p.startswith("\b") else " ".join(p.split())
        for p in paragraphs
    )


def _reflow_help(app: typer.Typer) -> None:
    """Reflow the help of every command and group under ``app`` (the rich help keeps a
    docstring's line breaks, cutting the command listing mid-sentence)."""
    for command in app.registered_commands:
        text = command.help if isinstance(command.help, str) else inspect.getdoc(command.callback)
        if text:
            command.help = reflow(text)
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        if isinstance(sub.info.help, str):
            sub.info.help = reflow(sub.info.help)
        _reflow_help(sub)


def _flags_take_no_metavar() -> None:
    """A flag (``--json``, ``--help``, ``--yes`` …) takes no value, so its help shows none.

    Typer's rich help prints the option's type for flags too (``--json <bool>``), unlike its
    plain help; this makes the rich help do what the plain one does, for every flag."""
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: ClickContext) -> str | None:
        return None if self.is_flag or self.count else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_reflow_help(cli)
_flags_take_no_metavar()
