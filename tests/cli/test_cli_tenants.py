"""``duetime tenants set|show`` and ``duetime preview --job`` (docs/fairness.md)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from clikit import Invoke, assert_usage_error, ok

from duetime.app import AsyncApp
from duetime.schedules import CronExpression


def test_set_and_show_one_tenant(invoke: Invoke) -> None:
    set_out = json.loads(
        ok(
            invoke("tenants", "set", "acme", "--max-in-flight", "5", "--weight", "3", "--json")
        ).stdout
    )
    assert set_out == {
        "tenant": "acme",
        "max_in_flight": 5,
        "max_starts_per_second": None,
        "weight": 3,
        "max_jobs": None,
        "max_backfill_runs": None,
    }
    ok(invoke("tenants", "set", "acme", "--max-starts-per-second", "2.5"))
    shown = json.loads(ok(invoke("tenants", "show", "acme", "--json")).stdout)
    assert shown == {
        "tenant": "acme",
        "max_in_flight": 5,
        "max_starts_per_second": 2.5,
        "weight": 3,
        "max_jobs": None,
        "max_backfill_runs": None,
        "queues": [],
    }
    text = ok(invoke("tenants", "show", "acme")).stdout
    assert "max in flight" in text
    assert "2.5" in text
    ok(invoke("tenants", "set", "acme", "--max-in-flight", "0"))  # 0: no limit
    assert (
        json.loads(ok(invoke("tenants", "show", "acme", "--json")).stdout)["max_in_flight"] is None
    )


def test_show_every_tenant_with_its_queues(invoke: Invoke, db: str) -> None:
    async def make() -> None:
        async with AsyncApp(db, tenant="globex") as app:
            job = await app.schedule(
                "j", task="t", cron="0 0 1 1 *", queue="short", allow_unregistered=True
            )
            await app.trigger(job.id)

    asyncio.run(make())
    ok(invoke("tenants", "set", "acme", "--weight", "2"))
    listed = json.loads(ok(invoke("tenants", "show", "--json")).stdout)["items"]
    assert [t["tenant"] for t in listed] == ["acme", "globex"]
    [queue] = listed[1]["queues"]
    assert queue["queue"] == "short"
    assert queue["due"] == 1
    assert queue["in_flight"] == queue["throttled"] == 0
    text = ok(invoke("tenants", "show")).stdout
    assert "globex" in text
    assert "short" in text


def test_set_rejects_bad_input(invoke: Invoke) -> None:
    assert_usage_error(invoke("tenants", "set", "acme"), "--max-in-flight")
    result = invoke("tenants", "set", "acme", "--weight", "0")
    assert result.exit_code == 2
    assert "--weight" in result.output


def test_preview_of_a_job_uses_its_own_hash(invoke: Invoke, db: str) -> None:
    async def make() -> None:
        async with AsyncApp(db, tenant="acme") as app:
            await app.schedule(
                "nightly", task="t", cron="H H(0-5) * * *", tz="Europe/Paris",
                allow_unregistered=True,
            )  # fmt: skip

    asyncio.run(make())
    start = datetime(2030, 1, 1, tzinfo=UTC)
    args = ["--from", "2030-01-01T00:00:00Z", "--count", "3", "--json"]
    got = json.loads(ok(invoke("preview", "--job", "nightly", "--tenant", "acme", *args)).stdout)
    expected = CronExpression.parse("H H(0-5) * * *", "Europe/Paris", "acme\x1fnightly")
    first = expected.next_after(start)
    assert first is not None
    assert got[0]["utc"] == first.isoformat().replace("+00:00", "Z")
    assert [g["utc"] for g in got][1:] == [
        (first + timedelta(days=k)).isoformat().replace("+00:00", "Z") for k in (1, 2)
    ]
    # a bare expression hashes its own text
    bare = json.loads(ok(invoke("preview", "H H(0-5) * * *", *args, use_db=False)).stdout)
    own = CronExpression.parse("H H(0-5) * * *").next_after(start)
    assert own is not None
    assert bare[0]["utc"] == own.isoformat().replace("+00:00", "Z")


def test_preview_needs_an_expression_or_a_job(invoke: Invoke) -> None:
    assert_usage_error(invoke("preview", use_db=False), "--job")
    assert_usage_error(invoke("preview", "* * * * *", "--job", "x"), "--job")
    assert_usage_error(invoke("preview", "--job", "missing"), "not found")
    assert_usage_error(invoke("preview", "H H * H *", use_db=False), "month field", "'H'")


def test_alert_webhooks_set_show_and_clear(invoke: Invoke) -> None:
    url = "https://alerts.example.com/acme"
    shown = json.loads(ok(invoke("tenants", "alerts", "acme", "--json")).stdout)
    assert shown == {"tenant": "acme", "webhooks": []}
    set_out = ok(invoke("tenants", "alerts", "acme", "--webhook", url, "--json")).stdout
    assert json.loads(set_out) == {"tenant": "acme", "webhooks": [url]}
    assert url in ok(invoke("tenants", "alerts", "acme")).stdout
    refused = invoke("tenants", "alerts", "acme", "--webhook", "ftp://files.example.com/")
    assert refused.exit_code == 2
    assert "webhooks[0]" in refused.stderr
    assert_usage_error(invoke("tenants", "alerts", "acme", "--clear", "--webhook", url))
    ok(invoke("tenants", "alerts", "acme", "--clear"))
    assert json.loads(ok(invoke("tenants", "alerts", "acme", "--json")).stdout)["webhooks"] == []
