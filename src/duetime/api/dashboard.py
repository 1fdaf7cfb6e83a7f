"""The dashboard at ``/``: static HTML, CSS and JavaScript (``src/duetime/dashboard/``) that
reads and acts only through the REST API, with the API key its user enters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from duetime.api.auth import state_of

DASHBOARD = Path(__file__).resolve().parent.parent / "dashboard"

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def install(api: FastAPI) -> None:
    """The dashboard (``/`` and ``/dashboard/…``), outside ``/api/v1``."""
    api.mount(
        "/dashboard",
        StaticFiles(directory=DASHBOARD, check_dir=False),
        name="dashboard",
    )

    @api.get("/dashboard-config", include_in_schema=False)
    async def dashboard_config(request: Request) -> dict[str, Any]:
        """What the dashboard needs before it has a key: whether it must ask for one."""
        return {"auth_required": state_of(request).auth_required}

    @api.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(DASHBOARD / "index.html", headers=_SECURITY_HEADERS)
