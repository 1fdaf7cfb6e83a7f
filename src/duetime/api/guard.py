"""What every request to the API passes before any route sees it (an ASGI middleware):

1. **Open mode** (no key needed: ``duetime up``, ``server --no-auth``): the ``Host`` header must
   name this machine (``localhost``, 127.0.0.0/8, ``[::1]``, any port) or one of
   ``api_allowed_hosts``, and an ``Origin`` header, when there is one, a page of such a host —
   else 403. Otherwise a web page the user visits could drive the open API through a name
   rebound to 127.0.0.1 (DNS rebinding) or by posting to it (CSRF). ``/healthz`` and
   ``/readyz`` answer any host (they need no key anyway).
2. A request with a body must say ``Content-Type: application/json`` (or ``application/*+json``)
   — else 415, so no HTML form can post to the API; it must fit ``api_max_body_bytes`` — 413
   as soon as its ``Content-Length`` or the part read so far is larger (chunked too); and its
   key is checked *before* its body is read: none (when keys are required), an unknown or a
   revoked one is 401 without the body being read (the key found is kept for the route, so it
   is looked up once). A client address over ``api_auth_failures`` bad keys a minute gets 429.
3. A database that cannot be reached while a request is served (a failover, a restart: the
   app's ``unreachable``) is 503 ``unavailable`` with ``Retry-After``, logged as one warning
   line — not a 500 with a traceback. The wait for a pooled connection is bounded by
   ``database_checkout_wait`` (30 s); a commit waiting for a synchronous standby waits.

These answers close the connection when the body was not read. How long a connection may stay
idle or take to send its request is :mod:`duetime.api.http_server`'s business (uvicorn's protocol).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duetime._config import Settings
from duetime.api.auth import ApiState, authenticate, secret_from
from duetime.api.problems import (
    ApiError,
    database_unreachable,
    problem_response,
    unauthorized,
    unavailable,
)
from duetime.errors import SchemaError

log = logging.getLogger("duetime.api")

UNGUARDED_PATHS = frozenset({"/healthz", "/readyz"})
"""Paths an open API answers whatever the ``Host`` (probes; they need no key anyway)."""

_PAYLOAD_ROOM = 64 * 1024


def is_loopback(host: str) -> bool:
    """True if ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _normal(host: str) -> str:
    """``[::1]`` → ``::1``; ``Example.COM.`` → ``example.com``."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.removesuffix(".") if host not in (".", "") else host


def host_of(authority: str) -> str:
    """The host of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``)."""
    authority = authority.strip()
    if authority.startswith("["):
        end = authority.find("]")
        return _normal(authority[: end + 1] if end > 0 else authority)
    if authority.count(":") == 1:
        authority = authority.partition(":")[0]
    return _normal(authority)


def allowed_hosts(setting: str) -> frozenset[str] | None:
    """The names of ``api_allowed_hosts`` (None: ``*``, any host)."""
    names = {_normal(part) for part in setting.split(",") if part.strip()}
    return None if "*" in names else frozenset(names)


def max_body_bytes(settings: Settings) -> int:
    """The body limit: ``api_max_body_bytes``, raised to fit a payload and metadata of
    ``payload_limit`` each (with room for the other fields)."""
    return max(settings.api_max_body_bytes, 2 * settings.payload_limit + _PAYLOAD_ROOM)


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/*+json``, any parameters."""
    media = content_type.partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


class _BodyTooLarge(Exception):
    """Raised to the route reading past the limit; the guard answers 413 instead."""


