"""The audit trail in the store (docs/decisions/0021), on both stores: a pending entry is
written by the change's own transaction — and rolled back with it; records read newest first,
filtered and paged; retention's prune is batched and leader-fenced, the only delete."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from duetime._audit import AuditEntry, recording
from duetime._clock import FrozenClock
from duetime.errors import NotFound
from duetime.store.base import (
    AuditListParams,
    AuditPruneParams,
    JobRef,
    LeaderElectParams,
    LeaderFence,
    Store,
    TenantLimitsSetParams,
)
from duetime.store.sqlfile import load_queries


def entry(action: str, subject: str = "nightly", tenant: str = "default") -> AuditEntry:
    return AuditEntry(tenant, "test", action, "job", subject_name=subject)


async def actions(store: Store, **filters: object) -> list[str]:
    page = await store.audit_list(AuditListParams("default", **filters))  # type: ignore[arg-type]
    return [r.action for r in page.items]


async def test_a_failed_change_leaves_no_record(store: Store) -> None:
    with recording(entry("deleted")), pytest.raises(NotFound):
        await store.job_delete(JobRef(tenant="default", name="missing"))
    assert await actions(store) == []


async def test_an_entry_is_written_once_and_a_write_without_one_records_nothing(
    store: Store,
) -> None:
    await store.tenant_limits_set(TenantLimitsSetParams(tenant="default", weight=2))
    assert await actions(store) == []
    with recording(AuditEntry("default", "test", "limits_set", "tenant", "default")):
        await store.tenant_limits_set(TenantLimitsSetParams(tenant="default", weight=3))
        await store.tenant_limits_set(TenantLimitsSetParams(tenant="default", weight=4))
    assert await actions(store) == ["limits_set"]


async def test_newest_first_filters_and_pages(store: Store, clock: FrozenClock) -> None:
    start = clock.now()
    for action in ("created", "paused", "resumed", "deleted"):
        clock.advance(timedelta(seconds=1))
        await store.audit_record(entry(action))
    await store.audit_record(entry("created", tenant="acme"))
    assert await actions(store) == ["deleted", "resumed", "paused", "created"]
    assert await actions(store, action="paused") == ["paused"]
    assert await actions(store, subject="elsewhere") == []
    window = await actions(
        store, since=start + timedelta(seconds=2), until=start + timedelta(seconds=4)
    )
    assert window == ["resumed", "paused"]
    first = await store.audit_list(AuditListParams(tenant="default", limit=3))
    assert first.next_cursor is not None
    rest = await store.audit_list(
        AuditListParams(
            tenant="default", limit=3, before=AuditListParams.before_cursor(first.next_cursor)
        )
    )
    assert [r.action for r in rest.items] == ["created"]
    assert rest.next_cursor is None


async def test_prune_is_batched_and_leader_fenced(store: Store, clock: FrozenClock) -> None:
    for _ in range(5):
        await store.audit_record(entry("triggered"))
    clock.advance(timedelta(days=2))
    await store.audit_record(entry("paused"))
    cut: datetime = clock.now() - timedelta(days=1)
    held = await store.leader_elect(LeaderElectParams(node_id="a", ttl=30.0))
    assert held is not None
    stale = LeaderFence("a", held.term + 1)
    assert await store.audit_prune(AuditPruneParams(before=cut, leader=stale)) == 0
    fence = LeaderFence("a", held.term)
    assert await store.audit_prune(AuditPruneParams(before=cut, limit=3, leader=fence)) == 3
    assert await store.audit_prune(AuditPruneParams(before=cut, limit=3, leader=fence)) == 2
    assert await actions(store) == ["paused"]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_no_query_but_retentions_changes_a_record(dialect: str) -> None:
    """Append-only: of every named query, only ``audit_prune`` deletes from the trail, and none
    updates it."""
    changing = {
        name
        for name, text in load_queries(dialect).items()
        if re.search(r"\b(UPDATE\s+audit|DELETE\s+FROM\s+audit)\b", text, re.IGNORECASE)
    }
    assert changing == {"audit_prune"}
