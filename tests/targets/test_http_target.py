"""HTTP webhook targets end to end: a real in-process worker on each store sends runs to a real
local HTTP server (aiohttp on 127.0.0.1) that answers per path with 2xx, 4xx, 5xx, redirects,
``Retry-After`` or never; outcomes are read back from the store."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import AsyncApp, Retry, Settings, ValidationError
from duetime._types import AttemptOutcome, Job, Run, RunState
from duetime.registration import JobSpec, build_upsert, upsert_job
from duetime.store.base import RunCompletion
from duetime.worker.worker import Worker
from tests.targets.receiver import HANG, Receiver, Reply

DOCS = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
YEARLY = "0 0 1 1 *"
"""Jobs here are triggered by hand; their own schedule never fires during a test."""


def documented_verify() -> Callable[..., bool]:
    """The ``verify`` function of docs/webhooks.md, executed as documented."""
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    source = next(b for b in blocks if "def verify(" in b)
    namespace: dict[str, Any] = {}
    exec(compile(source, str(DOCS), "exec"), namespace)
    return namespace["verify"]


@dataclass
class Harness:
    app: AsyncApp
    receiver: Receiver
    completions: list[RunCompletion] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    workers: list[tuple[asyncio.Event, asyncio.Task[None]]] = field(default_factory=list)

    def on_complete(self, completion: RunCompletion, applied: bool) -> None:
        self.completions.append(completion)

        async def notify() -> None:
            async with self.changed:
                self.changed.notify_all()

        asyncio.get_running_loop().create_task(notify())

    def start_worker(self, **settings: Any) -> Worker:
        """Start an in-process worker on the app's store (with other ``settings``, if given)."""
        app = self.app
        worker = Worker(
            app.store,
            app.registry,
            app.settings.with_(**settings),
            on_complete=self.on_complete,
        )
        stop = asyncio.Event()
        self.workers.append((stop, asyncio.create_task(worker.run(stop))))
        return worker

    async def stop_workers(self) -> None:
        for stop, _ in self.workers:
            stop.set()
        for _, task in self.workers:
            await asyncio.wait_for(task, 30)
        self.workers.clear()

    async def job(self, name: str, url: str, **target: Any) -> Job:
        retry = target.pop("retry", Retry(max_attempts=3, backoff_base=0.05, backoff_cap=0.1))
        return await self.app.schedule(
            name, target={"type": "http", "url": url, **target}, cron=YEARLY, retry=retry
        )

    async def fire(self, name: str, url: str, payload: Any = None, **target: Any) -> Run:
        await self.job(name, url, **target)
        return await self.app.trigger(name, payload=payload)

    async def until(
        self, run_id: uuid.UUID, done: Callable[[Run], bool], timeout: float = 20.0
    ) -> Run:
        """Wait (on completions, not sleeps) until the run satisfies ``done``."""
        deadline = time.monotonic() + timeout
        while True:
            seen = len(self.completions)
            run = await self.app.run(run_id)
            if done(run):
                return run
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"run never got there; last seen: {run}")
            async with self.changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait_for(self._after(seen)), left)

    def _after(self, seen: int) -> Callable[[], bool]:
        return lambda: len(self.completions) > seen

    async def settled(self, run_id: uuid.UUID, timeout: float = 20.0) -> Run:
        return await self.until(run_id, lambda r: r.state.terminal, timeout)


FAST = {
    "lease_ttl": 10.0,
    "heartbeat_interval": 1.0,
    "worker_poll_interval": 0.05,
    "worker_lookahead": 0.05,
    "shutdown_grace": 2.0,
    "http_allow_hosts": "127.0.0.1",
}


@pytest.fixture
async def harness(store_url: str, receiver: Receiver) -> AsyncIterator[Harness]:
    settings = Settings(database_url=store_url, **FAST)  # type: ignore[arg-type]
    async with AsyncApp(settings=settings, migrate=True) as app:
        h = Harness(app, receiver)
        h.start_worker()
        try:
            yield h
        finally:
            await h.stop_workers()


