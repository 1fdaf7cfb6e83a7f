"""Errors as ``application/problem+json`` (RFC 9457): one mapping from duetime's exceptions (and
FastAPI's own validation and routing errors) to HTTP statuses, used by every endpoint.

| raised | status | ``type`` (after ``urn:duetime:problem:``) |
|---|---|---|
| ``ValidationError`` (names ``field``), request validation | 422 | ``validation`` |
| ``UnsupportedFeature`` | 422 | ``unsupported`` |
| ``NotFound`` (also malformed ids, other tenants' ids) | 404 | ``not-found`` |
| ``Conflict`` (duplicate name, illegal move, reused key, stale token) | 409 | ``conflict`` |
| no or unknown API key | 401 | ``unauthorized`` |
| role too low | 403 | ``forbidden`` |
| tenant over its request rate | 429 (``Retry-After``) | ``rate-limited`` |
| store unreachable or schema unknown (``/readyz``) | 503 | ``unavailable`` |
| database unreachable in a request (failover, restart; ``Retry-After``) | 503 | ``unavailable`` |
| anything else (a bug: logged) | 500 | ``internal`` |
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from duetime.errors import Conflict, NotFound, SchemaError, UnsupportedFeature, ValidationError

log = logging.getLogger("duetime.api")

PROBLEM_JSON = "application/problem+json"
_TYPE = "urn:duetime:problem:"


class FieldError(BaseModel):
    field: str
    detail: str


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = Field(
        description="A URN naming the kind of problem, e.g. urn:duetime:problem:not-found."
    )
    title: str = Field(description="A short summary of the kind of problem.")
    status: int = Field(description="The HTTP status code.")
    detail: str = Field(description="What went wrong this time.")
    field: str | None = Field(
        default=None,
        description="The request field at fault (dotted path, e.g. retry.max_attempts).",
    )
    errors: list[FieldError] | None = Field(
        default=None, description="Every invalid field, when the request had several."
    )


class ApiError(Exception):
    """An error the API answers with directly (auth, rate limit, availability)."""

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.field = field
        self.headers = headers or {}


def unauthorized(detail: str) -> ApiError:
    return ApiError(
        401,
        "unauthorized",
        "Unauthorized",
        detail,
        headers={"WWW-Authenticate": 'Bearer realm="duetime"'},
    )


def forbidden(detail: str) -> ApiError:
    return ApiError(403, "forbidden", "Forbidden", detail)


def too_many_requests(retry_after: int, detail: str) -> ApiError:
    """429, retry after ``retry_after`` seconds (a tenant's rate, or a client's failed keys)."""
    return ApiError(
        429, "rate-limited", "Too many requests", detail, headers={"Retry-After": str(retry_after)}
    )


def rate_limited(retry_after: int, tenant: str) -> ApiError:
    return too_many_requests(
        retry_after, f"tenant {tenant!r} is over its request rate; retry after {retry_after} s"
    )


def unavailable(detail: str) -> ApiError:
    return ApiError(503, "unavailable", "Service unavailable", detail)


RETRY_UNREACHABLE = 5
"""Seconds a client is told to wait (``Retry-After``) when the database cannot be reached: a
failover or a restart takes seconds."""


def database_unreachable(exc: BaseException) -> ApiError:
    """503 for a request the database could not serve now (``AsyncApp.unreachable``). The
    detail names the error's kind, not its message (that names the database's hosts)."""
    return ApiError(
        503,
        "unavailable",
        "Service unavailable",
        f"the database cannot be reached right now ({type(exc).__name__}); retry after "
        f"{RETRY_UNREACHABLE} s (a write cut off mid-way may have been made: retry it with "
        "the same idempotency key)",
        headers={"Retry-After": str(RETRY_UNREACHABLE)},
    )


def problem_response(
    status: int,
    kind: str,
    title: str,
    detail: str,
    *,
    field: str | None = None,
    errors: Sequence[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": _TYPE + kind,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    if errors:
        body["errors"] = [e.model_dump() for e in errors]
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def _field_path(loc: Sequence[int | str]) -> str:
    """``("body", "retry", "max_attempts")`` → ``retry.max_attempts``; query and header
    parameters by their name."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def _detail(error: dict[str, Any]) -> str:
    message = str(error.get("msg", "is invalid"))
    return message.removeprefix("Value error, ")


