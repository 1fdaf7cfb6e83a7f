"""``app.keys``: the REST API's keys of a tenant — create (the secret is shown once), find,
revoke, and authenticate a secret. Calling the service itself finds keys: ``app.keys()``."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta

from duetime._types import ApiKey, ApiRole
from duetime.app._service import Service, enum_value
from duetime.errors import NotFound, ValidationError
from duetime.store.base import (
    ApiKeyCreateParams,
    ApiKeyListParams,
    ApiKeyRevokeParams,
    ApiKeyTouchParams,
)

API_KEY_PREFIX = "dt_"
TOUCH_EVERY = timedelta(seconds=60)
"""A key's ``last_used_at`` is written at most this often."""


def hash_api_key(secret: str) -> str:
    """What the store keeps of an API key: the SHA-256 hex digest of its secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


class Keys(Service):
    """API keys of one tenant (``app.keys``)."""

    __slots__ = ()

    async def create(self, role: ApiRole | str, *, name: str = "") -> tuple[ApiKey, str]:
        """A new API key of this tenant. Returns the key and its secret (``dt_…``): the secret
        is shown this once; the store keeps only its SHA-256 hash."""
        chosen = enum_value(ApiRole, role, "role")
        if not isinstance(name, str) or len(name) > 200 or not name.isprintable():
            raise ValidationError("name", "must be at most 200 printable characters")
        secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
        key = await self.store.api_key_create(
            ApiKeyCreateParams(
                tenant=self.tenant,
                role=chosen,
                name=name,
                prefix=secret[:10],
                key_hash=hash_api_key(secret),
            )
        )
        return key, secret

    async def find(self, *, all_tenants: bool = False) -> list[ApiKey]:
        """This tenant's API keys (or every tenant's), revoked ones included, oldest first."""
        return await self.store.api_keys_list(
            ApiKeyListParams(tenant=None if all_tenants else self.tenant)
        )

    __call__ = find
    """``app.keys()`` is ``app.keys.find()``: the flat API's name."""

    async def revoke(self, key_id: str | uuid.UUID, *, any_tenant: bool = False) -> ApiKey:
        """Revoke a key of this tenant (of any tenant with ``any_tenant``). NotFound."""
        try:
            found = key_id if isinstance(key_id, uuid.UUID) else uuid.UUID(key_id)
        except ValueError:
            raise NotFound(f"API key {key_id!r} not found (not a key id)") from None
        return await self.store.api_key_revoke(
            ApiKeyRevokeParams(id=found, tenant=None if any_tenant else self.tenant)
        )

    async def authenticate(self, secret: str) -> ApiKey | None:
        """The unrevoked key with this secret, or None. Records its use (at most one write per
        key per minute)."""
        if not secret.startswith(API_KEY_PREFIX) or len(secret) > 200:
            return None
        key = await self.store.api_key_get_by_hash(hash_api_key(secret))
        if key is not None and (
            key.last_used_at is None or self.clock.now() - key.last_used_at > TOUCH_EVERY
        ):
            await self.store.api_key_touch(ApiKeyTouchParams(id=key.id))
        return key
