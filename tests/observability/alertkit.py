"""Helpers for the alert tests: an app whose alerts go to a local receiver (``receiver``, the
fixture in this folder's conftest), the real alert evaluator on it, leadership, and the signed
messages the receiver got."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from duetime import AsyncApp, RunContext
from duetime.maintenance.alerts import AlertEvaluator
from duetime.store.base import LeaderElectParams, LeaderFence
from duetime.targets.http import sign
from tests.observability.obskit import open_app
from tests.targets.receiver import Receiver
from tests.waiting import eventually

PATH = "/alerts"
"""Where the installation's alert webhook points on the receiver."""
SECRET = "alert-test-secret"
NO_WORKER_SOON = {"alert_no_worker_after": 0.5, "worker_stale_after": 1.0}
"""Settings under which a task whose only worker stopped is alerted (``no_worker``) within
about a second: a stopped worker counts as gone once silent for ``worker_stale_after``."""
ORPHAN = "a.orphan"
"""The task :func:`serve_orphan` registers."""


async def alerting_app(store_url: str, receiver: Receiver, **settings: Any) -> AsyncApp:
    """An open app (fast settings, ``settings`` over them) alerting to ``receiver``'s PATH."""
    return await open_app(
        store_url,
        alert_webhooks=receiver.url(PATH),
        alert_secret=SECRET,
        **settings,
    )


@contextlib.asynccontextmanager
async def evaluating(app: AsyncApp) -> AsyncIterator[AlertEvaluator]:
    """The alert evaluator on ``app``'s store and settings, closed (its HTTP sessions) after
    the block; the app stays open."""
    evaluator = AlertEvaluator(app.store, app.settings)
    try:
        yield evaluator
    finally:
        await evaluator.close()


@contextlib.asynccontextmanager
async def alerting(
    store_url: str, receiver: Receiver, **settings: Any
) -> AsyncIterator[tuple[AsyncApp, AlertEvaluator]]:
    """:func:`alerting_app` and its evaluator, both closed after the block."""
    app = await alerting_app(store_url, receiver, **settings)
    try:
        async with evaluating(app) as evaluator:
            yield app, evaluator
    finally:
        await app.close()


def serve_orphan(app: AsyncApp) -> None:
    """Register the task :data:`ORPHAN` (it does nothing) on ``app``."""

    @app.task(ORPHAN)
    async def orphan(ctx: RunContext, payload: Any) -> None:
        return None


async def lead(app: AsyncApp, node: str = "node-a") -> LeaderFence:
    won = await app.store.leader_elect(LeaderElectParams(node, ttl=120))
    assert won is not None
    return LeaderFence(node, won.term)


def messages(receiver: Receiver, kind: str) -> list[dict[str, Any]]:
    """The alert messages of ``kind`` the receiver got at PATH, each checked signed."""
    out = []
    for hit in receiver.hits_of(PATH):
        body = json.loads(hit.body)
        # every message is signed like a webhook target's request
        timestamp = int(hit.headers["Duetime-Timestamp"])
        assert hit.headers["Duetime-Signature"] == sign(SECRET, timestamp, hit.body)
        assert hit.headers["Idempotency-Key"] == f"{body['incident']['id']}:{body['event']}"
        if body["incident"]["kind"] == kind:
            out.append(body)
    return out


async def until_message(
    evaluator: AlertEvaluator,
    fence: LeaderFence,
    receiver: Receiver,
    kind: str,
    event: str,
    *,
    timeout: float = 20.0,
) -> dict[str, Any]:
    """Evaluate until the receiver has got the ``kind`` alert's ``event``; that message."""

    async def probe() -> dict[str, Any] | None:
        await evaluator.run_once(fence)
        found = [m for m in messages(receiver, kind) if m["event"] == event]
        return found[0] if found else None

    return await eventually(probe, what=f"{kind} {event}", timeout=timeout, every=0.2)


async def settle(evaluator: AlertEvaluator, fence: LeaderFence, passes: int = 3) -> None:
    for _ in range(passes):
        await evaluator.run_once(fence)


def assert_once(receiver: Receiver, kind: str, subject: str) -> None:
    """The ``kind`` alert of ``subject`` fired once and resolved once, the same incident."""
    mine = [m for m in messages(receiver, kind) if m["incident"]["subject"] == subject]
    assert [m["event"] for m in mine] == ["fired", "resolved"], mine
    assert mine[0]["incident"]["id"] == mine[1]["incident"]["id"]
    assert mine[1]["incident"]["state"] == "resolved"