# --- success, headers, signature ---------------------------------------------------------------


async def test_success_sends_the_payload_signed_with_the_documented_headers(
    harness: Harness, receiver: Receiver
) -> None:
    url = receiver.plan("/ok", Reply(200))
    run = await harness.fire(
        "hook.ok",
        url,
        payload={"invoice": 42, "note": "é"},
        method="PUT",
        headers={"Authorization": "Bearer abc"},
    )
    done = await harness.settled(run.id)
    assert done.state is RunState.SUCCEEDED
    assert done.attempt == 1
    assert done.target is not None
    assert done.target["url"] == url

    [hit] = receiver.hits_of("/ok")
    assert hit.method == "PUT"
    assert json.loads(hit.body) == {"invoice": 42, "note": "é"}
    headers = hit.headers
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer abc"
    assert headers["Idempotency-Key"] == str(run.id)
    assert headers["Duetime-Run-Id"] == str(run.id)
    assert headers["Duetime-Attempt"] == "1"
    assert headers["Duetime-Fencing-Token"] == str(done.token)
    assert headers["User-Agent"].startswith("duetime")
    scheduled = datetime.fromisoformat(headers["Duetime-Scheduled-For"].replace("Z", "+00:00"))
    assert scheduled == done.scheduled_for
    assert headers["Duetime-Scheduled-For"].endswith("Z")
    assert abs(int(headers["Duetime-Timestamp"]) - hit.at) <= 2

    verify = documented_verify()
    secret = await harness.app.webhook_secret()
    assert verify(secret, headers, hit.body)
    assert not verify(secret, headers, hit.body + b" ")
    assert not verify("another secret", headers, hit.body)
    stale = {**headers, "Duetime-Timestamp": str(int(headers["Duetime-Timestamp"]) - 3600)}
    assert not verify(secret, stale, hit.body)


async def test_a_scheduled_run_carries_the_jobs_target(
    harness: Harness, receiver: Receiver
) -> None:
    url = receiver.plan("/scheduled", Reply(204, body=""))
    job = await harness.app.schedule(
        "hook.now", target={"type": "http", "url": url}, now=True, payload=[1, 2]
    )
    assert job.task == "duetime.http"
    assert job.target == {
        "type": "http",
        "url": url,
        "method": "POST",
        "headers": {},
        "timeout": 30.0,
    }
    stop = asyncio.Event()
    scheduler = asyncio.create_task(harness.app.materializer().run(stop))
    try:
        [hit] = await receiver.wait_hits("/scheduled", 1)
    finally:
        stop.set()
        await scheduler
    assert json.loads(hit.body) == [1, 2]
    [run] = (await harness.app.runs("hook.now")).items
    run = await harness.settled(run.id)
    assert run.state is RunState.SUCCEEDED
    assert run.target == job.target


async def test_tenants_have_distinct_stable_secrets(harness: Harness) -> None:
    store = harness.app.store
    first = await store.tenant_secret("acme")
    assert len(first) >= 32
    assert await store.tenant_secret("acme") == first
    assert await store.tenant_secret("globex") != first
    racing = await asyncio.gather(*(store.tenant_secret("initech") for _ in range(5)))
    assert len(set(racing)) == 1  # concurrent first uses agree on one secret
    assert await harness.app.webhook_secret() == await store.tenant_secret("default")


# --- retries -----------------------------------------------------------------------------------


async def test_a_5xx_is_retried_with_the_same_idempotency_key(
    harness: Harness, receiver: Receiver
) -> None:
    url = receiver.plan("/flaky", Reply(500, body="database is down"), Reply(200))
    run = await harness.fire("hook.flaky", url, payload={"n": 1})
    done = await harness.settled(run.id)
    assert done.state is RunState.SUCCEEDED
    assert done.attempt == 2

    first, second = receiver.hits_of("/flaky")
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"] == str(run.id)
    assert (first.headers["Duetime-Attempt"], second.headers["Duetime-Attempt"]) == ("1", "2")
    assert int(second.headers["Duetime-Fencing-Token"]) > int(
        first.headers["Duetime-Fencing-Token"]
    )
    assert first.body == second.body

    failed, succeeded = await harness.app.attempts(run.id)
    assert failed.outcome is AttemptOutcome.FAILED
    assert "500" in (failed.error_message or "")
    assert "database is down" in (failed.error_message or "")
    assert succeeded.outcome is AttemptOutcome.SUCCEEDED


