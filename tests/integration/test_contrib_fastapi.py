"""The FastAPI example (examples/fastapi_shop) under a real uvicorn server: the lifespan opens
the app, declares its jobs and runs the embedded worker and scheduler; an order placed over
HTTP is shipped by that worker; the dependency hands the app to endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from duetime import AsyncApp
from duetime.contrib.fastapi import DuetimeApp, duetime_lifespan
from duetime.errors import ValidationError
from tests.waiting import eventually

pytestmark = pytest.mark.postgres

EXAMPLE = Path(__file__).parents[2] / "examples" / "fastapi_shop" / "shop.py"


def _load_example(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("SHOP_DATABASE_URL", pg_url)
    spec = importlib.util.spec_from_file_location("fastapi_shop_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def _serve(api: FastAPI) -> AsyncIterator[str]:
    """``api`` under a real uvicorn server on a free port (its lifespan running); its URL."""
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:  # uvicorn sets no event; its lifespan has run by then
            if serving.done():
                await serving  # a failed start-up raises here
                raise AssertionError("uvicorn stopped before it started")
            return server.started

        await eventually(started, what="uvicorn to start", every=0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


async def test_an_order_placed_over_http_is_shipped_by_the_embedded_worker(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop = _load_example(pg_url, monkeypatch)
    async with _serve(shop.api) as base:
        async with httpx.AsyncClient(base_url=base) as client:
            placed = await client.post("/orders", json={"item": "teapot"})
            assert placed.status_code == 201, placed.text
            order = placed.json()["order"]

            async def shipped() -> bool:
                return bool((await client.get(f"/orders/{order}")).json()["shipped"])

            await eventually(shipped, what="the embedded worker to ship the order")
        run = await shop.jobs.run(placed.json()["run"])
        assert run.state.value == "succeeded"
    assert shop.jobs._store is None  # the lifespan closed the app with the web app


async def test_the_dependency_hands_the_app_and_a_lifespan_without_roles_only_enqueues(
    pg_url: str,
) -> None:
    jobs = AsyncApp(pg_url, migrate=True)

    async def declare(app: AsyncApp) -> None:
        await app.schedule("ping", task="duetime.noop", cron="0 0 1 1 *")

    api = FastAPI(lifespan=duetime_lifespan(jobs, setup=declare))

    @api.post("/ping")
    async def ping(duetime: DuetimeApp) -> dict[str, str]:
        return {"run": str((await duetime.trigger("ping")).id), "same": str(duetime is jobs)}

    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
            answer = (await client.post("/ping")).json()
        assert answer["same"] == "True"
        run = await jobs.run(answer["run"])
        assert run.state.value == "scheduled"  # nothing runs it: no worker was asked for
        nodes, _ = await jobs.nodes()
        assert nodes == []  # no loops: not even node presence


def test_an_unknown_role_is_refused_where_the_app_is_made() -> None:
    with pytest.raises(ValidationError, match="unknown role"):
        duetime_lifespan(AsyncApp("x.db"), roles=("worker", "api"))
