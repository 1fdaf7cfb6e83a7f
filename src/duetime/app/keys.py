"""``app.keys``: the REST API's keys of a tenant — create (the secret is shown once), find,
revoke, and authenticate a secret. Calling the service itself finds keys: ``app.keys()``.

A key verified moments ago is reused without reading it again while the store says no key has
changed since (PostgreSQL hears revocations by LISTEN/NOTIFY; SQLite cannot hear other
processes, so it reads every time), and for :data:`KEY_CACHE_TTL` at most
(docs/decisions/0013-api-key-cache.md)."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from duetime._types import ApiKey, ApiRole, enum_value
from duetime.app._service import Scope, Service
from duetime.app.audit import audited
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
KEY_CACHE_TTL = timedelta(seconds=5)
"""The longest a verified key is reused without reading it again, by the app's clock: the bound
on a change the store's news missed (a listener connection silently dead, a key changed by
hand in SQL). Revocations through duetime are heard at once."""
KEY_CACHE_SIZE = 10_000
"""Verified keys remembered at most; the oldest is forgotten first."""


def hash_api_key(secret: str) -> str:
    """What the store keeps of an API key: the SHA-256 hex digest of its secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Verified:
    key: ApiKey
    epoch: int
    """The store's :meth:`~duetime.store.base.Store.api_keys_epoch` before the key was read."""
    read_at: datetime


class VerifiedKeys:
    """Keys found unrevoked moments ago, by the SHA-256 of their secret (never the secret).
    An entry is served only under the epoch it was read under and within
    :data:`KEY_CACHE_TTL` of its reading (a clock that went back distrusts it too)."""

    __slots__ = ("_by_hash",)

    def __init__(self) -> None:
        self._by_hash: dict[str, _Verified] = {}

    def get(self, key_hash: str, epoch: int, now: datetime) -> ApiKey | None:
        found = self._by_hash.get(key_hash)
        if found is None:
            return None
        if found.epoch != epoch or not found.read_at <= now < found.read_at + KEY_CACHE_TTL:
            del self._by_hash[key_hash]
            return None
        return found.key

    def put(self, key_hash: str, key: ApiKey, epoch: int, now: datetime) -> None:
        self._by_hash.pop(key_hash, None)
        if len(self._by_hash) >= KEY_CACHE_SIZE:
            del self._by_hash[next(iter(self._by_hash))]
        self._by_hash[key_hash] = _Verified(key, epoch, now)

    def update(self, key_hash: str, key: ApiKey) -> None:
        """Replace a remembered key (its ``last_used_at`` written), keeping its epoch and age."""
        found = self._by_hash.get(key_hash)
        if found is not None:
            self._by_hash[key_hash] = replace(found, key=key)

    def forget(self, key_hash: str) -> None:
        self._by_hash.pop(key_hash, None)


class Keys(Service):
    """API keys of one tenant (``app.keys``)."""

    __slots__ = ("_verified",)

    def __init__(self, scope: Scope) -> None:
        super().__init__(scope)
        self._verified: VerifiedKeys | None = None

    async def create(self, role: ApiRole | str, *, name: str = "") -> tuple[ApiKey, str]:
        """A new API key of this tenant. Returns the key and its secret (``dt_…``): the secret
        is shown this once; the store keeps only its SHA-256 hash."""
        chosen = enum_value(ApiRole, role, "role")
        if not isinstance(name, str) or len(name) > 200 or not name.isprintable():
            raise ValidationError("name", "must be at most 200 printable characters")
        secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
        params = ApiKeyCreateParams(
            tenant=self.tenant,
            role=chosen,
            name=name,
            prefix=secret[:10],
            key_hash=hash_api_key(secret),
        )
        # the record names the key, never its secret nor hash
        after = {"role": str(chosen), "name": name, "prefix": params.prefix}
        with audited(self, "created", "api_key", subject_id=params.id, change={"after": after}):
            key = await self.store.api_key_create(params)
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
        with audited(self, "revoked", "api_key", subject_id=found):
            return await self.store.api_key_revoke(
                ApiKeyRevokeParams(id=found, tenant=None if any_tenant else self.tenant)
            )

    async def authenticate(self, secret: str) -> ApiKey | None:
        """The unrevoked key with this secret, or None. Records its use (at most one write per
        key per minute). A key verified moments ago is reused without a read (see the module's
        docstring): a revocation through this app's store is seen by the very next call."""
        if not secret.startswith(API_KEY_PREFIX) or len(secret) > 200:
            return None
        key_hash = hash_api_key(secret)
        epoch = self.store.api_keys_epoch()  # before the read: a change during it distrusts it
        now = self.clock.now()
        if self._verified is None:
            self._verified = VerifiedKeys()
        key = None if epoch is None else self._verified.get(key_hash, epoch, now)
        if key is None:
            key = await self.store.api_key_get_by_hash(key_hash)
            if key is None:
                self._verified.forget(key_hash)
                return None
            if epoch is not None:
                self._verified.put(key_hash, key, epoch, now)
        if key.last_used_at is None or now - key.last_used_at > TOUCH_EVERY:
            await self.store.api_key_touch(ApiKeyTouchParams(id=key.id))
            self._verified.update(key_hash, replace(key, last_used_at=now))
        return key
