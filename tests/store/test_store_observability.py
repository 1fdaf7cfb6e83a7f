"""Observability reads and alert incidents: stats_snapshot, stats_timeline, alert_facts,
incidents_apply / incidents_list / incident_delivery (fenced by the leadership)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from storekit import (
    LEASE,
    TENANT,
    claim_one,
    complete,
    completion,
    job_params,
    running_run,
    s,
    scheduled_run,
    upsert,
)

from duetime._monitoring import AlertCondition, AlertKind, IncidentEvent
from duetime._types import AttemptOutcome, RunState, WorkerInfo
from duetime.store import Store
from duetime.store.base import (
    AlertFactsParams,
    IncidentDeliveryParams,
    IncidentListParams,
    IncidentsApplyParams,
    JobRef,
    LeaderElectParams,
    LeaderFence,
    LeasesReapParams,
    StatsParams,
    TimelineParams,
)


async def test_stats_snapshot_counts_due_running_dead_and_live_workers(
    store: Store, t0: datetime
) -> None:
    await scheduled_run(store, t0, "due-1")
    await scheduled_run(store, t0 + s(1), "due-2")
    await scheduled_run(store, t0 + s(3600), "later")
    await store.worker_register(WorkerInfo("w1", "h", 1, ("reports.build",), ("default",), t0, t0))
    now = t0 + s(5)
    stats = await store.stats_snapshot(StatsParams(live_after=t0 - s(60), now=now))
    counts = stats.tenant(TENANT)
    assert counts.due == 2
    assert counts.oldest_due_at == t0
    assert stats.oldest_due_age(TENANT) == 5.0
    assert [w.id for w in stats.workers] == ["w1"]
    assert {(t.task, t.due) for t in stats.tasks_due} == {("reports.build", 2)}

    claimed = await claim_one(store, now, limit=1)
    await complete(
        store,
        now,
        completion(
            claimed,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.DEAD,
            reason="permanent_error",
        ),
    )
    await claim_one(store, now)  # the other due run: running
    stats = await store.stats_snapshot(StatsParams(live_after=now + s(60), now=now))
    counts = stats.tenant(TENANT)
    assert (counts.due, counts.running, counts.dead) == (0, 1, 1)
    assert stats.workers == []  # none heartbeated after live_after
    assert stats.expired_leases == 0
    later = now + s(LEASE + 1)
    stats = await store.stats_snapshot(StatsParams(live_after=t0, now=later))
    assert stats.expired_leases == 1


async def test_timeline_buckets_successes_failures_and_fire_lag(store: Store, t0: datetime) -> None:
    ok = await running_run(store, t0, "ok")  # started at its instant: lag 0
    await complete(store, t0 + s(2), completion(ok))
    bad = await scheduled_run(store, t0 + s(61), "bad")
    claimed = await claim_one(store, bad.scheduled_for + s(0.2))
    await complete(
        store,
        t0 + s(62),
        completion(
            claimed,
            outcome=AttemptOutcome.FAILED,
            next_state=RunState.DEAD,
            reason="permanent_error",
            error_class="ValueError",
        ),
    )
    timeline = await store.stats_timeline(
        TimelineParams(tenant=TENANT, since=t0, step=60.0, buckets=3)
    )
    first, second, third = timeline.buckets
    assert (first.succeeded, first.dead, first.failed_attempts) == (1, 0, 0)
    assert (second.succeeded, second.dead, second.failed_attempts) == (0, 1, 1)
    assert third.succeeded == third.dead == 0
    assert sum(first.lag_histogram) == 1
    assert first.lag_histogram[0] == 1
    assert second.lag_quantile(0.5) is not None
    assert 0.1 <= second.lag_quantile(0.99) <= 0.25  # type: ignore[operator]


async def test_alert_facts_dead_sla_running_and_lost_leases(store: Store, t0: datetime) -> None:
    # a dead run
    dead = await running_run(store, t0, "dead")
    await complete(
        store,
        t0,
        completion(
            dead, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD, reason="permanent_error"
        ),
    )
    # a job with an SLA whose run never succeeds
    job, _ = await upsert(store, replace(job_params("sla", next_fire_at=None), sla=10.0))
    assert job.sla == 10.0
    # a long-running run
    long = await running_run(store, t0, "long")
    now = t0 + s(100)
    facts = await store.alert_facts(
        AlertFactsParams(dead_since=t0 - s(1), running_before=now - s(30), live_after=t0, now=now)
    )
    assert [d.run_id for d in facts.dead_runs] == [dead.run.id]
    assert [f.run_id for f in facts.running] == [long.run.id]
    assert facts.durations[long.run.job_id] == []
    sla = {f.job_id: f for f in facts.sla}
    assert sla[job.id].active
    assert sla[job.id].due is None

    # the lease of the long run expires twice: "its lease keeps being lost"
    await store.leases_reap(LeasesReapParams(now=t0 + s(LEASE + 1)))
    again = await claim_one(store, t0 + s(LEASE + 2))
    assert again.run.id == long.run.id
    await store.leases_reap(LeasesReapParams(now=t0 + s(2 * LEASE + 5)))
    facts = await store.alert_facts(
        AlertFactsParams(
            dead_since=t0 - s(1),
            running_before=now - s(30),
            live_after=t0,
            now=t0 + s(2 * LEASE + 6),
        )
    )
    lost = {f.run_id: f for f in facts.running}
    assert lost[long.run.id].lost_attempts == 2


async def test_sla_is_judged_on_the_latest_closed_window(store: Store, t0: datetime) -> None:
    run = await scheduled_run(store, t0, "sla-job")
    job_id = run.job_id
    current = await store.job_get(JobRef(TENANT, job_id))
    await upsert(
        store,
        replace(
            job_params("sla-job", next_fire_at=current.next_fire_at, schedule=current.schedule),
            sla=5.0,
        ),
    )
    facts = await store.alert_facts(
        AlertFactsParams(
            dead_since=t0, running_before=t0, live_after=t0, now=t0 + s(5.5), sla_ids=[job_id]
        )
    )
    fact = next(f for f in facts.sla if f.job_id == job_id)
    assert fact.due is not None
    assert not fact.met

    claimed = await claim_one(store, t0 + s(1))
    await complete(store, t0 + s(2), completion(claimed))
    facts = await store.alert_facts(
        AlertFactsParams(dead_since=t0, running_before=t0, live_after=t0, now=t0 + s(5.5))
    )
    fact = next(f for f in facts.sla if f.job_id == job_id)
    assert fact.met
    assert fact.due == t0
    # one second later the next occurrence (t0 + 1 s, never materialized) missed its window
    facts = await store.alert_facts(
        AlertFactsParams(dead_since=t0, running_before=t0, live_after=t0, now=t0 + s(6.5))
    )
    fact = next(f for f in facts.sla if f.job_id == job_id)
    assert fact.due == t0 + s(1)
    assert not fact.met


async def test_one_open_incident_per_kind_tenant_and_subject(store: Store, t0: datetime) -> None:
    lead = await store.leader_elect(LeaderElectParams("node-a", ttl=30, now=t0))
    assert lead is not None
    fence = LeaderFence("node-a", lead.term)
    acme = AlertCondition(AlertKind.NO_WORKER, "reports", "nobody serves it", tenant="acme")
    globex = replace(acme, tenant="globex")
    both = await store.incidents_apply(
        IncidentsApplyParams(open=[acme, globex], leader=fence, now=t0)
    )
    assert sorted(i.tenant or "" for i in both.opened) == ["acme", "globex"]
    again = await store.incidents_apply(
        IncidentsApplyParams(open=[acme, globex], leader=fence, now=t0)
    )
    assert again.opened == []
    listed = await store.incidents_list(IncidentListParams(tenants=("acme",)))
    assert [(i.tenant, i.subject) for i in listed] == [("acme", "reports")]


async def test_incidents_open_once_resolve_once_and_are_fenced(store: Store, t0: datetime) -> None:
    lead = await store.leader_elect(LeaderElectParams("node-a", ttl=30, now=t0))
    assert lead is not None
    fence = LeaderFence("node-a", lead.term)
    cond = AlertCondition(AlertKind.RUN_DEAD, "run-1", "run-1 is dead", tenant=TENANT)
    first = await store.incidents_apply(IncidentsApplyParams(open=[cond], leader=fence, now=t0))
    assert len(first.opened) == 1
    assert first.led
    again = await store.incidents_apply(IncidentsApplyParams(open=[cond], leader=fence, now=t0))
    assert again.opened == []  # one open incident per (kind, subject)
    incident = first.opened[0]
    assert incident.pending_event is IncidentEvent.FIRED

    stale = await store.incidents_apply(
        IncidentsApplyParams(open=[replace(cond, subject="run-2")], leader=LeaderFence("x", 99))
    )
    assert not stale.led
    assert stale.opened == []

    # delivery of "fired": partly, then done
    assert await store.incident_delivery(
        IncidentDeliveryParams(
            incident.id, IncidentEvent.FIRED, ["http://a"], done=False, error="boom", now=t0
        )
    )
    (listed,) = await store.incidents_list(IncidentListParams(firing=True))
    assert listed.delivered == ("http://a",)
    assert listed.delivery_attempts == 1
    assert await store.incident_delivery(
        IncidentDeliveryParams(incident.id, IncidentEvent.FIRED, [], done=True, now=t0)
    )
    assert not await store.incident_delivery(  # no longer pending: a second leader loses
        IncidentDeliveryParams(incident.id, IncidentEvent.FIRED, [], done=True, now=t0)
    )
    assert await store.incidents_list(IncidentListParams(unsent_before=t0 + s(1))) == []

    resolved = await store.incidents_apply(
        IncidentsApplyParams(resolve=[(incident.id, "replayed")], leader=fence, now=t0 + s(1))
    )
    assert [i.id for i in resolved.resolved] == [incident.id]
    assert resolved.resolved[0].pending_event is IncidentEvent.RESOLVED
    twice = await store.incidents_apply(
        IncidentsApplyParams(resolve=[(incident.id, "replayed")], leader=fence, now=t0 + s(1))
    )
    assert twice.resolved == []
    (unsent,) = await store.incidents_list(IncidentListParams(unsent_before=t0 + s(2)))
    assert unsent.id == incident.id
    assert await store.incident_delivery(
        IncidentDeliveryParams(incident.id, IncidentEvent.RESOLVED, [], done=True, now=t0)
    )
    assert await store.incidents_list(IncidentListParams(firing=True)) == []
    assert len(await store.incidents_list(IncidentListParams(tenants=(TENANT,)))) == 1
    assert await store.incidents_list(IncidentListParams(tenants=("other", None))) == []
    # a new incident on the same subject after the first resolved
    reopened = await store.incidents_apply(
        IncidentsApplyParams(open=[cond], leader=fence, now=t0 + s(3))
    )
    assert len(reopened.opened) == 1
    assert await store.incidents_prune(t0 + s(10)) == 1
