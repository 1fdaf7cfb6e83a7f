"""Alerts, evaluated by the leader: a run went dead, a job missed its SLA, a run is stuck, the
scheduler is falling behind, no worker serves a task that has due runs.

Each pass (``run_once``, every ``alert_interval``) reads the facts from the store, turns them
into conditions (:func:`evaluate`, pure), and reconciles them with the incidents kept in the
store — one open incident per (kind, tenant, subject): a condition with no open incident opens
one, an open incident whose condition is gone is resolved. Those writes are fenced by the
leader's term, and an incident is opened (or resolved) once whoever leads, so a failover
neither repeats nor loses one. Each opening and resolution is logged once (by the leader that
wrote it), and its message is delivered to every webhook in ``alert_webhooks`` and, for a
tenant's incident, to that tenant's own alert webhooks (``app.tenants.alert_webhooks_set``) —
JSON, signed like webhook targets (``Duetime-Signature``: the installation's ``alert_secret``
for its webhooks, the tenant's webhook secret for the tenant's), with ``Idempotency-Key:
<incident id>:<event>`` — "fired" before "resolved", retried with backoff until every webhook
took it. A tenant's URLs are the tenant's input: they go through the webhook targets' host
policy (``http_allow_hosts``) at connect time, as webhook targets do. A leader that dies
between sending and recording a delivery makes the next leader send it again: receivers dedupe
on the idempotency key.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime import _json
from duetime._config import Settings
from duetime._monitoring import (
    AlertCondition,
    AlertFacts,
    AlertKind,
    Incident,
    IncidentEvent,
    percentile,
)
from duetime.maintenance.breaker_alerts import RESOLUTION as BREAKER_RESOLUTION
from duetime.maintenance.breaker_alerts import breaker_conditions
from duetime.maintenance.lifecycle_alerts import RESOLUTION as PAUSED_RESOLUTION
from duetime.maintenance.lifecycle_alerts import paused_conditions
from duetime.maintenance.outbox_alerts import RESOLUTIONS as OUTBOX_RESOLUTIONS
from duetime.maintenance.outbox_alerts import outbox_conditions
from duetime.maintenance.workflow_alerts import RESOLUTIONS as WORKFLOW_RESOLUTIONS
from duetime.maintenance.workflow_alerts import workflow_conditions
from duetime.store.base import (
    AlertFactsParams,
    IncidentDeliveryParams,
    IncidentListParams,
    IncidentsApplyParams,
    LeaderFence,
    Store,
)
from duetime.targets.http import HostPolicy, HostRefused, _refusal_in, sign

log = logging.getLogger("duetime.alerts")

FACTS_LIMIT = 1000
DELIVERIES_PER_PASS = 100
DELIVERY_TIMEOUT = 5.0
MIN_HISTORY = 3
"""Successful runs a job needs before its p95 serves as its expected duration."""
ALERTS_DEFAULT_TENANT = "default"


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


def _age(now: datetime, at: datetime) -> float:
    return max(0.0, (now - at).total_seconds())


def evaluate(facts: AlertFacts, settings: Settings) -> list[AlertCondition]:
    """What is wrong now, as conditions (pure: the same facts give the same conditions)."""
    now = facts.now
    out: list[AlertCondition] = []
    for dead in facts.dead_runs:
        error = ": ".join(p for p in (dead.error_class, dead.error_message) if p)
        out.append(
            AlertCondition(
                AlertKind.RUN_DEAD,
                str(dead.run_id),
                f"run {dead.run_id} of job {dead.job_name!r} (tenant {dead.tenant}) is dead "
                f"after {dead.attempt} attempt(s): {dead.reason or 'unknown'}"
                + (f" — {error}" if error else ""),
                tenant=dead.tenant,
                job_id=dead.job_id,
                run_id=dead.run_id,
                details={
                    "job": dead.job_name,
                    "task": dead.task,
                    "reason": dead.reason,
                    "error_class": dead.error_class,
                    "error_message": dead.error_message,
                    "attempt": dead.attempt,
                    "finished_at": _iso(dead.finished_at),
                },
            )
        )
    for sla in facts.sla:
        if not sla.active or sla.due is None or sla.met:
            continue
        out.append(
            AlertCondition(
                AlertKind.SLA_MISSED,
                str(sla.job_id),
                f"job {sla.job_name!r} (tenant {sla.tenant}) missed its SLA: no successful run "
                f"within {sla.sla:g}s of its occurrence at {_iso(sla.due)}",
                tenant=sla.tenant,
                job_id=sla.job_id,
                details={"job": sla.job_name, "sla": sla.sla, "occurrence": _iso(sla.due)},
            )
        )
    for run in facts.running:
        running_for = _age(now, run.started_at)
        history = facts.durations.get(run.job_id, [])
        expected = run.expected_duration
        if expected is None and len(history) >= MIN_HISTORY:
            expected = percentile(history, 0.95)
        threshold = (
            None
            if expected is None
            else max(settings.alert_stuck_min, settings.alert_stuck_factor * expected)
        )
        details: dict[str, Any] = {
            "job": run.job_name,
            "task": run.task,
            "attempt": run.attempt,
            "started_at": _iso(run.started_at),
            "running_for": round(running_for, 3),
            "expected_duration": expected,
            "threshold": threshold,
            "lost_leases": run.lost_attempts,
        }
        if run.lost_attempts >= settings.alert_lost_leases:
            why = f"its lease was lost {run.lost_attempts} times"
        elif threshold is not None and running_for > threshold:
            why = (
                f"running for {running_for:.0f}s, over {settings.alert_stuck_factor:g}× its "
                f"expected {expected:.3g}s"
            )
        else:
            continue
        out.append(
            AlertCondition(
                AlertKind.RUN_STUCK,
                str(run.run_id),
                f"run {run.run_id} of job {run.job_name!r} (tenant {run.tenant}) is stuck: {why}",
                tenant=run.tenant,
                job_id=run.job_id,
                run_id=run.run_id,
                details=details,
            )
        )
    stats = facts.stats
    served = stats.served_tasks()
    due_ages = [_age(now, t.oldest_due_at) for t in stats.tasks_due if t.task in served]
    oldest_due = max(due_ages, default=0.0)
    overdue = 0.0 if stats.oldest_overdue_at is None else _age(now, stats.oldest_overdue_at)
    behind = max(oldest_due, overdue)
    if behind > settings.alert_behind_after:
        out.append(
            AlertCondition(
                AlertKind.SCHEDULER_BEHIND,
                "cluster",
                f"the scheduler is falling behind: due work has waited {behind:.0f}s "
                f"(threshold {settings.alert_behind_after:g}s)",
                details={
                    "oldest_due_age": round(oldest_due, 3),
                    "due_runs": sum(t.due for t in stats.tasks_due if t.task in served),
                    "overdue_jobs": stats.overdue_jobs,
                    "oldest_overdue_age": round(overdue, 3),
                },
            )
        )
    # One incident per (tenant, task): a tenant's alert names only its own task, and a task
    # counts as served for a tenant by the installation's workers or that tenant's own.
    unserved: dict[tuple[str, str], list[Any]] = {}
    for task_due in stats.tasks_due:
        if task_due.task in stats.served_tasks(task_due.tenant):
            continue
        key = (task_due.tenant, task_due.task)
        entry = unserved.setdefault(key, [0, task_due.oldest_due_at])
        entry[0] += task_due.due
        entry[1] = min(entry[1], task_due.oldest_due_at)
    for (tenant, task), (count, oldest) in sorted(unserved.items()):
        age = _age(now, oldest)
        if age <= settings.alert_no_worker_after:
            continue
        out.append(
            AlertCondition(
                AlertKind.NO_WORKER,
                task,
                f"no live worker serves task {task!r} of tenant {tenant}: {count} run(s) due, "
                f"the oldest for {age:.0f}s",
                tenant=tenant,
                details={"task": task, "due_runs": count},
            )
        )
    return out


_RESOLUTIONS = {
    AlertKind.RUN_DEAD: "the run is no longer dead (replayed or deleted)",
    AlertKind.SLA_MISSED: "a later occurrence met the SLA (or the job's SLA no longer applies)",
    AlertKind.RUN_STUCK: "the run finished or is no longer over its threshold",
    AlertKind.SCHEDULER_BEHIND: "due work is being picked up in time again",
    AlertKind.NO_WORKER: "a worker serves the task again, or its runs are no longer due",
    AlertKind.JOB_PAUSED_ON_FAILURE: PAUSED_RESOLUTION,
    AlertKind.BREAKER_OPEN: BREAKER_RESOLUTION,
    **OUTBOX_RESOLUTIONS,
    **WORKFLOW_RESOLUTIONS,
}


@dataclass(frozen=True, slots=True)
class AlertPass:
    opened: list[Incident]
    resolved: list[Incident]
    delivered: int
    led: bool = True


class AlertEvaluator:
    """The alerting duty (leader only; see ``manager.py``)."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.webhooks = [u.strip() for u in settings.alert_webhooks.split(",") if u.strip()]
        self._session: Any = None
        self._guarded: Any = None
        self._secret: str | None = settings.alert_secret or None
        self._pruned_at = 0.0

    async def close(self) -> None:
        for session in (self._session, self._guarded):
            if session is not None and not session.closed:
                await session.close()
        self._session = self._guarded = None

    async def run_once(self, fence: LeaderFence | None = None) -> AlertPass:
        now = await self.store.db_now()
        s = self.settings
        firing = await self.store.incidents_list(IncidentListParams(firing=True, limit=100_000))
        subjects: dict[AlertKind, list[str]] = {}
        for incident in firing:
            subjects.setdefault(incident.kind, []).append(incident.subject)
        facts = await self.store.alert_facts(
            AlertFactsParams(
                dead_since=now - timedelta(seconds=s.alert_dead_lookback),
                running_before=now - timedelta(seconds=s.alert_stuck_min),
                live_after=now - timedelta(seconds=s.worker_stale_after),
                lost_leases=s.alert_lost_leases,
                dead_ids=_uuids(subjects.get(AlertKind.RUN_DEAD, [])),
                sla_ids=_uuids(subjects.get(AlertKind.SLA_MISSED, [])),
                running_ids=_uuids(subjects.get(AlertKind.RUN_STUCK, [])),
                limit=FACTS_LIMIT,
                now=now,
            )
        )
        paused = await self.store.jobs_paused_on_failure(FACTS_LIMIT)
        instances = await self.store.workflow_alert_instances(
            failed_since=now - timedelta(seconds=s.alert_dead_lookback),
            failed_ids=_uuids(subjects.get(AlertKind.WORKFLOW_FAILED, [])),
            now=now,
            limit=FACTS_LIMIT,
        )
        breakers = await self.store.breakers_list()
        conditions = (
            evaluate(facts, s)
            + paused_conditions(paused)
            + workflow_conditions(instances, now)
            + breaker_conditions(breakers, now, s.alert_breaker_open_after)
            + outbox_conditions(await self.store.outbox_depth(), now, s.alert_outbox_after)
        )
        truncated = {
            kind
            for kind, rows in (
                (AlertKind.RUN_DEAD, facts.dead_runs),
                (AlertKind.SLA_MISSED, facts.sla),
                (AlertKind.RUN_STUCK, facts.running),
                (AlertKind.JOB_PAUSED_ON_FAILURE, paused),
                (AlertKind.WORKFLOW_FAILED, instances),
                (AlertKind.WORKFLOW_SLA_MISSED, instances),
            )
            if len(rows) >= FACTS_LIMIT
        }
        active = {(c.kind, c.tenant, c.subject) for c in conditions}
        open_keys = {(i.kind, i.tenant, i.subject) for i in firing}
        to_open = [c for c in conditions if (c.kind, c.tenant, c.subject) not in open_keys]
        to_resolve = [
            (i.id, _RESOLUTIONS[i.kind])
            for i in firing
            if (i.kind, i.tenant, i.subject) not in active and i.kind not in truncated
        ]
        opened: list[Incident] = []
        resolved: list[Incident] = []
        led = True
        if to_open or to_resolve:
            applied = await self.store.incidents_apply(
                IncidentsApplyParams(open=to_open, resolve=to_resolve, leader=fence, now=now)
            )
            opened, resolved, led = applied.opened, applied.resolved, applied.led
        for incident in opened:
            log.warning(
                "ALERT %s fired: %s", incident.kind, incident.summary, extra=_log_fields(incident)
            )
        for incident in resolved:
            log.warning(
                "ALERT %s resolved: %s (%s)",
                incident.kind,
                incident.summary,
                incident.resolution,
                extra=_log_fields(incident),
            )
        delivered = await self.deliver(now) if led else 0
        if time.monotonic() - self._pruned_at > 3600:
            self._pruned_at = time.monotonic()
            await self.store.incidents_prune(now - timedelta(days=s.retention_days))
        return AlertPass(opened, resolved, delivered, led)

    # --- delivery ---------------------------------------------------------------------------

    async def deliver(self, now: datetime) -> int:
        """Send the pending messages due for a try; returns how many were fully delivered."""
        pending = await self.store.incidents_list(
            IncidentListParams(unsent_before=now, limit=DELIVERIES_PER_PASS)
        )
        if not pending:
            return 0
        tenants = sorted({i.tenant for i in pending if i.tenant is not None})
        own = await self.store.tenant_alert_webhooks(tenants)
        done = await asyncio.gather(
            *(self._deliver_one(i, now, own.get(i.tenant or "", [])) for i in pending)
        )
        return sum(done)

    async def _deliver_one(
        self, incident: Incident, now: datetime, tenant_webhooks: Sequence[str] = ()
    ) -> bool:
        """Send the incident's pending event to every destination not yet done: the
        installation's webhooks, then the tenant's own (a URL in both is sent once, as the
        installation's)."""
        event = incident.pending_event
        if event is None:
            return False
        delivered = list(incident.delivered)
        errors: list[str] = []
        destinations = [(u, False) for u in self.webhooks] + [
            (u, True) for u in tenant_webhooks if u not in self.webhooks
        ]
        if destinations:
            body = _json.dumps(message(incident, event, now)).encode()
            remaining = [(u, tenants) for u, tenants in destinations if u not in delivered]
            results = await asyncio.gather(
                *(self._post(url, body, incident, event, tenants) for url, tenants in remaining)
            )
            remaining_urls = [u for u, _ in remaining]
            for url, error in zip(remaining_urls, results, strict=True):
                if error is None:
                    delivered.append(url)
                else:
                    errors.append(f"{url}: {error}")
        complete = not errors
        backoff = min(300.0, 5.0 * 2 ** min(incident.delivery_attempts, 6))
        await self.store.incident_delivery(
            IncidentDeliveryParams(
                incident_id=incident.id,
                event=event,
                delivered=delivered,
                done=complete,
                error="; ".join(errors)[:2000] or None,
                next_try_at=None if complete else now + timedelta(seconds=backoff),
                now=now,
            )
        )
        if errors:
            log.warning(
                "alert %s %s: delivery failed (%s); retrying in %.0fs",
                incident.id,
                event,
                "; ".join(errors),
                backoff,
            )
        return complete

    async def _signing_secret(self) -> str:
        if self._secret is None:
            self._secret = await self.store.tenant_secret(ALERTS_DEFAULT_TENANT)
        return self._secret

    def _session_for(self, tenants: bool) -> Any:
        """The installation's webhooks are the operator's (any address); a tenant's go through
        the webhook targets' host policy, checked on the address connected to."""
        import aiohttp

        if not tenants:
            if self._session is None or self._session.closed:
                self._session = aiohttp.ClientSession(trust_env=False)
            return self._session
        if self._guarded is None or self._guarded.closed:
            from duetime.targets._netguard import GuardedConnector

            connector = GuardedConnector(HostPolicy.parse(self.settings.http_allow_hosts))
            self._guarded = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._guarded

    async def _post(
        self, url: str, body: bytes, incident: Incident, event: IncidentEvent, tenants: bool
    ) -> str | None:
        """POST one message; None on a 2xx, else what went wrong. ``tenants``: one of the
        incident's tenant's own webhooks (signed with its secret, its host checked)."""
        # like targets/http.py's signed POST on purpose: own headers, session and error text
        import aiohttp

        session = self._session_for(tenants)
        secret = (
            await self.store.tenant_secret(incident.tenant)
            if tenants and incident.tenant is not None
            else await self._signing_secret()
        )
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": f"{incident.id}:{event}",
            "Duetime-Event": f"alert.{event}",
            "Duetime-Timestamp": str(timestamp),
            "Duetime-Signature": sign(secret, timestamp, body),
        }
        try:
            async with session.post(
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=DELIVERY_TIMEOUT),
            ) as response:
                await response.read()
                if 200 <= response.status < 300:
                    return None
                return f"HTTP {response.status}"
        except TimeoutError:
            return f"timed out after {DELIVERY_TIMEOUT:g}s"
        except HostRefused as exc:
            return str(exc)
        except aiohttp.ClientError as exc:
            refused = _refusal_in(exc)
            return str(refused) if refused is not None else f"{type(exc).__name__}: {exc}"


