"""``no_worker`` alerts belong to one tenant: a task counts as served for a tenant by the
installation's workers or by that tenant's own remote workers, never by another tenant's, and
the incident names neither another tenant nor its tasks (issue 13, item 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime._config import Settings
from duetime._monitoring import AlertFacts, AlertKind, ClusterStats, TaskDue
from duetime._types import WorkerInfo
from duetime.maintenance.alerts import evaluate

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _worker(tenant: str | None, *tasks: str) -> WorkerInfo:
    return WorkerInfo(
        id=f"{tenant}/w" if tenant else "node-1",
        host="remote" if tenant else "box",
        pid=1,
        tasks=tasks,
        queues=("default",),
        started_at=NOW,
        heartbeat_at=NOW,
        tenant=tenant,
    )


def _facts(tasks_due: list[TaskDue], workers: list[WorkerInfo]) -> AlertFacts:
    stats = ClusterStats(
        now=NOW,
        tenants=[],
        tasks_due=tasks_due,
        expired_leases=0,
        overdue_jobs=0,
        oldest_overdue_at=None,
        workers=workers,
        nodes=[],
        leader=None,
    )
    return AlertFacts(now=NOW, dead_runs=[], sla=[], running=[], durations={}, stats=stats)


def _no_worker(facts: AlertFacts) -> list[tuple[str | None, str, str]]:
    conditions = evaluate(facts, Settings(alert_no_worker_after=30.0))
    return sorted(
        (c.tenant, c.subject, str(sorted(c.details)))
        for c in conditions
        if c.kind is AlertKind.NO_WORKER
    )


def test_another_tenants_remote_worker_does_not_serve_a_task() -> None:
    old = NOW - timedelta(minutes=5)
    facts = _facts(
        [TaskDue("acme", "reports.build", 3, old), TaskDue("globex", "reports.build", 2, old)],
        [_worker("acme", "reports.build")],
    )
    assert _no_worker(facts) == [("globex", "reports.build", "['due_runs', 'task']")]


def test_the_installations_workers_serve_every_tenant() -> None:
    old = NOW - timedelta(minutes=5)
    facts = _facts(
        [TaskDue("acme", "billing", 1, old), TaskDue("globex", "billing", 1, old)],
        [_worker(None, "billing")],
    )
    assert _no_worker(facts) == []


def test_one_incident_per_tenant_naming_only_that_tenant() -> None:
    old = NOW - timedelta(minutes=5)
    facts = _facts([TaskDue("acme", "t", 1, old), TaskDue("globex", "t", 4, old)], [])
    conditions = [
        c
        for c in evaluate(facts, Settings(alert_no_worker_after=30.0))
        if c.kind is AlertKind.NO_WORKER
    ]
    assert [(c.tenant, c.subject, c.details["due_runs"]) for c in conditions] == [
        ("acme", "t", 1),
        ("globex", "t", 4),
    ]
    for condition in conditions:
        other = "globex" if condition.tenant == "acme" else "acme"
        assert other not in condition.summary
        assert other not in str(condition.details)