async def _validation(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, RequestValidationError):
        errors = [
            FieldError(field=_field_path(e.get("loc", ())), detail=_detail(e)) for e in exc.errors()
        ]
        first = errors[0] if errors else FieldError(field="body", detail="is invalid")
        return problem_response(
            422,
            "validation",
            "Validation error",
            f"{first.field}: {first.detail}",
            field=first.field,
            errors=errors if len(errors) > 1 else None,
        )
    assert isinstance(exc, ValidationError)
    return problem_response(
        422, "validation", "Validation error", f"{exc.field}: {exc.reason}", field=exc.field
    )


async def _unsupported(_: Request, exc: Exception) -> JSONResponse:
    return problem_response(422, "unsupported", "Unsupported", str(exc))


async def _not_found(_: Request, exc: Exception) -> JSONResponse:
    return problem_response(404, "not-found", "Not found", str(exc) or "not found")


async def _conflict(_: Request, exc: Exception) -> JSONResponse:
    return problem_response(409, "conflict", "Conflict", str(exc))


async def _schema(_: Request, exc: Exception) -> JSONResponse:
    return problem_response(503, "unavailable", "Service unavailable", str(exc))


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return problem_response(
        exc.status, exc.kind, exc.title, exc.detail, field=exc.field, headers=exc.headers
    )


async def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI: an optional body that is not JSON
        return problem_response(
            422,
            "validation",
            "Validation error",
            f"body: is not valid JSON ({exc.detail})",
            field="body",
        )
    kinds = {404: "not-found", 405: "method-not-allowed"}
    title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
    return problem_response(
        exc.status_code,
        kinds.get(exc.status_code, "http"),
        title,
        str(exc.detail),
        headers=getattr(exc, "headers", None),
    )


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, "internal", "Internal server error", "an unexpected error happened (it was logged)"
    )


def install(api: FastAPI) -> None:
    api.add_exception_handler(RequestValidationError, _validation)
    api.add_exception_handler(ValidationError, _validation)
    api.add_exception_handler(UnsupportedFeature, _unsupported)
    api.add_exception_handler(NotFound, _not_found)
    api.add_exception_handler(Conflict, _conflict)
    api.add_exception_handler(SchemaError, _schema)
    api.add_exception_handler(ApiError, _api_error)
    api.add_exception_handler(StarletteHTTPException, _http)
    api.add_exception_handler(Exception, _bug)


# --- the OpenAPI document ---------------------------------------------------------------------

_DESCRIPTIONS = {
    401: "No API key, or an unknown or revoked one.",
    403: "The key's role is too low.",
    404: (
        "No such resource in the caller's tenant (malformed ids and other tenants' ids too), "
        "or `?tenant=` names a tenant the key may not act on (only superadmin keys may)."
    ),
    409: "Conflict with the resource's current state.",
    422: "The request is invalid; `field` names where.",
    429: "The tenant is over its request rate; retry after `Retry-After` seconds.",
    503: "Not ready.",
}


def problem_responses(statuses: Sequence[int]) -> dict[int | str, dict[str, Any]]:
    return {status: {"description": _DESCRIPTIONS.get(status, "Error.")} for status in statuses}


def rewrite_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Every error response is ``application/problem+json`` with the Problem schema."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in (
        Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        .get("$defs", {})
        .items()
    ):
        components[name] = definition
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    problem.pop("$defs", None)
    components["Problem"] = problem
    content = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for status, response in operation.get("responses", {}).items():
                if str(status).isdigit() and int(status) >= 400:
                    response["content"] = content
                    if int(status) == 422:
                        response["description"] = _DESCRIPTIONS[422]
                    if int(status) == 429:
                        response["headers"] = {
                            "Retry-After": {
                                "description": "Seconds to wait before retrying.",
                                "schema": {"type": "integer"},
                            }
                        }
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema
