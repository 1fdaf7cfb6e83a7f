"""The long-running duetime processes: ``up`` (everything in one process), ``scheduler`` and
``worker``. What they share (logging options, signals, loops) is in :mod:`._lifecycle`."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import typer

from duetime.api import ApiServer, is_loopback
from duetime.cli._common import DbOption, ListenUrlOption, fail, run_async
from duetime.cli._demo import print_completion, print_start, register_demo
from duetime.cli._lifecycle import (
    AppOption,
    LogFormat,
    LogLevel,
    MetricsHost,
    MetricsPort,
    app_for,
    configure_logging,
    exit_abandoning_threads,
    install_signals,
    metrics_loops,
    open_until_stopped,
    run_until_stopped,
    worker_note,
)
from duetime.errors import SchemaError

log = logging.getLogger("duetime")

commands = typer.Typer()


@commands.command()
def scheduler(
    db: DbOption = None,
    partitions: Annotated[
        str | None,
        typer.Option(
            help="Serve only job partitions LOW-HIGH (of 0-255), e.g. 0-127: a static range, "
            "no lease. Default: a fair share, leased with the other schedulers."
        ),
    ] = None,
    listen_url: ListenUrlOption = None,
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run a scheduler: materialize due runs (and reap expired leases)."""
    configure_logging(log_level, log_format)
    span = _partitions(partitions)

    async def go() -> None:
        stop = asyncio.Event()
        signals = install_signals(stop)
        async with open_until_stopped(
            app_for(db, None, migrate=None, listen_url=listen_url), signals
        ) as opened:
            log.info("scheduler started (%s)", opened.dialect)
            await run_until_stopped(
                stop,
                *opened.node_loops(stop, roles=("scheduler",), partitions=span),
                *metrics_loops(opened, stop, metrics_port, metrics_host),
            )

    run_async(go)


def _partitions(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        low, high = (int(p) for p in text.split("-", 1))
    except ValueError:
        fail(f"--partitions must look like 0-127, got {text!r}")
    if not 0 <= low <= high <= 255:
        fail(f"--partitions must be within 0-255 with LOW <= HIGH, got {text!r}")
    return low, high


# The logging and metrics options are scheduler's again: typer reads each command's options
# from its own signature (the Annotated aliases in _lifecycle are what is shared).
@commands.command()
def worker(
    db: DbOption = None,
    app: AppOption = None,
    concurrency: Annotated[int | None, typer.Option(help="Runs executed at once.")] = None,
    task: Annotated[
        list[str] | None,
        typer.Option(
            "--task", help="Serve only this task (repeatable); default: every registered task."
        ),
    ] = None,
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue",
            help="Claim only runs of this queue (repeatable): a worker pool; default: every queue.",
        ),
    ] = None,
    listen_url: ListenUrlOption = None,
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run a worker: claim due runs of the tasks it knows (of its queues) and execute them."""
    configure_logging(log_level, log_format)

    async def go() -> None:
        stop = asyncio.Event()
        signals = install_signals(stop)
        async_app = app_for(db, app, migrate=None, listen_url=listen_url)
        if concurrency is not None:
            if concurrency < 1:
                fail("--concurrency must be >= 1")
            async_app.settings = async_app.settings.with_(worker_concurrency=concurrency)
        async with open_until_stopped(async_app, signals):
            w = async_app.worker(tasks=task or None, queues=queue or None)
            signals.note = worker_note(w, async_app.settings.shutdown_grace)
            log.info(
                "worker %s serving %s (queues: %s)",
                w.id,
                ", ".join(w.tasks),
                ", ".join(w.queues) if w.queues else "all",
            )
            await run_until_stopped(
                stop,
                *async_app.node_loops(stop, roles=("worker",)),
                w.run(stop),
                *metrics_loops(async_app, stop, metrics_port, metrics_host),
            )

    _serve(go, ValueError)


@commands.command()
def up(
    db: DbOption = None,
    app: AppOption = None,
    demo: Annotated[
        bool, typer.Option(help="Register demo jobs and print runs as they happen.")
    ] = False,
    host: Annotated[
        str, typer.Option("--host", help="API address: loopback only, unless --auth.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="API port; 0 picks a free one.")] = 8000,
    auth: Annotated[
        bool, typer.Option("--auth", help="Require API keys (needed for a non-loopback --host).")
    ] = False,
    listen_url: ListenUrlOption = None,
    log_level: LogLevel = "warning",
    log_format: LogFormat = "text",
) -> None:
    """Everything in one process on SQLite: migrate, scheduler, worker, the REST API and the
    dashboard at / (open on loopback unless --auth), and /metrics.

    With --demo, register a few demo jobs and watch them run."""
    configure_logging(log_level, log_format)
    if not auth and not is_loopback(host):
        fail(
            f"--host {host} is not a loopback address and the API of `duetime up` is open "
            "(no API key needed): pass --auth to require keys, or keep --host 127.0.0.1"
        )
    async_app = app_for(db, app, migrate=True, listen_url=listen_url)
    where = (
        "PostgreSQL"
        if async_app.dialect == "postgres"
        else f"SQLite file {os.path.abspath(async_app.settings.database_url)}"
    )

    async def go() -> None:
        stop = asyncio.Event()
        signals = install_signals(stop)
        async with open_until_stopped(async_app, signals):
            typer.echo(f"duetime up: scheduler + worker on {where}. Ctrl-C to stop.")
            if demo:
                await register_demo(async_app)
            w = async_app.worker(
                on_start=print_start if demo else None,
                on_complete=print_completion if demo else None,
            )
            signals.note = worker_note(w, async_app.settings.shutdown_grace)
            api = ApiServer(
                async_app, host=host, port=port, auth_required=auth, on_ready=_print_api
            )
            await run_until_stopped(
                stop,
                *async_app.node_loops(stop, roles=("scheduler", "worker", "api")),
                w.run(stop),
                api.run(stop),
            )

    _serve(go, SchemaError)


def _serve(go: Callable[[], Coroutine[Any, Any, None]], refused: type[Exception]) -> None:
    """Run a process with worker threads until it stops (a ``refused`` error ends it with a
    one-line message), then exit without waiting for the threads."""
    try:
        run_async(go)
    except refused as exc:
        fail(str(exc))
    exit_abandoning_threads()


def _print_api(api: ApiServer) -> None:
    access = (
        "API keys required"
        if api.auth_required
        else "open: no API key needed, calls act on tenant 'default' (loopback only)"
    )
    typer.echo(f"API: {api.url}/api/v1 (docs {api.url}/api/v1/docs) — {access}")
    typer.echo(f"dashboard: {api.url}/ — metrics: {api.url}/metrics")
