"""A broker run's message (no broker needed): the payload as JSON, the run's identity as
headers, and the W3C ``traceparent`` of the current span when tracing records one; and the
``DUETIME_BROKERS`` setting's errors, each naming its field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.trace import TracerProvider

from duetime.errors import ValidationError
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.brokers.message import build_message
from duetime.targets.context import RunContext

TARGET = {"type": "nats", "connection": "audit", "subject": "billing.due"}


def context() -> RunContext:
    return RunContext(
        run_id=uuid.UUID(int=7),
        job_id=uuid.UUID(int=8),
        job_name="settle",
        tenant="acme",
        task="duetime.broker:audit",
        scheduled_for=datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        attempt=2,
        max_attempts=3,
        token=5,
        worker_id="w",
        payload={"amount": 3, "note": 'a "quoted" ; $(x)'},
    )


def test_the_message_carries_the_run() -> None:
    message = build_message(context(), TARGET)  # no span: no traceparent
    assert message.message_id == f"{uuid.UUID(int=7)}:2"
    assert message.connection == "audit"
    assert message.body == '{"amount":3,"note":"a \\"quoted\\" ; $(x)"}'
    assert message.headers == {
        "duetime-run-id": str(uuid.UUID(int=7)),
        "duetime-job": "settle",
        "duetime-tenant": "acme",
        "duetime-scheduled-for": "2026-03-29T01:30:00+00:00",
        "duetime-attempt": "2",
        "duetime-token": "5",
        "duetime-message-id": f"{uuid.UUID(int=7)}:2",
    }


def test_traceparent_when_a_span_is_recording() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("duetime.execute") as span:
        message = build_message(context(), TARGET)
        ids = span.get_span_context()
    flags = int(ids.trace_flags)
    assert flags & 1  # sampled
    expected = f"00-{ids.trace_id:032x}-{ids.span_id:016x}-{flags:02x}"
    assert message.headers["traceparent"] == expected


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("[1]", "DUETIME_BROKERS"),
        ("{not json", "DUETIME_BROKERS"),
        ("/nonexistent/brokers.json", "DUETIME_BROKERS"),
        ('{"b": {"type": "kafka", "url": "x"}}', "DUETIME_BROKERS.b.type"),
        ('{"b": {"type": "redis", "url": "amqp://x"}}', "DUETIME_BROKERS.b.url"),
        ('{"b": {"type": "redis", "url": "redis://x", "host": "y"}}', "DUETIME_BROKERS.b.host"),
        ('{"-b": {"type": "redis", "url": "redis://x"}}', "DUETIME_BROKERS.-b"),
        ('{"b": {"type": "nats", "url": "nats://x", "duplicate_window": 0}}',
         "DUETIME_BROKERS.b.duplicate_window"),
        ('{"b": {"type": "rabbitmq", "url": {"secret": "no such"}}}', "DUETIME_BROKERS.b.url"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_field(raw: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_brokers(raw)
    assert caught.value.field == field


def test_a_settings_file_and_secret_references(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "brokers.json"
    path.write_text('{"bus": {"type": "rabbitmq", "url": {"secret": "BUS_URL"}}}')
    (bus,) = parse_brokers(str(path)).values()
    assert (bus.name, bus.type, bus.url) == ("bus", "rabbitmq", {"secret": "BUS_URL"})
