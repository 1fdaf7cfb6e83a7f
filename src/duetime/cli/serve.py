"""Long-running commands: ``up`` (everything, one process), ``scheduler``, ``worker``,
and ``migrate``.

Signals: the first SIGTERM/SIGINT starts a graceful shutdown (stop claiming, finish or hand
back within the grace period); a second one exits at once.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from datetime import timedelta
from typing import Annotated, Any

import typer

from duetime import _logs
from duetime._types import RetryPolicy as Retry
from duetime._types import RunState
from duetime.api import ApiServer, is_loopback
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, fail, load_user_app, run_async, settings_for
from duetime.cli._root import cli
from duetime.errors import SchemaError
from duetime.metrics import MetricsServer
from duetime.store import is_postgres_url
from duetime.store.base import ClaimedRun, RunCompletion

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


def _logging(level: str, fmt: str | None = None) -> None:
    chosen = (fmt or os.environ.get("DUETIME_LOG_FORMAT") or "text").strip().lower()
    if chosen not in _logs.FORMATS:
        fail(f"--log-format must be text or json, got {fmt!r}")
    _logs.configure(level, chosen, stream=sys.stderr)


def _metrics_loops(
    app: AsyncApp, stop: asyncio.Event, port: int | None, host: str
) -> list[Coroutine[Any, Any, None]]:
    """``/metrics`` on its own port when asked for (``--metrics-port``)."""
    if port is None:
        return []
    if not 0 <= port <= 65535:
        fail(f"--metrics-port must be 0-65535, got {port}")

    def ready(server: MetricsServer) -> None:
        typer.echo(f"metrics: {server.url}")

    return [MetricsServer(app.cluster_stats, host=host, port=port, on_ready=ready).run(stop)]


def _exit_abandoning_threads(code: int = 0) -> None:
    """Exit once shutdown is done without joining task threads still running (a sync task
    past its timeout cannot be interrupted; its run was already handed back or timed out)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("second signal: exiting now")
            os._exit(1)
        log.info(
            "signal %s: shutting down gracefully (again to exit at once)",
            signal.Signals(signum).name,
        )
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)


def _app_for(db: str | None, app_spec: str | None, *, migrate: bool | None) -> AsyncApp:
    settings = settings_for(db)
    if is_postgres_url(settings.database_url) and not os.environ.get("DUETIME_STARTUP_WAIT"):
        # a service started before its database waits for it instead of exiting
        settings = settings.with_(startup_wait=600.0)
    user = load_user_app(app_spec, settings)
    registry = None if user is None else user.registry
    return AsyncApp(settings=settings, registry=registry, migrate=migrate)


@cli.command()
def migrate(db: DbOption = None) -> None:
    """Create or upgrade the database schema (safe to run again, and concurrently)."""

    async def go() -> int:
        app = AsyncApp(settings=settings_for(db), migrate=True)
        async with app:
            return await app.store.migrate()

    version = run_async(go)
    typer.echo(f"schema is at version {version}")


@cli.command()
def scheduler(
    db: DbOption = None,
    partitions: Annotated[
        str | None, typer.Option(help="Serve only job partitions LOW-HIGH (of 0-255), e.g. 0-127.")
    ] = None,
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run a scheduler: materialize due runs (and reap expired leases)."""
    _logging(log_level, log_format)
    span = _partitions(partitions)

    async def go() -> None:
        stop = asyncio.Event()
        _install_signals(stop)
        async with _app_for(db, None, migrate=None) as app:
            log.info("scheduler started (%s)", app.store.dialect)
            await _gather(
                stop,
                *app.node_loops(stop, roles=("scheduler",), partitions=span),
                *_metrics_loops(app, stop, metrics_port, metrics_host),
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


@cli.command()
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
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run a worker: claim due runs of the tasks it knows (of its queues) and execute them."""
    _logging(log_level, log_format)

    async def go() -> None:
        stop = asyncio.Event()
        _install_signals(stop)
        async_app = _app_for(db, app, migrate=None)
        if concurrency is not None:
            if concurrency < 1:
                fail("--concurrency must be >= 1")
            async_app.settings = async_app.settings.with_(worker_concurrency=concurrency)
        async with async_app:
            w = async_app.worker(tasks=task or None, queues=queue or None)
            log.info(
                "worker %s serving %s (queues: %s)",
                w.id,
                ", ".join(w.tasks),
                ", ".join(w.queues) if w.queues else "all",
            )
            await _gather(
                stop,
                *async_app.node_loops(stop, roles=("worker",)),
                w.run(stop),
                *_metrics_loops(async_app, stop, metrics_port, metrics_host),
            )

    try:
        run_async(go)
    except ValueError as exc:
        fail(str(exc))
    _exit_abandoning_threads()


@cli.command()
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
    log_level: LogLevel = "warning",
    log_format: LogFormat = "text",
) -> None:
    """Everything in one process on SQLite: migrate, scheduler, worker, the REST API and the
    dashboard at / (open on loopback unless --auth), and /metrics. With --demo, register a few
    demo jobs and watch them run."""
    _logging(log_level, log_format)
    if not auth and not is_loopback(host):
        fail(
            f"--host {host} is not a loopback address and the API of `duetime up` is open "
            "(no API key needed): pass --auth to require keys, or keep --host 127.0.0.1"
        )
    settings = settings_for(db)
    where = (
        "PostgreSQL"
        if is_postgres_url(settings.database_url)
        else f"SQLite file {os.path.abspath(settings.database_url)}"
    )

    async def go() -> None:
        stop = asyncio.Event()
        _install_signals(stop)
        async_app = _app_for(settings.database_url, app, migrate=True)
        async with async_app:
            typer.echo(f"duetime up: scheduler + worker on {where}. Ctrl-C to stop.")
            if demo:
                await _register_demo(async_app)
            w = async_app.worker(
                on_start=_print_start if demo else None,
                on_complete=_print_completion if demo else None,
            )
            api = ApiServer(
                async_app, host=host, port=port, auth_required=auth, on_ready=_print_api
            )
            await _gather(
                stop,
                *async_app.node_loops(stop, roles=("scheduler", "worker", "api")),
                w.run(stop),
                api.run(stop),
            )

    try:
        run_async(go)
    except SchemaError as exc:
        fail(str(exc))
    _exit_abandoning_threads()


