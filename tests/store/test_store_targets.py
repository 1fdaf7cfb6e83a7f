"""Issue 19's store methods on both stores: the circuit breakers workers report (listed for
registered workers only, replaced per worker) and a tenant's signing secrets around a
rotation's overlap window (decision 0027)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime._types import BreakerState, WorkerInfo
from duetime.store.base import Store


async def test_reported_breakers_are_listed_for_live_workers_only(store: Store) -> None:
    now = await store.db_now()
    for worker_id in ("w1", "w2"):
        await store.worker_register(
            WorkerInfo(
                id=worker_id,
                host="h",
                pid=1,
                tasks=("t",),
                queues=("*",),
                started_at=now,
                heartbeat_at=now,
            )
        )
    at = datetime(2026, 1, 1, tzinfo=UTC)
    state = BreakerState("w1", "http:a:443", "open", 5, at, at.replace(minute=1))
    await store.breakers_report("w1", [state])
    await store.breakers_report("w2", [BreakerState("w2", "command:x", "half_open", 3, at, at)])
    listed = await store.breakers_list()
    assert [(b.worker_id, b.key, b.state, b.failures) for b in listed] == [
        ("w2", "command:x", "half_open", 3),  # opened at the same instant: by key
        ("w1", "http:a:443", "open", 5),
    ]
    assert listed[1].opened_at == at
    assert listed[1].retry_at == at.replace(minute=1)
    await store.breakers_report("w1", [])  # all closed
    await store.worker_unregister("w2")
    assert await store.breakers_list() == []


async def test_a_rotation_keeps_the_previous_secret_until_its_window_ends(store: Store) -> None:
    old = await store.tenant_secret("acme")
    assert await store.tenant_signing_secrets("acme") == [old]
    now = await store.db_now()
    rotation = await store.tenant_secret_rotate("acme", timedelta(hours=1), now=now)
    assert rotation.previous_until == now + timedelta(hours=1)
    assert await store.tenant_secret("acme") == rotation.secret
    before = rotation.previous_until - timedelta(microseconds=1)
    assert await store.tenant_signing_secrets("acme", now=before) == [rotation.secret, old]
    assert await store.tenant_signing_secrets("acme", now=rotation.previous_until) == [
        rotation.secret
    ]
    again = await store.tenant_secret_rotate("acme", timedelta(hours=1), now=now)
    assert await store.tenant_signing_secrets("acme", now=now) == [again.secret, rotation.secret]
    # another tenant is untouched; a tenant never seen gets its row on first rotation
    fresh = await store.tenant_secret_rotate("new-tenant", timedelta(minutes=5), now=now)
    assert len(await store.tenant_signing_secrets("new-tenant", now=now)) == 2
    assert fresh.secret != again.secret
