"""Options and helpers shared by every command: the database, errors, JSON output."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from duetime import _json
from duetime._audit import os_user
from duetime._config import Settings
from duetime._redact import redact_url
from duetime.app import App, AsyncApp
from duetime.errors import DuetimeError, ValidationError

T = TypeVar("T")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="DUETIME_DATABASE_URL",
        show_envvar=True,
        help="SQLite path (default ./duetime.db) or postgresql:// URL.",
    ),
]
ListenUrlOption = Annotated[
    str | None,
    typer.Option(
        "--listen-url",
        envvar="DUETIME_LISTEN_URL",
        show_envvar=True,
        help="A direct postgresql:// URL of the same database to hear notifications on, when "
        "--db goes through PgBouncer in transaction pooling (docs/howto/pgbouncer.md).",
    ),
]
"""``--listen-url`` of the commands that open a store and listen: ``scheduler``, ``worker``,
``server`` and ``up`` (``app_for`` puts it in the settings)."""
TenantOption = Annotated[
    str, typer.Option("--tenant", envvar="DUETIME_TENANT", help="Tenant the command acts on.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
AllowUnregisteredOption = Annotated[
    bool, typer.Option("--allow-unregistered", help="Accept tasks no worker has registered yet.")
]
"""``--allow-unregistered`` of ``jobs sync``, ``jobs import`` and ``workflows register``."""


def command_group(commands: typer.Typer, name: str, help: str) -> typer.Typer:
    """The group ``duetime <name> …`` (its subcommands are added to it), mounted on a module's
    ``commands`` (which the root mounts)."""
    group = typer.Typer(name=name, help=help, no_args_is_help=True)
    commands.add_typer(group)
    return group


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``. It writes to ``sys.stderr``
    itself (not its underlying buffer, as ``typer.echo`` does), so a progress bar on the
    terminal moves the line above itself instead of drawing over it."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    raise typer.Exit(code)


def refuse(entries: list[str], what: str, *, skip: bool) -> None:
    """An import's refused entries: print each (already worded) on stderr, then, unless
    ``skip`` (``--skip-refused``), stop before anything is written (exit 2), counting them in
    ``what`` (``line(s) of FILE``, ``periodic task(s)``)."""
    for entry in entries:
        typer.echo(entry, err=True)
    if entries and not skip:
        fail(
            f"{len(entries)} {what} cannot be imported (above); nothing was written "
            "(--skip-refused imports the others)"
        )


def settings_for(db: str | None, **overrides: Any) -> Settings:
    try:
        return Settings.from_env(database_url=db, **overrides)
    except ValidationError as exc:
        fail(str(exc))


def run_async(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine, turning duetime's errors into a one-line message and exit code 2."""
    try:
        return asyncio.run(make())
    except DuetimeError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot reach the database: {exc}")


def with_app(
    db: str | None,
    tenant: str,
    body: Callable[[AsyncApp], Coroutine[Any, Any, T]],
    *,
    migrate: bool | None = None,
    create: bool = True,
) -> T:
    """Run ``body`` with the app open on ``db``. A read command passes ``create=False``: it
    creates no SQLite file or directory (a missing directory is an error; a missing file reads
    as an empty database)."""

    async def go() -> T:
        settings = settings_for(db)
        actor = cli_actor(settings.database_url)
        app = AsyncApp(settings=settings, tenant=tenant, migrate=migrate, actor=actor)
        await app.open(create=create)
        try:
            return await body(app)
        finally:
            await app.close()

    return run_async(go)


def cli_actor(database_url: str) -> str:
    """Who the audit trail records a command's changes as made by: ``cli:<OS user>@<the
    database, its password hidden>`` (at most 200 characters)."""
    return f"cli:{os_user()}@{redact_url(database_url)}"[:200]


def load_user_app(spec: str | None, settings: Settings) -> App | AsyncApp | None:
    """Import ``module:attribute`` (an App or AsyncApp whose tasks the worker serves)."""
    if not spec:
        return None
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        fail(f"--app must look like module:app, got {spec!r}")
    sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        fail(f"--app: cannot import {module_name!r}: {exc}")
    app = getattr(module, attr, None)
    if not isinstance(app, App | AsyncApp):
        fail(f"--app: {spec!r} is not a duetime App or AsyncApp")
    return app


def print_json(value: Any) -> None:
    typer.echo(_json.dumps(value))
