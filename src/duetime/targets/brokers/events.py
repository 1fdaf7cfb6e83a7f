"""The operator's run events (docs/brokers.md, "Run events"; decision 0031):
``DUETIME_RUN_EVENTS`` (``Settings.run_events``), a JSON object or the path of a file holding
one::

    {"target": {"type": "nats", "connection": "audit", "subject": "duetime.events"},
     "events": ["started", "succeeded", "retrying", "dead", "cancelled", "skipped"],
     "tenants": ["acme"]}

``target`` is a broker target as a job's (``validate.py``): it names a connection of the
workers' ``DUETIME_BROKERS``, whose relays publish the events from the outbox. ``events``
defaults to all of :data:`duetime._outbox.RUN_EVENT_KINDS`; ``tenants`` (absent: every
tenant) limits the events to those tenants' runs. It is the configuration of the processes,
never of a request: an API caller can neither turn events on nor point them anywhere."""

from __future__ import annotations

from collections.abc import Mapping

from duetime._outbox import RUN_EVENT_KINDS, RunEvents
from duetime.errors import ValidationError
from duetime.targets.brokers.config import BrokerConnection, json_object_setting
from duetime.targets.brokers.validate import is_broker_target, validate_broker_target

SETTING = "DUETIME_RUN_EVENTS"
_FIELDS = ("target", "events", "tenants")


def parse_run_events(
    raw: str, brokers: Mapping[str, BrokerConnection] | None = None
) -> RunEvents | None:
    """The run events ``raw`` (JSON text, or a file path; empty: none) asks for. When
    ``brokers`` (this process's connections) names the target's connection, its type must
    match the target's. Raises :class:`ValidationError` naming the setting and the field."""
    doc = json_object_setting(raw, SETTING, ' such as {"target": {…}}')
    if doc is None:
        return None
    unknown = sorted(str(k) for k in doc if k not in _FIELDS)
    if unknown:
        raise ValidationError(
            f"{SETTING}.{unknown[0]}", f"unknown field (it takes {', '.join(_FIELDS)})"
        )
    target = doc.get("target")
    if not is_broker_target(target):
        raise ValidationError(
            f"{SETTING}.target",
            'must be a broker target such as {"type": "nats", "connection": "audit", '
            '"subject": "duetime.events"}',
        )
    try:
        _, normalized = validate_broker_target(target)
    except ValidationError as exc:
        raise ValidationError(f"{SETTING}.{exc.field}", exc.reason) from None
    connection = str(normalized["connection"])
    known = (brokers or {}).get(connection)
    if known is not None and known.type != normalized["type"]:
        raise ValidationError(
            f"{SETTING}.target.type",
            f"connection {connection!r} is a {known.type} connection in DUETIME_BROKERS",
        )
    return RunEvents(
        connection=connection,
        target=normalized,
        kinds=_kinds(doc.get("events", list(RUN_EVENT_KINDS))),
        tenants=_tenants(doc.get("tenants")),
    )


def _kinds(value: object) -> frozenset[str]:
    where = f"{SETTING}.events"
    if not isinstance(value, list) or not value:
        raise ValidationError(where, f"must be a non-empty list of {', '.join(RUN_EVENT_KINDS)}")
    for i, kind in enumerate(value):
        if kind not in RUN_EVENT_KINDS:
            raise ValidationError(f"{where}[{i}]", f"must be one of {', '.join(RUN_EVENT_KINDS)}")
    return frozenset(value)


def _tenants(value: object) -> frozenset[str] | None:
    where = f"{SETTING}.tenants"
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValidationError(where, "must be a non-empty list of tenant names (absent: all)")
    for i, tenant in enumerate(value):
        if not isinstance(tenant, str) or not tenant:
            raise ValidationError(f"{where}[{i}]", "must be a tenant name")
    return frozenset(value)