def _http_date(seconds_from_now: float) -> str:
    return email.utils.format_datetime(
        datetime.now(UTC) + timedelta(seconds=seconds_from_now), usegmt=True
    )


@pytest.mark.parametrize(
    ("status", "retry_after"),
    [
        pytest.param(503, lambda: "30", id="503-seconds"),
        pytest.param(429, lambda: _http_date(30), id="429-http-date"),
    ],
)
async def test_retry_after_is_honoured(
    harness: Harness, receiver: Receiver, status: int, retry_after: Callable[[], str]
) -> None:
    url = receiver.plan("/busy", Reply(status, headers={"Retry-After": retry_after()}))
    run = await harness.fire("hook.busy", url)
    waiting = await harness.until(
        run.id, lambda r: r.state is RunState.SCHEDULED and r.attempt == 1
    )
    [hit] = receiver.hits_of("/busy")
    delay = waiting.available_at.timestamp() - hit.at
    assert 27 <= delay <= 32, delay  # the backoff here is at most 0.1 s
    assert str(status) in (waiting.last_error_message or "")
    assert "Retry-After" in (waiting.last_error_message or "")


async def test_a_hanging_endpoint_times_out_and_never_blocks_other_runs(
    harness: Harness, receiver: Receiver
) -> None:
    slow_url = receiver.plan("/slow", HANG)
    fast_url = receiver.plan("/fast", Reply(200))
    slow = await harness.fire(
        "hook.slow",
        slow_url,
        timeout=1.5,
        retry=Retry(max_attempts=2, backoff_base=0.05, backoff_cap=0.1),
    )
    await receiver.wait_hits("/slow", 1)
    fast = await harness.fire("hook.fast", fast_url)
    fast_done = await harness.settled(fast.id)
    assert fast_done.state is RunState.SUCCEEDED
    assert (await harness.app.run(slow.id)).state is RunState.RUNNING  # still waiting on /slow

    slow_done = await harness.settled(slow.id)
    assert slow_done.state is RunState.DEAD
    assert slow_done.reason == "attempts_exhausted"
    attempts = await harness.app.attempts(slow.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.TIMED_OUT] * 2
    assert "timed out after 1.5s" in (attempts[0].error_message or "")
    assert len(receiver.hits_of("/slow")) == 2


async def test_connection_refused_is_retryable(harness: Harness, receiver: Receiver) -> None:
    # a port nothing listens on: bind, note the port, close
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    run = await harness.fire(
        "hook.nobody",
        f"http://127.0.0.1:{port}/x",
        retry=Retry(max_attempts=2, backoff_base=0.05, backoff_cap=0.1),
    )
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    assert done.reason == "attempts_exhausted"
    assert done.attempt == 2


# --- permanent failures ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 404, 410, 422])
async def test_client_errors_are_permanent(
    harness: Harness, receiver: Receiver, status: int
) -> None:
    url = receiver.plan("/bad", Reply(status, body="no such invoice " * 40)) + "?token=secret"
    run = await harness.fire("hook.bad", url)
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    assert done.reason == "permanent_error"
    assert done.attempt == 1
    message = done.last_error_message or ""
    assert f"returned {status}" in message
    assert "no such invoice" in message
    assert len(message) < 400  # an excerpt, not the whole body
    assert "secret" not in message  # the query string stays out of messages
    assert len(receiver.hits_of("/bad")) == 1


