"""The workflow alerts: ``workflow_failed`` (one incident per failed instance, open while it
stays failed — resolved once it is retried or deleted — opened for instances that failed
within ``alert_dead_lookback``) and ``workflow_sla_missed`` (one per running instance older
than its workflow job's ``sla``, resolved when the instance ends). Facts come from the store's
``workflow_alert_instances``; :func:`workflow_conditions` is pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from duetime._monitoring import AlertCondition, AlertKind
from duetime.workflows.engine import InstanceState
from duetime.workflows.watch import InstanceAlertFact

__all__ = ["RESOLUTIONS", "workflow_conditions"]

RESOLUTIONS = {
    AlertKind.WORKFLOW_FAILED: "the instance is no longer failed (retried or deleted)",
    AlertKind.WORKFLOW_SLA_MISSED: "the instance ended",
}


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


def workflow_conditions(facts: Sequence[InstanceAlertFact], now: datetime) -> list[AlertCondition]:
    out: list[AlertCondition] = []
    for fact in facts:
        details = {
            "workflow": fact.workflow,
            "version": fact.version,
            "job": fact.job_name,
            "instance_id": str(fact.instance_id),
            "created_at": _iso(fact.created_at),
        }
        name = f"{fact.workflow!r} v{fact.version}"
        if fact.state is InstanceState.FAILED:
            out.append(
                AlertCondition(
                    AlertKind.WORKFLOW_FAILED,
                    str(fact.instance_id),
                    f"workflow {name} instance {fact.instance_id} (job {fact.job_name!r}, "
                    f"tenant {fact.tenant}) failed: {fact.reason or 'unknown'}",
                    tenant=fact.tenant,
                    job_id=fact.job_id,
                    details={
                        **details,
                        "reason": fact.reason,
                        "finished_at": _iso(fact.finished_at),
                    },
                )
            )
        elif fact.state is InstanceState.RUNNING and fact.sla is not None:
            running_for = max(0.0, (now - fact.created_at).total_seconds())
            if running_for <= fact.sla:
                continue
            out.append(
                AlertCondition(
                    AlertKind.WORKFLOW_SLA_MISSED,
                    str(fact.instance_id),
                    f"workflow {name} instance {fact.instance_id} (job {fact.job_name!r}, "
                    f"tenant {fact.tenant}) missed its SLA: running for {running_for:.0f}s, "
                    f"over {fact.sla:g}s",
                    tenant=fact.tenant,
                    job_id=fact.job_id,
                    details={**details, "sla": fact.sla, "running_for": round(running_for, 3)},
                )
            )
    return out
