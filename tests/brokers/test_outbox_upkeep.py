"""Keeping the outbox in check, on each store (Redis as the broker): the leader's alerts fire
while messages wait too long and while dead messages wait, and resolve once they are
published or replayed; retention prunes sent messages with the history, never dead ones; the
relay's depth gauges."""

from __future__ import annotations

from duetime._config import Settings
from duetime._monitoring import AlertKind
from duetime._outbox import OutboxClaimParams
from duetime.maintenance.alerts import AlertEvaluator
from duetime.maintenance.retention import RetentionPruner
from duetime.metrics import Metrics
from duetime.testing import FrozenApp, FrozenClock
from duetime.worker.relay import BACKOFF_CAP
from tests.brokers.brokerkit import CLOSED, brokers_setting, need, relay_all, relay_for
from tests.brokers.test_relay import run_feed
from tests.observability.test_alerts import lead


async def test_alerts_fire_and_resolve(store_url: str, clock: FrozenClock) -> None:
    need("redis")
    down = brokers_setting("redis", CLOSED["redis"])
    up = brokers_setting("redis")
    settings = Settings(brokers=down, alert_outbox_after=30)
    target = {"type": "redis", "connection": "b", "stream": "duetime-test-alerts"}
    async with FrozenApp(store_url, clock=clock, settings=settings) as app:
        await run_feed(app, target, 2)
        evaluator = AlertEvaluator(app.store, app.settings)
        try:
            fence = await lead(app)
            first = await evaluator.run_once(fence)
            assert AlertKind.OUTBOX_BACKLOG not in {i.kind for i in first.opened}  # young yet
            clock.advance(seconds=31)
            fired = await evaluator.run_once(fence)
            [backlog] = [i for i in fired.opened if i.kind is AlertKind.OUTBOX_BACKLOG]
            assert backlog.details["pending"] == 2
            assert backlog.details["by_connection"] == {"b": 2}

            clock.advance(seconds=BACKOFF_CAP + 1)
            refused, _ = await app.store.outbox_claim(OutboxClaimParams(["b"], lease=0.5))
            await app.store.outbox_dead([(refused.id, "refused for good")])
            clock.advance(seconds=1)
            assert (await relay_all(relay_for(app.store, up))).sent == 1
            both = await evaluator.run_once(fence)
            assert AlertKind.OUTBOX_BACKLOG in {i.kind for i in both.resolved}
            [dead] = [i for i in both.opened if i.kind is AlertKind.OUTBOX_DEAD]
            assert dead.details == {"dead": 1}
            assert await app.outbox.replay() == 1
            assert (await relay_all(relay_for(app.store, up))).sent == 1
            after = await evaluator.run_once(fence)
            assert AlertKind.OUTBOX_DEAD in {i.kind for i in after.resolved}
        finally:
            await evaluator.close()
            import redis.asyncio as aioredis

            client = aioredis.from_url("redis://127.0.0.1:6379/0")
            await client.delete("duetime-test-alerts")
            await client.aclose()


async def test_retention_prunes_sent_messages_with_the_history(
    store_url: str, clock: FrozenClock
) -> None:
    need("redis")
    up = brokers_setting("redis")
    target = {"type": "redis", "connection": "b", "stream": "duetime-test-retention"}
    async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=up)) as app:
        await run_feed(app, target, 3)
        await relay_all(relay_for(app.store, up))
        clock.advance(days=2)
        await run_feed(app, target, 2, name="later")
        await relay_all(relay_for(app.store, up))
        clock.advance(days=app.settings.retention_days - 1)  # past the first 3 only

        await RetentionPruner(app.store, app.settings, batch=2).run_once()

        assert await app.store.outbox_prune(clock.now(), limit=100) == 2  # the later 2 were kept


async def test_the_relay_reports_depth_gauges(store_url: str, clock: FrozenClock) -> None:
    need("redis")
    down = brokers_setting("redis", CLOSED["redis"])
    target = {"type": "redis", "connection": "b", "stream": "duetime-test-gauges"}
    async with FrozenApp(store_url, clock=clock, settings=Settings(brokers=down)) as app:
        await run_feed(app, target, 2)
        clock.advance(seconds=42)
        registry = Metrics()
        await relay_for(app.store, down, registry=registry).observe_depth()
    sample = registry.registry.get_sample_value
    assert sample("duetime_outbox_pending", {"connection": "b"}) == 2
    assert sample("duetime_outbox_oldest_age_seconds") == 42
    assert sample("duetime_outbox_dead") == 0
