"""``duetime doctor`` (and a relay at start) on broker connections: a JetStream stream whose
duplicate window is shorter than the connection's ``duplicate_window`` is a warning naming the
stream; a broker that does not answer is a warning (its messages wait in the outbox); a bad
DUETIME_BROKERS is a failure naming the field."""

from __future__ import annotations

from pathlib import Path

from duetime._config import Settings
from duetime.app.doctor import Status, diagnose
from duetime.store import create_store
from tests.brokers.brokerkit import CLOSED, NatsConsumer, brokers_setting, need, relay_for


def broker_findings(findings: list) -> dict[str, tuple[Status, str]]:  # type: ignore[type-arg]
    return {f.check: (f.status, f.detail) for f in findings if f.check.startswith("broker")}


async def test_a_short_duplicate_window_is_a_warning(tmp_path: Path) -> None:
    need("nats")
    short = NatsConsumer()
    await short.open(duplicate_window=10)
    try:
        setting = brokers_setting("nats", duplicate_window=120)
        db = str(tmp_path / "d.db")
        found = broker_findings(await diagnose(Settings(database_url=db, brokers=setting)))
        status, detail = found["broker b"]
        assert status is Status.WARN
        assert f"{short.name} (10s)" in detail

        setting = brokers_setting("nats", duplicate_window=5)
        found = broker_findings(await diagnose(Settings(database_url=db, brokers=setting)))
        assert found["broker b"] == (Status.OK, "NATS JetStream answers")
    finally:
        await short.close()


async def test_brokers_that_answer_or_not(tmp_path: Path) -> None:
    need("redis")
    need("rabbitmq")
    db = str(tmp_path / "d.db")
    for kind in ("redis", "rabbitmq"):
        found = broker_findings(
            await diagnose(Settings(database_url=db, brokers=brokers_setting(kind)))
        )
        assert found["broker b"][0] is Status.OK
        down = brokers_setting(kind, CLOSED[kind])
        found = broker_findings(await diagnose(Settings(database_url=db, brokers=down)))
        status, detail = found["broker b"]
        assert status is Status.WARN
        assert "does not answer" in detail


async def test_a_bad_setting_is_a_failure(tmp_path: Path) -> None:
    bad = '{"b": {"type": "kafka", "url": "x"}}'
    findings = await diagnose(Settings(database_url=str(tmp_path / "d.db"), brokers=bad))
    (finding,) = [f for f in findings if f.check == "brokers"]
    assert finding.status is Status.FAIL
    assert "DUETIME_BROKERS.b.type" in finding.detail


async def test_a_relay_warns_at_start_about_a_short_window(store_url: str) -> None:
    need("nats")
    short = NatsConsumer()
    await short.open(duplicate_window=10)
    try:
        store = create_store(store_url)
        relay = relay_for(store, brokers_setting("nats", duplicate_window=120))
        (warning,) = [w for w in await relay.check_duplicate_windows() if short.name in w]
        assert "broker connection 'b'" in warning
        relay = relay_for(store, brokers_setting("nats"))  # no window configured: no check
        assert await relay.check_duplicate_windows() == []
    finally:
        await short.close()
