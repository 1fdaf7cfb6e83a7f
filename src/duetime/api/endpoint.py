"""One typed class per REST endpoint (riverui's habit): its route, the errors it documents,
and ``handle``, whose typed parameters (path, query, body, headers, the caller) FastAPI reads
and whose return annotation is the response schema. The class docstring is the operation's
summary (first line) and description (the rest)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

from fastapi import APIRouter

from duetime.api.problems import problem_responses

AUTH_ERRORS = (401, 403, 404, 429)
"""Every authenticated endpoint's: no key, role too low, ``?tenant=`` another tenant than a
key that is not a superadmin's may act on (as its ids: not found), over the rate."""


class Endpoint:
    method: ClassVar[str]
    path: ClassVar[str]
    tag: ClassVar[str]
    status_code: ClassVar[int] = 200
    errors: ClassVar[tuple[int, ...]] = ()
    """Error statuses besides the auth ones (:data:`AUTH_ERRORS`), which every authenticated
    endpoint has."""
    authenticated: ClassVar[bool] = True
    responses: ClassVar[dict[int | str, dict[str, Any]]] = {}
    """Further success responses (e.g. a 200 beside a 201)."""

    handle: Callable[..., Awaitable[Any]]

    @classmethod
    def mount(cls, router: APIRouter) -> None:
        doc = inspect.getdoc(cls) or cls.__name__
        summary, _, description = doc.partition("\n")
        errors: Sequence[int] = (*(AUTH_ERRORS if cls.authenticated else ()), *cls.errors)
        responses = {**problem_responses(sorted(set(errors))), **cls.responses}
        router.add_api_route(
            cls.path,
            cls().handle,
            methods=[cls.method],
            status_code=cls.status_code,
            summary=summary.strip(),
            description=description.strip(),
            responses=responses,
            tags=[cls.tag],
            name=cls.__name__,
            operation_id=cls.__name__,
            response_model_exclude_none=False,
        )