def message(incident: Incident, event: IncidentEvent, now: datetime) -> dict[str, Any]:
    """The JSON body of an alert webhook."""
    return {
        "type": "duetime.alert",
        "event": str(event),
        "sent_at": _iso(now),
        "incident": incident_json(incident),
    }


def incident_json(incident: Incident) -> dict[str, Any]:
    return {
        "id": str(incident.id),
        "kind": str(incident.kind),
        "subject": incident.subject,
        "state": "firing" if incident.firing else "resolved",
        "summary": incident.summary,
        "tenant": incident.tenant,
        "job_id": None if incident.job_id is None else str(incident.job_id),
        "run_id": None if incident.run_id is None else str(incident.run_id),
        "details": incident.details,
        "opened_at": _iso(incident.opened_at),
        "resolved_at": _iso(incident.resolved_at),
        "resolution": incident.resolution,
    }


def _log_fields(incident: Incident) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "alert_kind": str(incident.kind),
        "alert_subject": incident.subject,
        "incident_id": str(incident.id),
    }
    if incident.tenant is not None:
        fields["tenant"] = incident.tenant
    if incident.run_id is not None:
        fields["run_id"] = str(incident.run_id)
    if "job" in incident.details:
        fields["job"] = incident.details["job"]
    return fields


def _uuids(values: Sequence[str]) -> list[Any]:
    import uuid

    out = []
    for value in values:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue
    return out