class ApiGuard:
    """The ASGI middleware (see the module's docstring)."""

    def __init__(self, app: ASGIApp, *, state: ApiState, settings: Settings) -> None:
        self.app = app
        self.state = state
        self.open = not state.auth_required
        self.allowed = allowed_hosts(settings.api_allowed_hosts)
        self.max_body = max_body_bytes(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        has_body, length = _body_of(headers)
        try:
            if self.open and scope["path"] not in UNGUARDED_PATHS:
                self._check_host(headers)
                self._check_origin(headers)
            if has_body:
                if length is not None and length > self.max_body:
                    raise self._too_large()
                _check_content_type(headers)
                secret = secret_from(headers)
                if secret:
                    await authenticate(self.state, scope, secret)
                elif self.state.auth_required:
                    raise unauthorized("an API key is required: Authorization: Bearer dt_…")
        except ApiError as exc:
            await _answer(exc, scope, receive, send, close=has_body)
            return
        except SchemaError as exc:  # as the routes answer it (outside them, no handler would)
            await _answer(unavailable(str(exc)), scope, receive, send, close=has_body)
            return
        except Exception as exc:
            if not self.state.app.unreachable(exc):
                raise
            await self._unreachable(exc, scope, receive, send)
            return
        await self._route(scope, receive, send, has_body=has_body)

    async def _route(self, scope: Scope, receive: Receive, send: Send, *, has_body: bool) -> None:
        """The route; a database it cannot reach (a failover, a restart) is 503 with
        ``Retry-After`` — unless the response had begun — not a 500 and a traceback."""
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            if has_body:
                await self._limited(scope, receive, tracking)
            else:
                await self.app(scope, receive, tracking)
        except Exception as exc:
            if started or not self.state.app.unreachable(exc):
                raise
            await self._unreachable(exc, scope, receive, send)

    @staticmethod
    async def _unreachable(exc: BaseException, scope: Scope, receive: Receive, send: Send) -> None:
        log.warning(
            "%s %s: 503, the database cannot be reached: %s",
            scope.get("method", "?"),
            scope.get("path", "?"),
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )
        await _answer(database_unreachable(exc), scope, receive, send, close=True)

    # --- open mode --------------------------------------------------------------------------

    def _allows(self, host: str) -> bool:
        return self.allowed is None or is_loopback(host) or host in self.allowed

    def _check_host(self, headers: Headers) -> None:
        authority = headers.get("host")
        if authority is None:  # HTTP/1.0 without Host: no browser sends that
            return
        host = host_of(authority)
        if not self._allows(host):
            raise ApiError(
                403,
                "host-not-allowed",
                "Host not allowed",
                f"Host {authority!r} is not allowed: this API is open (no API key needed), so it "
                "answers only loopback names (localhost, 127.0.0.1, [::1]) — a guard against "
                "DNS rebinding. Use a loopback address, list the name in "
                "DUETIME_API_ALLOWED_HOSTS, or require API keys.",
            )

    def _check_origin(self, headers: Headers) -> None:
        origin = headers.get("origin")
        if origin is None:
            return
        try:
            parts = urlsplit(origin.strip())
            scheme, host = parts.scheme, parts.hostname
        except ValueError:
            scheme, host = "", None
        if scheme not in ("http", "https") or not host or not self._allows(_normal(host)):
            raise ApiError(
                403,
                "origin-not-allowed",
                "Origin not allowed",
                f"Origin {origin!r} is not allowed: this API is open (no API key needed), so it "
                "takes requests from web pages of loopback origins only (http://localhost, "
                "http://127.0.0.1, http://[::1]) — a guard against cross-site requests. Open "
                "the page from a loopback address, list its host in DUETIME_API_ALLOWED_HOSTS, "
                "or require API keys.",
            )

    # --- bodies -----------------------------------------------------------------------------

    def _too_large(self) -> ApiError:
        return ApiError(
            413,
            "too-large",
            "Content too large",
            f"the request body is larger than {self.max_body} bytes (DUETIME_API_MAX_BODY_BYTES)",
        )

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route, reading the body through a counter: past the limit, the route's reading
        fails and whatever it answers is replaced with 413."""
        received = 0
        over = False
        started = False

        async def counting() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    over = True
                    raise _BodyTooLarge
            return message

        async def unless_over(message: Message) -> None:
            nonlocal started
            if over:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, unless_over)
        except Exception:
            if not over:
                raise
        if over and not started:
            await _answer(self._too_large(), scope, receive, send, close=True)


def _body_of(headers: Mapping[str, str]) -> tuple[bool, int | None]:
    """Whether the request has a body, and its declared length (None: chunked, or not a
    number — which uvicorn refuses before this)."""
    chunked = "transfer-encoding" in headers
    raw = headers.get("content-length")
    if raw is None:
        return chunked, None
    try:
        length = int(raw)
    except ValueError:
        return True, None
    return chunked or length > 0, None if chunked else length


def _check_content_type(headers: Mapping[str, str]) -> None:
    content_type = headers.get("content-type")
    if content_type is None or not is_json(content_type):
        given = "none" if content_type is None else repr(content_type)
        raise ApiError(
            415,
            "unsupported-media-type",
            "Unsupported media type",
            f"a request body must be JSON: Content-Type: application/json (got {given})",
        )


async def _answer(
    exc: ApiError, scope: Scope, receive: Receive, send: Send, *, close: bool
) -> None:
    headers = dict(exc.headers)
    if close:  # the body was not read: do not leave it to be drained
        headers["Connection"] = "close"
    response = problem_response(
        exc.status, exc.kind, exc.title, exc.detail, field=exc.field, headers=headers
    )
    await response(scope, receive, send)
