"""A succeeded broker run's message, built by the worker from the run (no I/O): the payload
as JSON, and the run's identity as headers (Redis: fields) — ``duetime-run-id``,
``duetime-job``, ``duetime-tenant``, ``duetime-scheduled-for`` (ISO 8601, UTC),
``duetime-attempt``, ``duetime-token``, ``duetime-message-id`` (``<run id>:<attempt>``), and
``traceparent`` (W3C) when tracing is on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from duetime import _json, _tracing
from duetime._outbox import OutboxMessage, message_id
from duetime.targets.context import RunContext


def build_message(ctx: RunContext, target: Mapping[str, Any]) -> OutboxMessage:
    """The message of the run ``ctx`` describes, for its job's broker ``target``."""
    headers = {
        "duetime-run-id": str(ctx.run_id),
        "duetime-job": ctx.job_name,
        "duetime-tenant": ctx.tenant,
        "duetime-scheduled-for": ctx.scheduled_for.isoformat(),
        "duetime-attempt": str(ctx.attempt),
        "duetime-token": str(ctx.token),
        "duetime-message-id": message_id(ctx.run_id, ctx.attempt),
    }
    parent = _tracing.traceparent()
    if parent is not None:
        headers["traceparent"] = parent
    return OutboxMessage(
        tenant=ctx.tenant,
        run_id=ctx.run_id,
        attempt=ctx.attempt,
        connection=str(target["connection"]),
        target=dict(target),
        body=_json.dumps(ctx.payload),
        headers=headers,
    )
