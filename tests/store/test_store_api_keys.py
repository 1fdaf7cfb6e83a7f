"""API keys (api_key_create, api_key_get_by_hash, api_keys_list, api_key_revoke, api_key_touch)
and the remote-worker reads (runs_claim's tenant filter, run_get_claimed), on both stores."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from storekit import LEASE, OTHER_TENANT, TASK, TENANT, WORKER, is_utc, s, scheduled_run

from duetime._types import ApiRole, RetryPolicy, RunState
from duetime.errors import NotFound
from duetime.store import Store
from duetime.store.base import (
    ApiKeyCreateParams,
    ApiKeyListParams,
    ApiKeyRevokeParams,
    ApiKeyTouchParams,
    RunsClaimParams,
)


def key_params(
    tenant: str = TENANT, role: ApiRole = ApiRole.OPERATOR, now: datetime | None = None
) -> ApiKeyCreateParams:
    secret = uuid.uuid4().hex
    return ApiKeyCreateParams(
        tenant=tenant, role=role, name="ci", prefix="dt_" + secret[:7], key_hash=secret, now=now
    )


async def test_create_and_find_by_hash(store: Store, t0: datetime) -> None:
    params = key_params(now=t0)
    key = await store.api_key_create(params)
    assert (key.id, key.tenant, key.role, key.name, key.prefix) == (
        params.id,
        TENANT,
        ApiRole.OPERATOR,
        "ci",
        params.prefix,
    )
    assert key.created_at == t0
    assert is_utc(key.created_at)
    assert key.revoked_at is None
    assert key.last_used_at is None
    assert await store.api_key_get_by_hash(params.key_hash) == key
    assert await store.api_key_get_by_hash("unknown") is None


async def test_list_by_tenant_oldest_first(store: Store, t0: datetime) -> None:
    first = await store.api_key_create(key_params(now=t0))
    other = await store.api_key_create(key_params(OTHER_TENANT, ApiRole.ADMIN, now=t0 + s(1)))
    second = await store.api_key_create(key_params(role=ApiRole.VIEWER, now=t0 + s(2)))
    assert await store.api_keys_list(ApiKeyListParams(tenant=TENANT)) == [first, second]
    assert await store.api_keys_list(ApiKeyListParams()) == [first, other, second]


async def test_revoke_is_idempotent_and_tenant_scoped(store: Store, t0: datetime) -> None:
    params = key_params(now=t0)
    key = await store.api_key_create(params)
    with pytest.raises(NotFound):
        await store.api_key_revoke(ApiKeyRevokeParams(key.id, tenant=OTHER_TENANT, now=t0))
    revoked = await store.api_key_revoke(ApiKeyRevokeParams(key.id, tenant=TENANT, now=t0 + s(5)))
    assert revoked.revoked_at == t0 + s(5)
    again = await store.api_key_revoke(ApiKeyRevokeParams(key.id, now=t0 + s(9)))
    assert again.revoked_at == t0 + s(5)  # the first revocation stands
    assert await store.api_key_get_by_hash(params.key_hash) is None
    listed = await store.api_keys_list(ApiKeyListParams(tenant=TENANT))
    assert [k.revoked_at for k in listed] == [t0 + s(5)]
    with pytest.raises(NotFound):
        await store.api_key_revoke(ApiKeyRevokeParams(uuid.uuid4()))


async def test_touch_writes_at_most_once_per_interval(store: Store, t0: datetime) -> None:
    params = key_params(now=t0)
    key = await store.api_key_create(params)
    await store.api_key_touch(ApiKeyTouchParams(key.id, every=60, now=t0 + s(1)))
    await store.api_key_touch(ApiKeyTouchParams(key.id, every=60, now=t0 + s(30)))
    found = await store.api_key_get_by_hash(params.key_hash)
    assert found is not None
    assert found.last_used_at == t0 + s(1)
    await store.api_key_touch(ApiKeyTouchParams(key.id, every=60, now=t0 + s(62)))
    found = await store.api_key_get_by_hash(params.key_hash)
    assert found is not None
    assert found.last_used_at == t0 + s(62)


async def test_claim_can_be_limited_to_one_tenant(store: Store, t0: datetime) -> None:
    ours = await scheduled_run(store, t0, "ours")
    theirs = await scheduled_run(store, t0, "theirs", tenant=OTHER_TENANT)

    def params(tenant: str) -> RunsClaimParams:
        return RunsClaimParams(
            worker_id=WORKER,
            tasks=[TASK],
            limit=10,
            lease_ttl=LEASE,
            lookahead=0,
            now=t0,
            tenant=tenant,
        )

    assert [c.run.id for c in await store.runs_claim(params(OTHER_TENANT))] == [theirs.id]
    assert [c.run.id for c in await store.runs_claim(params(TENANT))] == [ours.id]


async def test_run_get_claimed_has_the_retry_policy(store: Store, t0: datetime) -> None:
    retry = RetryPolicy(max_attempts=4, backoff_base=2.0, backoff_factor=3.0, backoff_cap=50.0)
    run = await scheduled_run(store, t0, retry=retry, timeout=12.5)
    claimed = await store.run_get_claimed(TENANT, run.id)
    assert claimed.run.id == run.id
    assert claimed.run.state is RunState.SCHEDULED
    assert claimed.retry == retry
    assert claimed.timeout == 12.5
    with pytest.raises(NotFound):
        await store.run_get_claimed(OTHER_TENANT, run.id)
