"""duetime inside a FastAPI (or any Starlette) application: a lifespan that opens an
:class:`~duetime.AsyncApp` with the web app — declaring the jobs, and, if asked, running an
embedded worker and scheduler beside the endpoints — and a dependency that hands that app to
endpoints (docs/integrations.md)::

    jobs = AsyncApp("postgresql://…")

    async def declare(app: AsyncApp) -> None:
        await app.schedule("nightly", task="reports.nightly", cron="0 3 * * *")

    api = FastAPI(lifespan=duetime_lifespan(jobs, roles=("worker", "scheduler"), setup=declare))

    @api.post("/orders")
    async def order(duetime: DuetimeApp) -> dict[str, str]:
        run = await duetime.trigger("ship")
        return {"run": str(run.id)}

The lifespan's contract: ``setup`` runs after the store is open and before the first request;
the loops start after it and stop (gracefully: runs in flight get the app's
``shutdown_grace``) before the store closes, when the web app shuts down. A loop that dies
stops the others and is logged; its error is raised again at shutdown (a web server keeps
serving requests meanwhile: the API still enqueues, another process's worker may run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated, Any

from fastapi import Depends, Request

from duetime.app import AsyncApp
from duetime.app.async_app import supervise
from duetime.errors import UsageError, ValidationError

log = logging.getLogger("duetime")

ROLES = frozenset({"worker", "scheduler"})
"""What an embedded app may run beside the endpoints."""

STATE_KEY = "duetime"
"""Where the lifespan keeps the app: ``request.app.state.duetime``."""


def duetime_lifespan(
    app: AsyncApp,
    *,
    roles: Sequence[str] = (),
    setup: Callable[[AsyncApp], Awaitable[None]] | None = None,
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """A lifespan for ``FastAPI(lifespan=…)``: open ``app`` (it migrates as made:
    ``AsyncApp(url, migrate=True)``), run ``setup(app)`` (declare jobs), then run ``roles`` — any of
    ``"worker"`` (the registered tasks) and ``"scheduler"`` (materializer, leader election,
    maintenance); none: the app only enqueues — until the web app shuts down. Raises
    ValidationError for an unknown role."""
    unknown = sorted(set(roles) - ROLES)
    if unknown:
        raise ValidationError(
            "roles", f"unknown role(s) {', '.join(unknown)}; use worker, scheduler"
        )

    @contextlib.asynccontextmanager
    async def lifespan(web: Any) -> AsyncIterator[None]:
        await app.open()
        try:
            if setup is not None:
                await setup(app)
            setattr(web.state, STATE_KEY, app)
            async with _loops(app, tuple(roles)):
                yield
        finally:
            await app.close()

    return lifespan


@contextlib.asynccontextmanager
async def _loops(app: AsyncApp, roles: tuple[str, ...]) -> AsyncIterator[None]:
    """``roles``' loops, supervised, from the block's start to its end."""
    if not roles:
        yield
        return
    stop = asyncio.Event()
    loops = app.node_loops(stop, roles=roles)
    if "worker" in roles:
        loops.append(app.worker().run(stop))
    running = asyncio.create_task(supervise(stop, *loops), name="duetime-embedded")
    running.add_done_callback(_log_failure)
    try:
        yield
    finally:
        stop.set()
        await running


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("duetime's embedded loops stopped", exc_info=task.exception())


def get_duetime(request: Request) -> AsyncApp:
    """The app :func:`duetime_lifespan` opened (a FastAPI dependency). Raises UsageError
    when the web app was started without that lifespan."""
    app = getattr(request.app.state, STATE_KEY, None)
    if not isinstance(app, AsyncApp):
        raise UsageError(
            "get_duetime", "no duetime app: make the FastAPI app with lifespan=duetime_lifespan(…)"
        )
    return app


DuetimeApp = Annotated[AsyncApp, Depends(get_duetime)]
"""An endpoint parameter annotated ``DuetimeApp`` receives the lifespan's app."""
