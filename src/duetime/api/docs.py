"""Interactive API docs at ``/api/v1/docs`` that work without internet: Swagger UI's assets are
served by duetime itself, from the ``fastapi-offline`` package, never from a CDN."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
DOCS_URL = "/api/v1/docs"
ASSETS_URL = DOCS_URL + "/assets"


def install(api: FastAPI, openapi_url: str) -> None:
    api.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")

    @api.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{api.title} API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=None,
            swagger_ui_parameters={"persistAuthorization": True},
        )
