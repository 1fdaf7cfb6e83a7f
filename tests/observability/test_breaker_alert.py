"""The ``breaker_open`` alert (issue 19): fires once when a worker has reported a breaker open
longer than ``alert_breaker_open_after``, and resolves when no live worker reports it any more;
the pure condition builder is checked on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime._types import BreakerState, WorkerInfo
from duetime.maintenance.breaker_alerts import breaker_conditions
from tests.observability.alertkit import alerting, lead, messages, settle, until_message
from tests.targets.receiver import Receiver

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_only_breakers_open_long_enough_make_one_condition_per_key() -> None:
    def state(worker: str, key: str, opened: datetime) -> BreakerState:
        return BreakerState(worker, key, "open", 5, opened, opened + timedelta(seconds=30))

    now = T0 + timedelta(minutes=10)
    conditions = breaker_conditions(
        [
            state("w1", "http:a:443", T0),
            state("w2", "http:a:443", T0 + timedelta(minutes=1)),
            state("w1", "command:fresh", now - timedelta(seconds=10)),
        ],
        now,
        open_after=300,
    )
    assert [c.subject for c in conditions] == ["http:a:443"]
    assert conditions[0].details["workers"] == ["w1", "w2"]
    assert conditions[0].tenant is None


async def test_a_breaker_left_open_fires_once_and_resolves_when_it_closes(
    store_url: str, receiver: Receiver
) -> None:
    async with alerting(store_url, receiver, alert_breaker_open_after=60.0) as (app, evaluator):
        fence = await lead(app)
        now = await app.store.db_now()
        await app.store.worker_register(
            WorkerInfo("w1", "h", 1, ("t",), ("*",), started_at=now, heartbeat_at=now)
        )
        opened = now - timedelta(minutes=5)
        breaker = BreakerState("w1", "http:crm.example:443", "open", 7, opened, now)
        await app.store.breakers_report("w1", [breaker])
        fired = await until_message(evaluator, fence, receiver, "breaker_open", "fired")
        assert fired["incident"]["subject"] == "http:crm.example:443"
        assert "7 consecutive failures" in fired["incident"]["summary"]
        await settle(evaluator, fence)
        assert len(messages(receiver, "breaker_open")) == 1
        await app.store.breakers_report("w1", [])  # it closed
        await until_message(evaluator, fence, receiver, "breaker_open", "resolved")
