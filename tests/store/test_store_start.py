"""Starting a run claimed ahead: fenced, refused on a lapsed lease, and renewing the lease."""

from __future__ import annotations

from datetime import datetime

from storekit import LEASE, claim_one, get_run, s, scheduled_run

from duetime.store import Store
from duetime.store.base import RunStartParams


async def test_a_start_on_a_lapsed_lease_is_refused(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(1), "j")
    ahead = await claim_one(store, t0, lookahead=1)
    late = t0 + s(LEASE + 1)  # e.g. the database was down past the lease
    started = await store.run_start(
        RunStartParams(run_id=run.id, token=ahead.run.token, now=late, lease_ttl=LEASE)
    )
    assert started is False
    assert (await get_run(store, run.id)).started_at is None


async def test_a_start_renews_the_lease(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0 + s(1), "j")
    ahead = await claim_one(store, t0, lookahead=1)
    assert ahead.run.lease_expires_at == t0 + s(LEASE)
    assert await store.run_start(
        RunStartParams(run_id=run.id, token=ahead.run.token, now=t0 + s(1), lease_ttl=LEASE)
    )
    started = await get_run(store, run.id)
    assert started.started_at == t0 + s(1)
    assert started.lease_expires_at == t0 + s(1 + LEASE)
