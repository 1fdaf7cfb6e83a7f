"""``duetime nodes``: a leader whose lease expired is not shown as the leader (issue 17)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from clikit import Invoke

from duetime.app import AsyncApp
from duetime.store.base import LeaderElectParams


def _elect(db: str, node: str, ttl: float, now: datetime) -> None:
    async def elect() -> None:
        async with AsyncApp(db, migrate=True) as app:
            assert await app.store.leader_elect(LeaderElectParams(node, ttl=ttl, now=now))

    asyncio.run(elect())


def test_a_leader_that_stopped_is_shown_expired(invoke: Invoke, db: str) -> None:
    _elect(db, "node-gone", 30, datetime.now(UTC) - timedelta(minutes=15))
    shown = invoke("nodes")
    assert shown.exit_code == 0, shown.output
    first = shown.stdout.splitlines()[0]
    assert first.startswith("leader: none")
    assert "node-gone" in first
    assert "expired" in first


def test_a_live_leader_is_shown(invoke: Invoke, db: str) -> None:
    _elect(db, "node-here", 120, datetime.now(UTC))
    shown = invoke("nodes")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith("leader: node-here (term ")
