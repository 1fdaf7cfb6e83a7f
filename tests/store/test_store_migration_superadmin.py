"""Migration 018 (issue 22): the `superadmin` role. Keys written before it keep every field —
an `admin` key stays `admin`, which from now on means its own tenant's admin — and the table
accepts the new role. Both stores (SQLite rebuilds the table to change its CHECK)."""

from __future__ import annotations

import hashlib
from datetime import datetime

import pytest
from upgradekit import migrated_to

from duetime._types import ApiRole
from duetime.store import SCHEMA_VERSION, Store
from duetime.store.base import ApiKeyCreateParams, ApiKeyListParams, ApiKeyRevokeParams

pytestmark = pytest.mark.fresh_database


def _key(tenant: str, role: ApiRole, secret: str) -> ApiKeyCreateParams:
    return ApiKeyCreateParams(
        tenant=tenant,
        role=role,
        name=f"{tenant} {role}",
        prefix=secret[:10],
        key_hash=hashlib.sha256(secret.encode()).hexdigest(),
    )


async def test_keys_of_the_previous_schema_are_kept_and_admins_stay_admins(
    make_store, t0: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: Store = await make_store(migrate=False)
    await migrated_to(store, monkeypatch, 17)
    admin = await store.api_key_create(_key("acme", ApiRole.ADMIN, "dt_admin-secret"))
    viewer = await store.api_key_create(_key("globex", ApiRole.VIEWER, "dt_viewer-secret"))
    await store.api_key_revoke(ApiKeyRevokeParams(id=viewer.id, now=t0))
    before = await store.api_keys_list(ApiKeyListParams())

    assert await store.migrate() == SCHEMA_VERSION

    assert await store.api_keys_list(ApiKeyListParams()) == before
    found = await store.api_key_get_by_hash(hashlib.sha256(b"dt_admin-secret").hexdigest())
    assert found is not None
    assert (found.id, found.tenant, found.role) == (admin.id, "acme", ApiRole.ADMIN)
    root = await store.api_key_create(_key("default", ApiRole.SUPERADMIN, "dt_root-secret"))
    assert root.role is ApiRole.SUPERADMIN
    with pytest.raises(Exception, match=r"(?i)check"):  # the role is still checked
        await store.api_key_create(_key("default", "root", "dt_bad-secret"))  # type: ignore[arg-type]