def _print_api(api: ApiServer) -> None:
    access = (
        "API keys required"
        if api.auth_required
        else "open: no API key needed, calls act on tenant 'default' (loopback only)"
    )
    typer.echo(f"API: {api.url}/api/v1 (docs {api.url}/api/v1/docs) — {access}")
    typer.echo(f"dashboard: {api.url}/ — metrics: {api.url}/metrics")


GC_THRESHOLD = (50_000, 50, 100)
"""The collector's thresholds in long-running processes (Python's default: 700, 10, 10)."""


def _tune_gc() -> None:
    """Before the loops start: what is loaded so far is never collected (``gc.freeze``), and
    collections run less often. With thousands of runs in flight a worker's full collections
    held its event loop for tens of milliseconds, firing runs that late (p99 fire lag 64 ms →
    34 ms at 1,600 fires/s with this; docs/benchmarks.md). duetime's objects rarely form
    cycles, so memory is not held longer in practice."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


async def _gather(stop: asyncio.Event, *loops: object) -> None:
    _tune_gc()
    tasks = [asyncio.ensure_future(loop) for loop in loops]  # type: ignore[arg-type]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


# --- the demo ---------------------------------------------------------------------------------

DEMO_RETRY = Retry(max_attempts=3, backoff_base=0.5, backoff_factor=2.0, backoff_cap=2.0)


async def _register_demo(app: AsyncApp) -> None:
    """Demo jobs; re-registering them on the same database is safe (create-or-update)."""
    await app.schedule("demo.every-2s", task="duetime.noop", every=2)
    await app.schedule("demo.one-shot", task="duetime.noop", at=timedelta(seconds=3))
    # One-shots one second out: declaring them again moves their instant, so they run again.
    await app.schedule(
        "demo.flaky",
        task="duetime.fail",
        at=timedelta(seconds=1),
        payload={"times": 2},
        retry=DEMO_RETRY,
    )
    await app.schedule(
        "demo.doomed",
        task="duetime.fail",
        at=timedelta(seconds=1),
        payload={"always": True},
        retry=Retry(max_attempts=2, backoff_base=0.5, backoff_cap=1.0),
    )
    typer.echo(
        "demo jobs: demo.every-2s (every 2 s), demo.one-shot (in 3 s), demo.flaky "
        "(fails twice, then succeeds), demo.doomed (always fails → dead-letter queue)"
    )


def _print_start(claimed: ClaimedRun) -> None:
    run = claimed.run
    typer.echo(f"  ▶ {run.job_name:<16} run {str(run.id)[:8]} attempt {run.attempt} started")


def _print_completion(completion: RunCompletion, applied: bool) -> None:
    if not applied:
        typer.echo(f"  ! run {str(completion.run_id)[:8]} stale attempt refused")
        return
    state = completion.next_state
    short = str(completion.run_id)[:8]
    if state is RunState.SUCCEEDED:
        typer.echo(f"  ✓ run {short} succeeded (attempt {completion.attempt})")
    elif state is RunState.SCHEDULED and completion.reason is None:
        typer.echo(f"  ↻ run {short} failed ({completion.error_message}); retry scheduled")
    elif state is RunState.DEAD:
        typer.echo(
            f"  ✗ run {short} is dead ({completion.reason}: {completion.error_message}) "
            "→ dead-letter queue (`duetime dlq list`)"
        )
