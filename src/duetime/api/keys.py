"""``/api/v1/keys``: API keys of a tenant (its admins; a superadmin for any tenant): create (the
secret is shown once), list, revoke. Only a superadmin mints a superadmin key."""

from __future__ import annotations

from duetime._types import ApiRole
from duetime.api.auth import Admin
from duetime.api.endpoint import Endpoint
from duetime.api.params import KeyId
from duetime.api.problems import forbidden
from duetime.api.schemas import KeyCreate, KeyCreated, KeyList, KeyOut
from duetime.errors import Conflict


class CreateKey(Endpoint):
    """Create an API key
    For the tenant acted on (the admin key's own, or a superadmin's `?tenant=`). A `superadmin`
    key only by a superadmin (403 otherwise). The response holds the secret (`key`) this once:
    only its SHA-256 hash is stored."""

    method, path, tag, status_code = "POST", "/keys", "keys", 201
    errors = (403, 422)

    async def handle(self, body: KeyCreate, caller: Admin) -> KeyCreated:
        if body.role is ApiRole.SUPERADMIN and not caller.role.allows(ApiRole.SUPERADMIN):
            raise forbidden(
                f"only a superadmin key creates superadmin keys (the key is {caller.role})"
            )
        key, secret = await caller.app.create_key(body.role, name=body.name)
        return KeyCreated(**KeyOut.fields_of(key), key=secret)


class ListKeys(Endpoint):
    """List API keys
    Of the tenant acted on, revoked ones included (never their secrets)."""

    method, path, tag = "GET", "/keys", "keys"
    errors = (422,)

    async def handle(self, caller: Admin) -> KeyList:
        return KeyList(items=[KeyOut.of(k) for k in await caller.app.keys()])


class RevokeKey(Endpoint):
    """Revoke an API key
    At once: later requests with it are 401 (another server process on the same PostgreSQL
    database refuses it once the database's notification reaches it, within milliseconds).
    Revoking a revoked key changes nothing. A key
    cannot revoke itself (409), so an admin cannot lock the last way in out by mistake: revoke
    it with another admin key or `duetime keys revoke`."""

    method, path, tag, status_code = "DELETE", "/keys/{key_id}", "keys", 204
    errors = (404, 409)

    async def handle(self, key_id: KeyId, caller: Admin) -> None:
        if caller.key is not None and str(caller.key.id) == key_id.strip().lower():
            raise Conflict(
                "a key cannot revoke itself: use another admin key or `duetime keys revoke`"
            )
        await caller.app.revoke_key(key_id)


ENDPOINTS: tuple[type[Endpoint], ...] = (CreateKey, ListKeys, RevokeKey)
