"""A job's broker target, checked at registration (``registration.task_and_target``)::

    {"type": "redis", "connection": "events", "stream": "orders"}
    {"type": "rabbitmq", "connection": "orders", "exchange": "billing", "routing_key": "due"}
    {"type": "nats", "connection": "audit", "subject": "billing.due"}

The connection must be one some worker serves: the job runs under the task
``duetime.broker:<connection>``, which such workers register (an unknown one is refused like
an unknown task, unless ``allow_unregistered``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from duetime._outbox import BROKER_TYPES, broker_task
from duetime.errors import ValidationError
from duetime.targets.brokers.config import CONNECTION_NAME

_FIELDS: dict[str, tuple[tuple[str, bool], ...]] = {
    # (field, required)
    "redis": (("stream", True),),
    "rabbitmq": (("exchange", True), ("routing_key", False)),
    "nats": (("subject", True),),
}
MAX_NAME = 255


def is_broker_target(target: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(target, Mapping) and target.get("type") in BROKER_TYPES


def validate_broker_target(target: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The task the target runs under and the target normalized. Raises ValidationError
    naming the field (``target.stream`` …)."""
    kind = str(target.get("type"))
    fields = _FIELDS[kind]
    allowed = {"type", "connection", *(name for name, _ in fields)}
    unknown = sorted(str(k) for k in target if k not in allowed)
    if unknown:
        raise ValidationError(
            f"target.{unknown[0]}",
            f"unknown field (a {kind} target takes {', '.join(sorted(allowed))})",
        )
    connection = target.get("connection")
    if not isinstance(connection, str) or not CONNECTION_NAME.fullmatch(connection):
        raise ValidationError(
            "target.connection",
            "must name a broker connection of the workers' configuration (DUETIME_BROKERS)",
        )
    out: dict[str, Any] = {"type": kind, "connection": connection}
    for name, required in fields:
        value = target.get(name) if required else target.get(name, "")
        if not isinstance(value, str) or len(value) > MAX_NAME:
            raise ValidationError(f"target.{name}", f"must be a string of at most {MAX_NAME}")
        out[name] = value
    if kind == "redis" and not out["stream"]:
        raise ValidationError("target.stream", "must name a stream")
    if kind == "nats" and (not out["subject"] or any(c in out["subject"] for c in " \t\r\n*>")):
        raise ValidationError(
            "target.subject", "must be a NATS subject without spaces or wildcards"
        )
    return broker_task(connection), out
