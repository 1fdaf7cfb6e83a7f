"""A tenant's own alert webhooks (issue 22, item 2): a tenant's incidents also go to the URLs
the tenant set, signed with the tenant's webhook secret, never another tenant's; the
installation's webhooks still get every incident. A tenant's URLs are its input: they pass the
webhook targets' host policy when connecting (loopback only where ``http_allow_hosts`` lists
it), where the installation's are the operator's. Setting them: both stores, field errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duetime import AsyncApp
from duetime.errors import ValidationError
from duetime.targets.http import sign
from tests.observability.alertkit import (
    NO_WORKER_SOON,
    ORPHAN,
    alerting,
    alerting_app,
    lead,
    serve_orphan,
    settle,
    until_message,
)
from tests.observability.obskit import worker
from tests.targets.receiver import Receiver, Reply
from tests.waiting import eventually


@pytest.fixture
def receiver(receiver: Receiver) -> Receiver:
    """The alerts' receiver (conftest) answering 200 at each tenant's path too."""
    for path in ("/acme", "/globex"):
        receiver.plan(path, Reply(200))
    return receiver


async def _orphaned(app: AsyncApp, tenant: str) -> None:
    """A run of ``tenant`` due for a task whose only worker stopped: a `no_worker` incident."""
    async with worker(app, [ORPHAN]):
        pass
    await app.for_tenant(tenant).schedule("orphan", task=ORPHAN, now=True)


async def test_a_tenants_incidents_also_go_to_its_own_webhooks(
    store_url: str, receiver: Receiver
) -> None:
    loopback = {**NO_WORKER_SOON, "http_allow_hosts": "127.0.0.1"}
    async with alerting(store_url, receiver, **loopback) as (app, evaluator):
        serve_orphan(app)
        acme, globex = app.for_tenant("acme"), app.for_tenant("globex")
        assert await acme.tenant_alert_webhooks() == []
        mine = [receiver.url("/acme")]
        assert await acme.tenant_alert_webhooks_set(mine + mine) == mine  # duplicates dropped
        await globex.tenant_alert_webhooks_set([receiver.url("/globex")])
        fence = await lead(app)
        await _orphaned(app, "acme")
        await app.materializer().run_once()
        fired = await until_message(evaluator, fence, receiver, "no_worker", "fired")
        assert fired["incident"]["tenant"] == "acme"

        async def delivered() -> list[Any] | None:
            await evaluator.run_once(fence)
            return receiver.hits_of("/acme") or None

        (hit,) = await eventually(delivered, what="acme's own webhook to get the alert")
        body = json.loads(hit.body)
        assert body == fired
        timestamp = int(hit.headers["Duetime-Timestamp"])
        secret = await acme.webhook_secret()
        assert hit.headers["Duetime-Signature"] == sign(secret, timestamp, hit.body)
        assert hit.headers["Idempotency-Key"] == f"{body['incident']['id']}:fired"
        await settle(evaluator, fence)
        assert len(receiver.hits_of("/acme")) == 1
        assert receiver.hits_of("/globex") == []  # another tenant's incident: not globex's
        (incident,) = await acme.incidents(firing=True)
        assert incident.fired_sent_at is not None


async def test_a_tenants_webhook_is_held_to_the_webhook_host_policy(
    store_url: str, receiver: Receiver
) -> None:
    # no http_allow_hosts: loopback is refused for the tenant's URL, not for the operator's
    async with alerting(store_url, receiver, **NO_WORKER_SOON) as (app, evaluator):
        serve_orphan(app)
        acme = app.for_tenant("acme")
        await acme.tenant_alert_webhooks_set([receiver.url("/acme")])
        fence = await lead(app)
        await _orphaned(app, "acme")
        await app.materializer().run_once()
        await until_message(evaluator, fence, receiver, "no_worker", "fired")
        (incident,) = await acme.incidents(firing=True)
        assert incident.fired_sent_at is None  # not every destination took it
        assert incident.last_delivery_error is not None
        assert receiver.url("/acme") in incident.last_delivery_error
        assert "127.0.0.1" in incident.last_delivery_error
        assert receiver.hits_of("/acme") == []  # refused before connecting


@pytest.mark.parametrize(
    ("webhooks", "field"),
    [
        (["https://ok.example.com/a", "ftp://example.com/x"], "webhooks[1]"),
        (["http://user:pw@example.com/"], "webhooks[0]"),
        (["http://169.254.169.254/latest"], "webhooks[0]"),
        ("https://one.example.com/", "webhooks"),
        ([f"https://h{i}.example.com/" for i in range(11)], "webhooks"),
    ],
)
async def test_bad_alert_webhooks_name_the_field(
    store_url: str, receiver: Receiver, webhooks: Any, field: str
) -> None:
    app = await alerting_app(store_url, receiver)
    try:
        with pytest.raises(ValidationError) as refused:
            await app.tenant_alert_webhooks_set(webhooks)
        assert refused.value.field == field
        assert await app.tenant_alert_webhooks() == []
    finally:
        await app.close()
