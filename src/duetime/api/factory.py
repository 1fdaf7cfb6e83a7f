"""The FastAPI application: ``create_api(app, settings, auth_required=…)``.

Routes: the REST API under ``/api/v1`` (its OpenAPI document at ``/api/v1/openapi.json`` and
offline interactive docs at ``/api/v1/docs``), ``/healthz`` and ``/readyz`` at the root. Every
handler acts through an :class:`~duetime.app.AsyncApp` view of the caller's tenant — never SQL.
The app must be open (and stay open) while the API serves.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

from duetime import __version__
from duetime._config import Settings
from duetime.api import (
    audit,
    breakers,
    calendars,
    dashboard,
    dead_letters,
    docs,
    health,
    jobs,
    keys,
    lifecycle,
    monitoring,
    outbox,
    problems,
    runs,
    schedules,
    tenants,
    workers,
    workflows,
)
from duetime.api.auth import ApiState
from duetime.api.guard import ApiGuard
from duetime.api.ratelimit import RateLimiter, failure_limiter
from duetime.app import AsyncApp
from duetime.app.reads import ReadSide, primary_reads

PREFIX = "/api/v1"
OPENAPI_URL = PREFIX + "/openapi.json"

DESCRIPTION = """\
duetime's REST API: jobs, runs, dead letters, schedule previews, API keys, and the
remote-worker protocol.

**Auth**: `Authorization: Bearer dt_…` (or `X-API-Key: dt_…`), a key made with
`duetime keys create`. `viewer` reads; `operator` also writes within its tenant; `admin` also
manages keys and acts on any tenant with `?tenant=`. Every query is filtered by the caller's
tenant: another tenant's ids are 404.

**Errors** are `application/problem+json` with `type`, `title`, `status`, `detail` and,
when one field is at fault, `field`. Instants are ISO 8601 UTC; durations are seconds.

**Bodies** are JSON (`Content-Type: application/json`, else 415) of at most
`DUETIME_API_MAX_BODY_BYTES` (1 MiB by default, else 413). Without a key, the API is *open*
(`duetime up`): it answers only loopback `Host` names and loopback `Origin`s (403 otherwise).
"""

TAGS = [
    {"name": "jobs", "description": "Job definitions: schedule, policies, status; triggers."},
    {"name": "runs", "description": "Occurrences of jobs, with their attempts."},
    {"name": "dead-letters", "description": "Runs out of attempts or failed for good."},
    {"name": "schedules", "description": "Fire-time previews (DST-aware)."},
    {"name": "keys", "description": "API keys (admin)."},
    {
        "name": "remote workers",
        "description": "Claim, heartbeat and complete runs over HTTP, from any language "
        "(docs/remote-workers.md).",
    },
    {"name": "health", "description": "Liveness and readiness."},
    monitoring.TAG,
    tenants.TAG,
    calendars.TAG,
    workflows.TAG,
    outbox.TAG,
]


_BODY_ERRORS = {
    "413": {"description": "The body is larger than the limit (`DUETIME_API_MAX_BODY_BYTES`)."},
    "415": {"description": "The body is not JSON (`Content-Type: application/json`)."},
}


def create_api(
    app: AsyncApp,
    settings: Settings | None = None,
    *,
    auth_required: bool,
    reads: ReadSide | None = None,
) -> FastAPI:
    """The API over ``app`` (open). ``settings`` default to the app's (``api_rate_limit``,
    ``api_auth_failures``, ``api_allowed_hosts``, ``api_max_body_bytes``). ``reads``: where
    the list and history pages and the gauges read (``app.reads.open_reads``); default: the
    app's primary store."""
    settings = settings or app.settings
    api = FastAPI(
        title="duetime",
        version=__version__,
        description=DESCRIPTION,
        openapi_url=OPENAPI_URL,
        openapi_tags=TAGS,
        docs_url=None,
        redoc_url=None,
    )
    state = ApiState(
        app=app,
        auth_required=auth_required,
        limiter=RateLimiter(settings.api_rate_limit),
        auth_failures=failure_limiter(settings.api_auth_failures),
        reads=reads or primary_reads(lambda: app.store, settings),
    )
    api.state.duetime = state
    api.add_middleware(ApiGuard, state=state, settings=settings)
    problems.install(api)
    v1 = APIRouter(prefix=PREFIX)
    modules = (jobs, runs, dead_letters, schedules, keys, workers, monitoring, tenants, audit)
    for module in (*modules, calendars, lifecycle, workflows, breakers, outbox):
        for endpoint in module.ENDPOINTS:
            endpoint.mount(v1)
    api.include_router(v1)
    root = APIRouter()
    for endpoint in health.ENDPOINTS:
        endpoint.mount(root)
    api.include_router(root)
    docs.install(api, OPENAPI_URL)
    monitoring.install_metrics(api, app, state.reads)  # /metrics
    dashboard.install(api)  # the dashboard at /

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            # keyword arguments by name (alike in shape to calls elsewhere, not shared logic)
            schema = get_openapi(
                title=api.title,
                version=api.version,
                description=api.description,
                routes=api.routes,
                tags=api.openapi_tags,
            )
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    if "requestBody" in operation:
                        responses = operation.setdefault("responses", {})
                        responses.update({k: dict(v) for k, v in _BODY_ERRORS.items()})
            api.openapi_schema = problems.rewrite_openapi(schema)
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    return api
