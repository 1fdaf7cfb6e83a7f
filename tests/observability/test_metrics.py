"""Prometheus metrics after a known sequence of runs: counters by tenant and task, histograms
observed, the cluster gauges, label bounding, and ``/metrics`` on its own port."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import aiohttp
from prometheus_client import CollectorRegistry

from duetime import Retry
from duetime._monitoring import ClusterStats, TenantCounts
from duetime._types import Leadership
from duetime.errors import Permanent
from duetime.metrics import OTHER, Metrics, MetricsServer, metrics
from duetime.store.base import ReapResult, RunsClaimParams
from tests.observability.obskit import open_app, worker
from tests.waiting import eventually

TENANT = "metrics-test"


def value(name: str, **labels: str) -> float:
    return metrics().registry.get_sample_value(name, labels) or 0.0


def snapshot() -> dict[str, float]:
    t = {"tenant": TENANT}
    return {
        "materialized": value("duetime_runs_materialized_total", **t, task="m.ok")
        + value("duetime_runs_materialized_total", **t, task="m.flaky")
        + value("duetime_runs_materialized_total", **t, task="m.doomed"),
        "started_ok": value("duetime_runs_started_total", **t, task="m.ok"),
        "started_flaky": value("duetime_runs_started_total", **t, task="m.flaky"),
        "started_doomed": value("duetime_runs_started_total", **t, task="m.doomed"),
        "succeeded_ok": value("duetime_runs_succeeded_total", **t, task="m.ok"),
        "succeeded_flaky": value("duetime_runs_succeeded_total", **t, task="m.flaky"),
        "dead_doomed": value(
            "duetime_runs_dead_total", **t, task="m.doomed", reason="permanent_error"
        ),
        "failed_flaky": value("duetime_attempts_total", **t, task="m.flaky", outcome="failed"),
        "failed_doomed": value("duetime_attempts_total", **t, task="m.doomed", outcome="failed"),
        "lost": value("duetime_attempts_total", **t, task="m.lost", outcome="lost"),
        "fire_lag": value("duetime_fire_lag_seconds_count", **t),
        "schedule_lag": value("duetime_schedule_lag_seconds_count", **t),
        "duration": value("duetime_run_duration_seconds_count", **t, task="m.ok"),
    }


async def test_counters_and_histograms_after_a_known_sequence_of_runs(store_url: str) -> None:
    app = await open_app(store_url, tenant=TENANT)
    flaky_calls = []

    @app.task("m.ok")
    async def ok(ctx, payload):  # type: ignore[no-untyped-def]
        return None

    @app.task("m.flaky")
    async def flaky(ctx, payload):  # type: ignore[no-untyped-def]
        flaky_calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first try fails")

    @app.task("m.doomed")
    async def doomed(ctx, payload):  # type: ignore[no-untyped-def]
        raise Permanent("never works")

    @app.task("m.lost")
    async def lost(ctx, payload):  # type: ignore[no-untyped-def]
        return None

    before = snapshot()
    retry = Retry(max_attempts=3, backoff_base=0.01, backoff_factor=1.0, backoff_cap=0.01)
    try:
        jobs = [
            await app.schedule("ok", task="m.ok", now=True),
            await app.schedule("flaky", task="m.flaky", now=True, retry=retry),
            await app.schedule("doomed", task="m.doomed", now=True, retry=retry),
        ]
        await app.materializer().run_once()
        async with worker(app, ["m.ok", "m.flaky", "m.doomed"]):
            for job in jobs:

                async def ended(job_id=job.id):  # type: ignore[no-untyped-def]
                    page = await app.runs(job_id)
                    return page.items and all(r.state.terminal for r in page.items)

                await eventually(ended, what="the runs to end")
            # the completer's listener runs after the write: let it catch up
            await eventually(
                lambda: _true(snapshot()["dead_doomed"] > before["dead_doomed"]),
                what="the dead run to be counted",
            )

        # a run whose lease expires is reaped: an attempt "lost"
        await app.schedule("lost", task="m.lost", now=True)
        await app.materializer().run_once()
        claimed = await app.store.runs_claim(
            RunsClaimParams(worker_id="gone", tasks=["m.lost"], limit=1, lease_ttl=0.1, lookahead=0)
        )
        assert len(claimed) == 1

        async def reaped_one() -> ReapResult | None:
            # the lease ends 0.1 s after the claim, on the store's clock (the database's on
            # PostgreSQL, which no test clock moves): reap until it has ended
            result = await app.reaper().run_once()
            return result if result.rescheduled or result.dead else None

        reaped = await eventually(reaped_one, what="the expired lease to be reaped")
        assert (reaped.rescheduled, reaped.dead) == (1, 0)

        after = snapshot()
        delta = {k: after[k] - before[k] for k in after}
        assert delta["materialized"] == 3
        assert (delta["started_ok"], delta["started_flaky"], delta["started_doomed"]) == (1, 2, 1)
        assert (delta["succeeded_ok"], delta["succeeded_flaky"]) == (1, 1)
        assert delta["dead_doomed"] == 1
        assert (delta["failed_flaky"], delta["failed_doomed"]) == (1, 1)
        assert delta["lost"] == 1
        assert delta["fire_lag"] == 4  # every start observed its fire lag
        assert delta["schedule_lag"] >= 3
        assert delta["duration"] == 1

        # the gauges, read from the store
        await metrics().refresh(app.cluster_stats, max_age=0)
        text = metrics().exposition().decode()
        assert f'duetime_dead_letters{{tenant="{TENANT}"}} 1.0' in text
        assert "duetime_leases_expired 0.0" in text
        assert f'duetime_runs_due{{tenant="{TENANT}"}} 1.0' in text  # the reaped run
    finally:
        await app.close()


async def _true(flag: bool) -> bool:
    return flag


def test_labels_are_bounded_and_gauges_come_from_the_stats() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry, max_tenants=2, max_tasks=1)
    for tenant in ("a", "b", "c"):
        m.run_ended(tenant, "t1", "succeeded")
    m.run_ended("a", "t2", "succeeded")
    assert registry.get_sample_value("duetime_runs_succeeded_total", {"tenant": "a", "task": "t1"})
    assert registry.get_sample_value(
        "duetime_runs_succeeded_total", {"tenant": OTHER, "task": "t1"}
    )
    assert registry.get_sample_value("duetime_runs_succeeded_total", {"tenant": "a", "task": OTHER})

    now = datetime(2026, 1, 1, tzinfo=UTC)
    m.cluster.stats = ClusterStats(
        now=now,
        tenants=[TenantCounts("a", due=4, oldest_due_at=now - timedelta(seconds=30), dead=2)],
        tasks_due=[],
        expired_leases=1,
        overdue_jobs=0,
        oldest_overdue_at=None,
        workers=[],
        nodes=[],
        leader=Leadership("n1", 7, now, now + timedelta(seconds=15)),
    )
    assert registry.get_sample_value("duetime_runs_due", {"tenant": "a"}) == 4
    assert registry.get_sample_value("duetime_runs_due_oldest_age_seconds", {"tenant": "a"}) == 30
    assert registry.get_sample_value("duetime_dead_letters", {"tenant": "a"}) == 2
    assert registry.get_sample_value("duetime_leader_term") == 7
    assert registry.get_sample_value("duetime_leases_expired") == 1


async def test_metrics_port_serves_the_exposition(store_url: str) -> None:
    app = await open_app(store_url)
    try:
        ready = asyncio.Event()
        server = MetricsServer(app.cluster_stats, port=0, on_ready=lambda _: ready.set())
        stop = asyncio.Event()
        task = asyncio.create_task(server.run(stop))
        await asyncio.wait_for(ready.wait(), 10)
        async with aiohttp.ClientSession() as session, session.get(server.url) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            text = await response.text()
        assert "duetime_runs_started_total" in text or "# HELP duetime_runs_started" in text
        assert "duetime_workers_live" in text
        assert "duetime_leader_present" in text
        stop.set()
        await asyncio.wait_for(task, 10)
    finally:
        await app.close()


async def test_queue_gauges_per_tenant_and_queue(store_url: str) -> None:
    """Due depth, oldest due age, in flight and throttled per (tenant, queue), read from a real
    store: the tenant's in-flight quota holds its remaining due runs back."""
    tenant = "metrics-queues"
    app = await open_app(store_url, tenant=tenant)
    try:
        for i in range(3):
            await app.schedule(
                f"short-{i}", task="q.t", now=True, queue="short", allow_unregistered=True
            )
        await app.schedule("long", task="q.t", now=True, queue="long", allow_unregistered=True)
        await app.materializer().run_once()
        await app.tenant_limits_set(max_in_flight=1)
        claimed = await app.store.runs_claim(
            RunsClaimParams(
                worker_id="w", tasks=["q.t"], limit=10, lease_ttl=60, lookahead=0, queues=["long"]
            )
        )
        assert len(claimed) == 1

        registry = Metrics(CollectorRegistry())
        await registry.refresh(app.cluster_stats, max_age=0)

        def gauge(name: str, queue: str) -> float | None:
            return registry.registry.get_sample_value(name, {"tenant": tenant, "queue": queue})

        assert gauge("duetime_queue_due", "short") == 3
        assert gauge("duetime_queue_throttled", "short") == 3  # the one in flight is the limit
        assert gauge("duetime_queue_in_flight", "short") == 0
        assert gauge("duetime_queue_in_flight", "long") == 1
        assert gauge("duetime_queue_due", "long") == 0
        assert (gauge("duetime_queue_due_oldest_age_seconds", "short") or 0) >= 0
        assert gauge("duetime_queue_due_oldest_age_seconds", "long") == 0
    finally:
        await app.close()
