"""Serving the API with uvicorn inside a running event loop, as one more supervised loop
(``duetime server`` and ``duetime up``). duetime binds the socket itself, so ``port=0`` picks a
free port and :attr:`ApiServer.port` tells which; signals stay duetime's (the caller sets
``stop``)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterator

import uvicorn

from duetime._aio import first_of
from duetime.api.factory import create_api
from duetime.app import AsyncApp
from duetime.errors import DuetimeError

SHUTDOWN_GRACE = 5.0


def is_loopback(host: str) -> bool:
    """True if ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ListenError(DuetimeError):
    """The API cannot listen on the address asked for (in use, not this machine's …)."""


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # duetime handles signals itself
        yield


class ApiServer:
    def __init__(
        self,
        app: AsyncApp,
        *,
        host: str,
        port: int,
        auth_required: bool,
        log_level: str = "warning",
        on_ready: Callable[[ApiServer], None] | None = None,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.auth_required = auth_required
        self.log_level = log_level
        self.on_ready = on_ready

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _bind(self) -> socket.socket:
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise ListenError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError as exc:
            sock.close()
            raise ListenError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        self.port = sock.getsockname()[1]
        return sock

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set. Raises ListenError when the address cannot be bound."""
        sock = self._bind()
        config = uvicorn.Config(
            create_api(self.app, auth_required=self.auth_required),
            log_level=self.log_level,
            lifespan="off",
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
        )
        server = _Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        try:
            # uvicorn offers `started` only as a flag, not an event
            while not server.started and not serving.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            if server.started and self.on_ready is not None:
                self.on_ready(self)
            await first_of(stop.wait(), asyncio.shield(serving))
        finally:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            sock.close()
