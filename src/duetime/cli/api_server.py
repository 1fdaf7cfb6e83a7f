"""``duetime server``: the REST API, the dashboard and ``/metrics`` over HTTP.

API keys are required (``duetime keys create``) unless ``--no-auth``. The line
``duetime server: listening on http://HOST:PORT`` is printed once the socket is bound (with
``--port 0`` it tells which port was picked).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from duetime.api import ApiServer, is_loopback
from duetime.cli._common import DbOption, ListenUrlOption, fail, run_async
from duetime.cli._lifecycle import (
    LogFormat,
    LogLevel,
    app_for,
    configure_logging,
    install_signals,
    open_until_stopped,
    run_until_stopped,
)
from duetime.errors import ValidationError

HostOption = Annotated[
    str, typer.Option("--host", help="Address to listen on (loopback unless you mean it).")
]
PortOption = Annotated[int, typer.Option("--port", help="Port to listen on; 0 picks a free one.")]
ReplicaOption = Annotated[
    str | None,
    typer.Option(
        "--replica-url",
        envvar="DUETIME_REPLICA_URL",
        show_envvar=True,
        help="A postgresql:// URL of a streaming replica: list and history pages and the "
        "metrics gauges read there, read-only (docs/howto/read-replica.md).",
    ),
]

commands = typer.Typer()


def describe_api(api: ApiServer) -> str:
    return (
        f"listening on {api.url} — REST API {api.url}/api/v1, docs {api.url}/api/v1/docs, "
        f"OpenAPI {api.url}/api/v1/openapi.json, dashboard {api.url}/, metrics {api.url}/metrics"
    )


@commands.command()
def server(
    db: DbOption = None,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Serve without API keys: every caller acts as an admin of tenant 'default' "
            "(only for trusted networks).",
        ),
    ] = False,
    replica_url: ReplicaOption = None,
    listen_url: ListenUrlOption = None,
    log_level: LogLevel = "info",
    log_format: LogFormat = "text",
) -> None:
    """Serve the REST API (/api/v1, docs at /api/v1/docs, /healthz, /readyz), the dashboard at
    / and Prometheus metrics at /metrics."""
    configure_logging(log_level, log_format)

    def ready(api: ApiServer) -> None:
        typer.echo(f"duetime server: {describe_api(api)}")
        if no_auth:
            exposed = "" if is_loopback(host) else f" — and {host} is not loopback"
            typer.echo(f"duetime server: OPEN, no API key needed (--no-auth){exposed}")
            if not is_loopback(host):
                typer.echo(
                    "duetime server: an open API answers only loopback Host names: list the "
                    "names clients use in DUETIME_API_ALLOWED_HOSTS"
                )
        else:
            typer.echo("duetime server: API keys required (create one: duetime keys create)")

    unopened = app_for(db, None, migrate=None, listen_url=listen_url)
    if replica_url:
        try:
            unopened.settings = unopened.settings.with_(replica_url=replica_url)
        except ValidationError as exc:
            fail(str(exc))

    async def go() -> None:
        stop = asyncio.Event()
        signals = install_signals(stop)
        async with open_until_stopped(unopened, signals) as app:
            api = ApiServer(
                app,
                host=host,
                port=port,
                auth_required=not no_auth,
                log_level=log_level,
                on_ready=ready,
            )
            await run_until_stopped(stop, *app.node_loops(stop, roles=("api",)), api.run(stop))

    run_async(go)
