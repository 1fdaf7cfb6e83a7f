"""``/healthz`` (the process is up) and ``/readyz`` (the store answers and its schema is the one
this code knows), at the root, without a key."""

from __future__ import annotations

import asyncio

from fastapi import Request

from duetime.api.auth import state_of
from duetime.api.endpoint import Endpoint
from duetime.api.problems import unavailable
from duetime.api.schemas import Health, Ready
from duetime.errors import SchemaError

READY_TIMEOUT = 5.0


class Healthz(Endpoint):
    """Liveness
    200 while the process serves requests."""

    method, path, tag = "GET", "/healthz", "health"
    authenticated = False

    async def handle(self) -> Health:
        return Health(status="ok")


class Readyz(Endpoint):
    """Readiness
    200 when the store answers and its schema version is the one this duetime knows; 503
    otherwise."""

    method, path, tag = "GET", "/readyz", "health"
    authenticated = False
    errors = (503,)

    async def handle(self, request: Request) -> Ready:
        store = state_of(request).app.store
        try:
            async with asyncio.timeout(READY_TIMEOUT):
                await store.check_schema()
                version = await store.schema_version()
        except SchemaError as exc:
            raise unavailable(str(exc)) from None
        except (TimeoutError, OSError, ConnectionError) as exc:
            raise unavailable(f"the store does not answer: {exc or type(exc).__name__}") from None
        except Exception as exc:  # any driver error means "not ready", never a 500
            raise unavailable(f"the store failed: {type(exc).__name__}: {exc}") from None
        assert version is not None
        return Ready(status="ready", store=store.dialect, schema_version=version)


ENDPOINTS: tuple[type[Endpoint], ...] = (Healthz, Readyz)
