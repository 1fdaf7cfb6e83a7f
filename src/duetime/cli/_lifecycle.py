"""What every long-running command shares (``up``, ``scheduler``, ``worker``, ``server``):
logging options, opening the app, signal handling, running loops until a stop, garbage
collector tuning, and the exit.

Signals: the first SIGTERM/SIGINT starts a graceful shutdown (stop claiming, finish or hand
back within the grace period), saying what it waits for; a second one exits at once. While the
process is still connecting to its database the first one ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

import typer

from duetime import _logs
from duetime._redact import redact_url
from duetime.app import AsyncApp
from duetime.app.async_app import supervise
from duetime.app.reads import open_reads
from duetime.cli._common import fail, load_user_app, settings_for
from duetime.metrics import MetricsServer

log = logging.getLogger("duetime")

LogLevel = Annotated[
    str,
    typer.Option("--log-level", envvar="DUETIME_LOG_LEVEL", help="debug, info, warning or error."),
]
LogFormat = Annotated[
    str,
    typer.Option(
        "--log-format",
        envvar="DUETIME_LOG_FORMAT",
        help="text, or json: one JSON object per line (a line about a run carries run_id, job, "
        "tenant, attempt and token).",
    ),
]
MetricsPort = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        envvar="DUETIME_METRICS_PORT",
        help="Serve Prometheus metrics at http://HOST:PORT/metrics (0 picks a free port).",
    ),
]
MetricsHost = Annotated[
    str,
    typer.Option("--metrics-host", envvar="DUETIME_METRICS_HOST", help="Address for /metrics."),
]
AppOption = Annotated[
    str | None,
    typer.Option("--app", help="Import user tasks from module:app (a duetime App or AsyncApp)."),
]


def configure_logging(level: str, fmt: str | None = None) -> None:
    chosen = (fmt or os.environ.get("DUETIME_LOG_FORMAT") or "text").strip().lower()
    if chosen not in _logs.FORMATS:
        fail(f"--log-format must be text or json, got {fmt!r}")
    _logs.configure(level, chosen)


def app_for(
    db: str | None, app_spec: str | None, *, migrate: bool | None, listen_url: str | None = None
) -> AsyncApp:
    """The (unopened) app a long-running command serves, with the user's tasks of ``--app``;
    ``listen_url`` (``--listen-url``), when given, replaces the settings' one."""
    settings = settings_for(db)
    user = load_user_app(app_spec, settings)
    registry = None if user is None else user.registry
    if user is not None:
        # the database the user's app was made with; a --db (or DUETIME_DATABASE_URL) naming
        # another one is refused rather than silently serving a different database
        theirs = user.settings.database_url
        if db is None:
            settings = user.settings
        elif not _same_database(db, theirs):
            fail(
                f"--db {redact_url(db)} is not the database of --app {app_spec} "
                f"({redact_url(theirs)}): drop --db, or give the app's database"
            )
    if listen_url is not None:
        settings = settings.with_(listen_url=listen_url)
    app = AsyncApp(settings=settings, registry=registry, migrate=migrate)
    if app.dialect == "postgres" and not os.environ.get("DUETIME_STARTUP_WAIT"):
        # a service started before its database waits for it instead of exiting
        app.settings = app.settings.with_(startup_wait=600.0)
    return app


def _same_database(a: str, b: str) -> bool:
    """Whether two database URLs name one database (SQLite paths compared resolved)."""
    if a == b:
        return True
    if a.startswith("postgres") or b.startswith("postgres"):
        return False

    def file(url: str) -> str:
        if url.startswith("sqlite:///"):
            url = "/" + url.removeprefix("sqlite:///").lstrip("/")
        return os.path.realpath(url.removeprefix("sqlite://"))

    return file(a) == file(b)


def metrics_loops(
    app: AsyncApp, stop: asyncio.Event, port: int | None, host: str
) -> list[Coroutine[Any, Any, None]]:
    """``/metrics`` on its own port when asked for (``--metrics-port``); its cluster gauges
    read the replica when ``replica_url`` is set (opened at start: a bad one ends the
    process with one line)."""
    if port is None:
        return []
    if not 0 <= port <= 65535:
        fail(f"--metrics-port must be 0-65535, got {port}")

    def ready(server: MetricsServer) -> None:
        typer.echo(f"metrics: {server.url}")

    async def serve() -> None:
        async with open_reads(lambda: app.store, app.settings) as reads:
            server = MetricsServer(reads.cluster_stats, host=host, port=port, on_ready=ready)
            await server.run(stop)

    return [serve()]


class Signals:
    """What a signal does now. ``connected`` is false while the app is still connecting (a
    signal then ends the process: nothing runs yet); ``note`` says what a graceful shutdown
    waits for (a worker sets it: its running runs)."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.connected = False
        self.note: Callable[[], str] = lambda: "stopping"
        self.received: str | None = None


def install_signals(stop: asyncio.Event) -> Signals:
    """The first SIGTERM/SIGINT sets ``stop`` (saying what the shutdown waits for); a second
    exits at once."""
    loop = asyncio.get_running_loop()
    signals = Signals(stop)

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            log.warning("second signal %s: exiting now", name)
            os._exit(1)
        signals.received = name
        if signals.connected:
            log.warning("signal %s: %s; ^C again to abort", name, signals.note())
        else:
            log.warning("signal %s: stopping while connecting to the database", name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    return signals


def worker_note(worker: Any, grace: float) -> Callable[[], str]:
    """The shutdown ``note`` of a process that runs ``worker`` (its ``in_flight`` count)."""

    def note() -> str:
        n = worker.in_flight
        if not n:
            return "no runs in flight: stopping"
        return f"waiting up to {grace:g} s for {n} running run{'s' if n != 1 else ''}"

    return note


@contextlib.asynccontextmanager
async def open_until_stopped(app: AsyncApp, signals: Signals) -> AsyncIterator[AsyncApp]:
    """``async with app`` that a signal interrupts while it is still connecting (a database
    down or refusing for the whole ``startup_wait``): the process then ends at once, with one
    line, instead of after the wait."""
    opening = asyncio.ensure_future(app.open())
    stopping = asyncio.ensure_future(signals.stop.wait())
    try:
        await asyncio.wait({opening, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not opening.done():
        opening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await opening
        await app.close()
        typer.echo(
            f"duetime: stopped ({signals.received or 'signal'}) before the database was "
            "reachable; nothing was started",
            err=True,
        )
        raise typer.Exit(1)
    opening.result()
    signals.connected = True
    try:
        yield app
    finally:
        await app.close()


GC_THRESHOLD = (50_000, 50, 100)
"""The collector's thresholds in long-running processes (Python's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Before the loops start: what is loaded so far is never collected (``gc.freeze``), and
    collections run less often. With thousands of runs in flight a worker's full collections
    held its event loop for tens of milliseconds, firing runs that late (p99 fire lag 64 ms →
    34 ms at 1,600 fires/s with this; docs/benchmarks.md). duetime's objects rarely form
    cycles, so memory is not held longer in practice."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


async def run_until_stopped(stop: asyncio.Event, *loops: Coroutine[Any, Any, Any]) -> None:
    """:func:`~duetime.app.async_app.supervise` the ``loops`` of a long-running process, with
    the garbage collector tuned for it first."""
    tune_gc()
    await supervise(stop, *loops)


def exit_abandoning_threads(code: int = 0) -> None:
    """Exit once shutdown is done without joining task threads still running (a sync task
    past its timeout cannot be interrupted; its run was already handed back or timed out)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
