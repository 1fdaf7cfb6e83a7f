"""A real webhook receiver for the HTTP target tests: an aiohttp server on 127.0.0.1 (port 0;
another loopback address or port on request) in the test's own event loop, told per path how to
answer, recording every request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = "ok"
    hang: bool = False
    """Never answer (until the server stops)."""


HANG = Reply(hang=True)


@dataclass(frozen=True)
class Hit:
    path: str
    method: str
    headers: dict[str, str]
    body: bytes
    at: float
    """time.time() when the request arrived."""


class Receiver:
    def __init__(self) -> None:
        self.plans: dict[str, list[Reply]] = {}
        self.hits: list[Hit] = []
        self.changed = asyncio.Condition()
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.host = "127.0.0.1"
        self.port = 0

    def plan(self, path: str, *replies: Reply) -> str:
        """Answer requests to ``path`` with ``replies`` in turn (the last one repeats); return
        the full URL."""
        self.plans[path] = list(replies)
        return self.url(path)

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def hits_of(self, path: str) -> list[Hit]:
        return [h for h in self.hits if h.path == path]

    async def wait_hits(self, path: str, count: int, timeout: float = 15.0) -> list[Hit]:
        """Wait until ``path`` has been requested ``count`` times."""
        async with self.changed:
            await asyncio.wait_for(
                self.changed.wait_for(lambda: len(self.hits_of(path)) >= count), timeout
            )
        return self.hits_of(path)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        hit = Hit(request.path, request.method, dict(request.headers), body, time.time())
        async with self.changed:
            self.hits.append(hit)
            self.changed.notify_all()
        replies = self.plans.get(request.path) or [Reply(404, body="no plan for this path")]
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        if reply.hang:
            await self._release.wait()
            return web.Response(status=200, text="too late")
        return web.Response(status=reply.status, headers=reply.headers, text=reply.body)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on ``host`` (a loopback address: nothing here may leave the machine)."""
        self.host = host
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        try:
            await site.start()
        except BaseException:
            await self._runner.cleanup()
            raise
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()


async def running_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    await receiver.start()
    try:
        yield receiver
    finally:
        await receiver.stop()
