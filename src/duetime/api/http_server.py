"""Serving the API with uvicorn inside a running event loop, as one more supervised loop
(``duetime server`` and ``duetime up``). duetime binds the socket itself, so ``port=0`` picks a
free port and :attr:`ApiServer.port` tells which; signals stay duetime's (the caller sets
``stop``).

Connections cannot be held open for nothing (slowloris): uvicorn's h11 protocol, with
deadlines — an idle connection (before its first request too) is closed after
``api_keep_alive`` seconds; a request's line and headers (at most 16 KiB) must arrive within
``api_header_timeout`` of the connection's opening or of the previous response, and its body
within ``api_body_timeout`` of its headers, however slowly they trickle — else the connection
is closed. Beyond ``api_max_connections`` connections and requests in progress, uvicorn answers
503.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from duetime._aio import first_of
from duetime._config import Settings
from duetime.api.factory import create_api
from duetime.api.guard import is_loopback
from duetime.app import AsyncApp
from duetime.app.reads import ReadSide, open_reads
from duetime.errors import DuetimeError

__all__ = ["ApiServer", "ListenError", "is_loopback"]

SHUTDOWN_GRACE = 5
"""Seconds uvicorn lets requests in progress finish at shutdown (it takes whole seconds)."""
MAX_HEAD_BYTES = 16 * 1024
"""The largest request line plus headers (h11's own default)."""


def guarded_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the deadlines of ``settings`` (the module's docstring)."""
    keep_alive = settings.api_keep_alive
    timeouts = {"head": settings.api_header_timeout, "body": settings.api_body_timeout}

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _phase: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self.timeout_keep_alive = keep_alive  # type: ignore[assignment]  # a float will do
            super().connection_made(transport)
            # uvicorn starts its idle timeout only after a response: before the first too
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
            self._track()

        def handle_events(self) -> None:
            super().handle_events()
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()

        def connection_lost(self, exc: Exception | None) -> None:
            self._arm(None)
            super().connection_lost(exc)

        def _track(self) -> None:
            """A deadline per phase, set when the phase begins, not moved by data arriving:
            waiting for a request's head, or for its body; none while the app answers."""
            phase: str | None = None
            if not self.transport.is_closing():
                state = self.conn.their_state
                phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            if phase != self._phase:
                self._arm(phase)

        def _arm(self, phase: str | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._phase = phase
            if phase is not None:
                self._deadline = self.loop.call_later(timeouts[phase], self._expired)

        def _expired(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


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
        # the constructor's arguments kept as they are (alike in shape to other such __init__s)
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
        settings = self.app.settings
        try:
            async with open_reads(lambda: self.app.store, settings) as reads:
                await self._serve(sock, settings, reads, stop)
        finally:
            sock.close()

    async def _serve(
        self, sock: socket.socket, settings: Settings, reads: ReadSide, stop: asyncio.Event
    ) -> None:
        config = uvicorn.Config(
            create_api(self.app, settings, auth_required=self.auth_required, reads=reads),
            http=guarded_protocol(settings),
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            limit_concurrency=settings.api_max_connections or None,
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