async def test_a_redirect_is_permanent_and_not_followed(
    harness: Harness, receiver: Receiver
) -> None:
    elsewhere = receiver.plan("/elsewhere", Reply(200))
    url = receiver.plan("/moved", Reply(302, headers={"Location": elsewhere}))
    run = await harness.fire("hook.moved", url)
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    assert done.reason == "permanent_error"
    assert "302" in (done.last_error_message or "")
    assert "redirect" in (done.last_error_message or "")
    assert "/elsewhere" in (done.last_error_message or "")
    assert receiver.hits_of("/elsewhere") == []


# --- the allow-list ----------------------------------------------------------------------------


async def test_loopback_is_refused_unless_listed(harness: Harness, receiver: Receiver) -> None:
    await harness.stop_workers()
    harness.start_worker(http_allow_hosts="")  # the default: public addresses only
    url = receiver.plan("/internal", Reply(200))
    run = await harness.fire("hook.loopback", url)
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    assert done.reason == "permanent_error"
    assert done.attempt == 1
    assert "127.0.0.1" in (done.last_error_message or "")
    assert "DUETIME_HTTP_ALLOW_HOSTS" in (done.last_error_message or "")

    # a host name is resolved and its addresses checked when the request is made
    named = await harness.fire("hook.named", f"http://localhost:{receiver.port}/internal")
    refused = await harness.settled(named.id)
    assert refused.state is RunState.DEAD
    assert refused.reason == "permanent_error"
    assert "refused to send to localhost" in (refused.last_error_message or "")
    assert receiver.hits_of("/internal") == []


async def inject(harness: Harness, name: str, url: str) -> None:
    """Store a job whose target has ``url`` without registration's checks, the way an older row
    (or a bug) might hold it."""
    spec = JobSpec(name=name, target={"type": "http", "url": "http://127.0.0.1/"}, cron=YEARLY)
    params = build_upsert(
        spec, tenant="default", settings=harness.app.settings, now=datetime.now(UTC)
    )
    target = {**(params.target or {}), "url": url}
    await upsert_job(harness.app.store, dataclasses.replace(params, target=target))


async def test_cloud_metadata_is_refused_even_when_listed(harness: Harness) -> None:
    await harness.stop_workers()
    harness.start_worker(http_allow_hosts="127.0.0.1,169.254.0.0/16,0.0.0.0/0")
    # registration refuses the address, so write the job the way an older row might hold it
    await inject(harness, "hook.metadata", "http://169.254.169.254/latest/meta-data/")
    run = await harness.app.trigger("hook.metadata")
    done = await harness.settled(run.id)
    assert done.state is RunState.DEAD
    assert done.reason == "permanent_error"
    assert done.attempt == 1
    assert "link-local" in (done.last_error_message or "")


async def test_unicode_hosts_never_reach_a_loopback_listener(
    harness: Harness, receiver: Receiver
) -> None:
    """Issue 13: fullwidth digits, ideographic full stops or circled digits read as 127.0.0.1
    by the HTTP client. Refused at registration; a job holding one anyway goes dead at its
    first attempt with nothing sent."""
    await harness.stop_workers()
    harness.start_worker(http_allow_hosts="")  # no allow-list: public addresses only
    receiver.plan("/internal", Reply(200))
    hosts = ["１２７.０.０.１", "127。0。0。1", "①②⑦.⓪.⓪.①"]
    for n, host in enumerate(hosts):
        url = f"http://{host}:{receiver.port}/internal"
        with pytest.raises(ValidationError) as caught:
            await harness.job(f"hook.unicode{n}", url)
        assert caught.value.field == "target.url"
        assert "non-ASCII" in caught.value.reason

        await inject(harness, f"hook.unicode{n}", url)
        run = await harness.app.trigger(f"hook.unicode{n}")
        done = await harness.settled(run.id)
        assert done.state is RunState.DEAD
        assert done.reason == "permanent_error"
        assert done.attempt == 1
        assert "non-ASCII" in (done.last_error_message or "")
        assert "127.0.0.1" in (done.last_error_message or "")
    assert receiver.hits == []
