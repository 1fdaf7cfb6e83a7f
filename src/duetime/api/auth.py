"""Who is calling, for which tenant, and whether they may: API keys, roles, tenant views, and the
per-tenant rate limit — one FastAPI dependency per minimum role.

- A key comes as ``Authorization: Bearer dt_…`` or ``X-API-Key: dt_…``. No key (when keys are
  required), or an unknown or revoked one → 401.
- ``viewer`` reads; ``operator`` also writes (remote workers included); ``admin`` also manages
  its tenant (keys, limits); ``superadmin`` manages the installation and may act on any tenant
  with ``?tenant=``. A lower role → 403; anything of another tenant (``?tenant=`` naming it, its
  limits) without ``superadmin`` → 404, as another tenant's ids are.
- Every handler gets a :class:`Caller` whose ``app`` is an :class:`AsyncApp` view of the
  caller's tenant, so every query is filtered by it: another tenant's ids are simply not found;
  its actor, what the audit trail records, is ``key:<key id>/<role>``.
- With keys not required (``duetime up``, ``server --no-auth``) a call without a key acts as
  a superadmin on tenant ``default`` (or on ``?tenant=``); a key, when given, is still checked.
- A client address that presented too many unknown or revoked keys (``api_auth_failures`` a
  minute) gets 429 for its requests with a key, without them being looked up.
- A request with a body is authenticated by :mod:`duetime.api.guard` before its body is read;
  the key it found is kept in the request's scope, so it is looked up once.
- A key verified moments ago costs no round trip: ``app.keys.authenticate`` remembers it until
  any key changes (docs/decisions/0013-api-key-cache.md).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from duetime._types import ApiKey, ApiRole
from duetime.api.problems import (
    ApiError,
    forbidden,
    rate_limited,
    too_many_requests,
    unauthorized,
)
from duetime.api.ratelimit import RateLimiter, client_key
from duetime.app import AsyncApp
from duetime.app.reads import Reads, ReadSide
from duetime.errors import NotFound

DEFAULT_TENANT = "default"
TENANT_PATTERN = r"^[^\x00-\x1f\x7f]{1,100}$"

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    bearerFormat="dt_…",
    description="An API key: `Authorization: Bearer dt_…` (create one with `duetime keys create`).",
)
_api_key_header = APIKeyHeader(
    name="X-API-Key",
    auto_error=False,
    scheme_name="apiKey",
    description="The same API key in the `X-API-Key` header.",
)


@dataclass(frozen=True, slots=True)
class ApiState:
    """What the API process shares between requests."""

    app: AsyncApp
    auth_required: bool
    limiter: RateLimiter
    """Requests per tenant."""
    auth_failures: RateLimiter
    """Unknown or revoked keys per client address."""
    reads: ReadSide
    """Where the list and history pages and the gauges read: the replica, else the primary."""


_SCOPE_KEY = "duetime.api_key"


@dataclass(frozen=True, slots=True)
class _Authenticated:
    secret: str
    key: ApiKey


def secret_from(headers: Mapping[str, str]) -> str | None:
    """The key a request carries, as the ``bearer`` and ``apiKey`` schemes read it: ``Bearer``
    credentials, else the ``X-API-Key`` header."""
    authorization = headers.get("authorization")
    scheme, credentials = get_authorization_scheme_param(authorization)
    if authorization and scheme and credentials and scheme.lower() == "bearer":
        return credentials
    return headers.get("x-api-key") or None


def too_many_failures(retry_after: int, client: str) -> ApiError:
    return too_many_requests(
        retry_after,
        f"too many unknown or revoked API keys from {client}; retry after {retry_after} s",
    )


async def authenticate(state: ApiState, scope: MutableMapping[str, Any], secret: str) -> ApiKey:
    """The key with this secret, looked up once per request (the result is kept in ``scope``).
    Raises 401 for an unknown or revoked key (counted against the client's address) and 429
    while the address is over its failures."""
    found = scope.get(_SCOPE_KEY)
    if isinstance(found, _Authenticated) and found.secret == secret:
        return found.key
    client = scope.get("client")
    address = client_key(client[0] if client else None)
    retry_after = state.auth_failures.blocked(address)
    if retry_after is not None:
        raise too_many_failures(retry_after, address)
    key = await state.app.authenticate(secret)
    if key is None:
        state.auth_failures.acquire(address)
        raise unauthorized("unknown or revoked API key")
    scope[_SCOPE_KEY] = _Authenticated(secret, key)
    return key


@dataclass(frozen=True, slots=True)
class Caller:
    app: AsyncApp
    """A view of the app acting on ``tenant``."""
    tenant: str
    role: ApiRole
    key: ApiKey | None
    """None when keys are not required and none was given."""
    reads: Reads
    """The tenant's list and history reads, from the replica when one is set: never for
    anything that must be fresh or that decides a write (docs/howto/read-replica.md)."""


def state_of(request: Request) -> ApiState:
    state: ApiState = request.app.state.duetime
    return state


class Require:
    """The dependency admitting callers with at least ``role``."""

    def __init__(self, role: ApiRole) -> None:
        self.role = role

    async def __call__(
        self,
        request: Request,
        bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        api_key: Annotated[str | None, Depends(_api_key_header)],
        tenant: Annotated[
            str | None,
            Query(
                pattern=TENANT_PATTERN,
                description="Act on this tenant (superadmin keys only; default: the key's tenant).",
            ),
        ] = None,
    ) -> Caller:
        state = state_of(request)
        secret = bearer.credentials if bearer is not None else api_key
        key: ApiKey | None = None
        if secret:
            key = await authenticate(state, request.scope, secret)
        elif state.auth_required:
            raise unauthorized("an API key is required: Authorization: Bearer dt_…")
        role = key.role if key is not None else ApiRole.SUPERADMIN
        own = key.tenant if key is not None else DEFAULT_TENANT
        if not role.allows(self.role):
            raise forbidden(f"this needs the {self.role} role; the key is {role}")
        chosen = own if tenant is None else tenant
        if chosen != own and not role.allows(ApiRole.SUPERADMIN):
            raise other_tenant(chosen, role)
        retry_after = state.limiter.acquire(chosen)
        if retry_after is not None:
            raise rate_limited(retry_after, chosen)
        actor = f"key:{key.id}/{role}" if key is not None else f"api:no key/{role}"
        view = state.app.for_tenant(chosen, actor=actor)
        reads = state.reads.for_tenant(chosen)
        return Caller(app=view, tenant=chosen, role=role, key=key, reads=reads)


Viewer = Annotated[Caller, Depends(Require(ApiRole.VIEWER))]
Operator = Annotated[Caller, Depends(Require(ApiRole.OPERATOR))]
Admin = Annotated[Caller, Depends(Require(ApiRole.ADMIN))]
Superadmin = Annotated[Caller, Depends(Require(ApiRole.SUPERADMIN))]


def other_tenant(tenant: str, role: ApiRole) -> NotFound:
    """What a key that is not a superadmin's gets for anything of another tenant: not found,
    as that tenant's ids are (nothing says whether the tenant exists)."""
    return NotFound(
        f"tenant {tenant!r} is not this key's; only superadmin keys act on another tenant "
        f"(the key is {role})"
    )


def require_own_tenant(caller: Caller, tenant: str) -> None:
    """Raise 404 unless ``caller`` may manage ``tenant``: its own, or any as a superadmin."""
    if tenant != caller.tenant and not caller.role.allows(ApiRole.SUPERADMIN):
        raise other_tenant(tenant, caller.role)
