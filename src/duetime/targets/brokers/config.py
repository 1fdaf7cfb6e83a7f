"""The broker connections a worker serves: ``DUETIME_BROKERS`` (``Settings.brokers``), a JSON
object or the path of a file holding one, naming each connection::

    {"events": {"type": "redis", "url": "redis://127.0.0.1:6379/0"},
     "orders": {"type": "rabbitmq", "url": {"secret": "ORDERS_AMQP_URL"}},
     "audit":  {"type": "nats", "url": "nats://127.0.0.1:4222", "duplicate_window": 120}}

A job names a connection, never a host. Any value may be a secret reference
``{"secret": NAME}`` (``targets/secrets.py``), resolved when the publisher connects — never
stored in the database. ``duplicate_window`` (NATS, seconds) is the longest relay outage the
JetStream streams must dedupe across: ``duetime doctor`` warns when a stream's own window is
shorter."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duetime import _json
from duetime._outbox import BROKER_TYPES
from duetime.errors import ValidationError
from duetime.targets.secrets import is_secret_ref, validate_secret_ref

CONNECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
"""A connection's name: it becomes part of a task name (``duetime.broker:<name>``)."""

_SCHEMES = {
    "redis": ("redis://", "rediss://", "unix://"),
    "rabbitmq": ("amqp://", "amqps://"),
    "nats": ("nats://", "tls://"),
}
_OPTIONS = {
    "redis": {"type", "url", "maxlen"},
    "rabbitmq": {"type", "url"},
    "nats": {"type", "url", "duplicate_window"},
}
SETTING = "DUETIME_BROKERS"


@dataclass(frozen=True, slots=True)
class BrokerConnection:
    """One named connection. ``url`` is a string or a secret reference."""

    name: str
    type: str
    url: Any
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def duplicate_window(self) -> float | None:
        value = self.options.get("duplicate_window")
        return None if value is None else float(value)


def parse_brokers(raw: str) -> dict[str, BrokerConnection]:
    """The connections named by ``raw`` (JSON text, or a file path; empty: none). Raises
    :class:`ValidationError` naming the setting and the field."""
    doc = json_object_setting(raw, SETTING, ": connection name → settings")
    if doc is None:
        return {}
    return {name: _connection(name, spec) for name, spec in doc.items()}


def json_object_setting(raw: str, setting: str, shape: str) -> dict[str, Any] | None:
    """The JSON object a setting holds, given inline or as the path of a file holding it;
    None when it is blank. ValidationError naming ``setting`` when the file cannot be read,
    the text is no JSON, or the JSON is no object ("must be a JSON object" + ``shape``)."""
    raw = raw.strip()
    if not raw:
        return None
    if not raw.startswith("{"):
        try:
            raw = Path(raw).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValidationError(
                setting, f"neither a JSON object nor a readable file: {exc}"
            ) from None
    try:
        doc = _json.loads(raw)
    except ValueError as exc:
        raise ValidationError(setting, f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValidationError(setting, f"must be a JSON object{shape}")
    return doc


def _connection(name: str, spec: object) -> BrokerConnection:
    where = f"{SETTING}.{name}"
    if not CONNECTION_NAME.fullmatch(name):
        raise ValidationError(
            where, "a connection name is 1-63 letters, digits, '_', '.' or '-' (letter first)"
        )
    if not isinstance(spec, dict):
        raise ValidationError(where, 'must be an object such as {"type": "redis", "url": …}')
    kind = spec.get("type")
    if kind not in BROKER_TYPES:
        raise ValidationError(f"{where}.type", f"must be one of {', '.join(BROKER_TYPES)}")
    unknown = sorted(k for k in spec if k not in _OPTIONS[kind])
    if unknown:
        raise ValidationError(
            f"{where}.{unknown[0]}",
            f"unknown field (a {kind} connection takes {', '.join(sorted(_OPTIONS[kind]))})",
        )
    url = spec.get("url")
    if is_secret_ref(url):
        url = validate_secret_ref(f"{where}.url", url)
    elif not isinstance(url, str) or not url.startswith(_SCHEMES[kind]):
        raise ValidationError(
            f"{where}.url", f"must be a {' or '.join(_SCHEMES[kind])} URL or a secret reference"
        )
    for key in ("maxlen", "duplicate_window"):
        value = spec.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ValidationError(f"{where}.{key}", "must be a positive number")
    options = {k: v for k, v in spec.items() if k not in ("type", "url")}
    return BrokerConnection(name=name, type=kind, url=url, options=options)
