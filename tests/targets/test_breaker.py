"""Circuit breakers per target host (issue 19 item 7): the state machine on a hand-moved clock,
then end to end — a real local HTTP server that fails, then recovers: the breaker opens, runs
wait without using attempts, one probe goes through when it half-opens, and it closes; its
state is in the metrics gauge, the store and the API while open."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from duetime import AsyncApp, Retry, Settings
from duetime._types import AttemptOutcome, RunState
from duetime.api import create_api
from duetime.metrics import metrics
from duetime.targets.breaker import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    PROBE_WAIT,
    Breakers,
    Ticket,
    breaker_key,
)
from duetime.targets.http import WebhookFailed, WebhookRejected
from tests.targets.receiver import Receiver, Reply
from tests.targets.test_http_target import FAST, Harness


class HandClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_keys_are_per_host_and_port_or_command() -> None:
    assert breaker_key({"type": "http", "url": "https://a.example/x?q=1"}) == "http:a.example:443"
    assert breaker_key({"type": "http", "url": "http://a.example:8080/"}) == "http:a.example:8080"
    assert breaker_key({"type": "command", "name": "backup"}) == "command:backup"
    assert breaker_key(None) is None
    assert breaker_key({"type": "workflow", "name": "w"}) is None


def test_opens_after_n_failures_half_opens_with_one_probe_then_closes() -> None:
    clock = HandClock()
    changes: list[tuple[str, str]] = []
    breakers = Breakers(
        threshold=3, cooldown=30, clock=clock, on_change=lambda k, s: changes.append((k, s))
    )
    key = "http:h:80"
    for _ in range(2):
        breakers.failed(breakers.admit(key))
    assert breakers.state(key) == CLOSED
    breakers.succeeded(breakers.admit(key))  # a success resets the count
    for _ in range(3):
        breakers.failed(breakers.admit(key))
    assert breakers.state(key) == OPEN
    assert breakers.admit(key) == Ticket(key, wait=30.0)
    clock.now += 10
    assert breakers.admit(key) == Ticket(key, wait=20.0)
    clock.now += 20
    probe = breakers.admit(key)
    assert probe == Ticket(key, probe=True)
    assert breakers.state(key) == HALF_OPEN
    assert breakers.admit(key) == Ticket(key, wait=PROBE_WAIT)  # one probe at a time
    breakers.failed(probe)  # the probe failed: open for another cooldown
    assert breakers.state(key) == OPEN
    assert breakers.admit(key).wait == 30.0
    clock.now += 30
    probe = breakers.admit(key)
    breakers.released(probe)  # cancelled: no verdict, the next run probes
    probe = breakers.admit(key)
    assert probe.probe
    clock.now += 29  # a probe silent for a cooldown is presumed lost: another may go
    assert breakers.admit(key).wait == PROBE_WAIT
    clock.now += 1
    late = breakers.admit(key)
    assert late.probe
    breakers.succeeded(probe)
    assert breakers.state(key) == CLOSED
    assert breakers.admit(key) == Ticket(key)
    assert changes == [
        (key, OPEN),
        (key, HALF_OPEN),
        (key, OPEN),
        (key, HALF_OPEN),
        (key, CLOSED),
    ]


async def test_guard_counts_down_answers_and_cancels() -> None:
    breakers = Breakers(threshold=1, cooldown=30, clock=HandClock())

    async def fail(exc: BaseException) -> None:
        raise exc

    rejected = WebhookRejected("404")
    rejected.http_status = 404
    with pytest.raises(WebhookRejected):  # a 4xx: the host answered, it is up
        await breakers.guard(breakers.admit("a"), fail(rejected))
    assert breakers.state("a") == CLOSED
    with pytest.raises(ValueError, match="mine"):  # not about the target
        await breakers.guard(breakers.admit("a"), fail(ValueError("mine")))
    assert breakers.state("a") == CLOSED
    with pytest.raises(WebhookFailed):
        await breakers.guard(breakers.admit("a"), fail(WebhookFailed("503")))
    assert breakers.state("a") == OPEN


# --- end to end ----------------------------------------------------------------------------------


@pytest.fixture
async def harness(store_url: str, receiver: Receiver) -> AsyncIterator[Harness]:
    settings = Settings(
        database_url=store_url,
        breaker_threshold=2,
        breaker_cooldown=0.5,
        **FAST,  # type: ignore[arg-type]
    )
    async with AsyncApp(settings=settings, migrate=True) as app:
        h = Harness(app, receiver)
        try:
            yield h
        finally:
            await h.stop_workers()


async def test_a_failing_host_opens_the_breaker_and_runs_wait_without_burning_attempts(
    harness: Harness, receiver: Receiver
) -> None:
    app = harness.app
    worker = harness.start_worker()
    clock = HandClock()
    worker.breakers.clock = clock  # the cooldown ends when the test says so
    url = receiver.plan("/flaky", Reply(503), Reply(503), Reply(200))
    key = f"http:127.0.0.1:{receiver.port}"
    await harness.job(
        "flaky", url, retry=Retry(max_attempts=3, backoff_base=0.01, backoff_cap=0.02)
    )
    run = await app.trigger("flaky")

    # two failures open it; the retry then waits, handed back with its attempt refunded
    waited = await harness.until(
        run.id, lambda r: r.reason == "circuit_open" and r.state is RunState.SCHEDULED
    )
    assert waited.attempt == 2  # two real attempts; the waits used none
    assert worker.breakers.state(key) == OPEN
    assert len(receiver.hits_of("/flaky")) == 2  # nothing more was sent to the failing host
    gauge = metrics().registry.get_sample_value("duetime_circuit_breaker_state", {"target": key})
    assert gauge == 2.0

    await worker.report_breakers()
    [shown] = await app.breakers()
    assert (shown.key, shown.state, shown.failures) == (key, OPEN, 2)
    api = create_api(app, auth_required=False)
    transport = httpx.ASGITransport(app=api)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/api/v1") as c:
        listed = (await c.get("/breakers")).json()["breakers"]
    assert [(b["key"], b["state"], b["worker_id"]) for b in listed] == [(key, OPEN, worker.id)]

    clock.now += 3600  # the cooldown is over: the next claim probes and the host recovered
    done = await harness.settled(run.id)
    assert done.state is RunState.SUCCEEDED
    assert done.attempt == 3  # failed, failed, succeeded: the waits between burnt none
    assert len(receiver.hits_of("/flaky")) == 3
    assert worker.breakers.state(key) == CLOSED
    attempts = await app.attempts(run.id)
    waits = [a for a in attempts if a.error_class == "duetime.CircuitOpen"]
    assert waits
    assert all(a.outcome is AttemptOutcome.CANCELLED for a in waits)
    await worker.report_breakers()
    assert await app.breakers() == []
