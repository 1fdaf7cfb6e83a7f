"""A webhook carries the W3C ``traceparent`` of the span its request is sent in (issue 19,
item 1: "webhooks get it too"), and none outside a recorded span."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from duetime.targets.http import HostPolicy, HttpExecutor
from tests.brokers.test_message import context
from tests.targets.receiver import Receiver, Reply


async def secret(tenant: str) -> str:
    return "s3cret"


async def test_the_request_carries_the_span_s_traceparent(receiver: Receiver) -> None:
    url = receiver.plan("/t", Reply(200))
    target = {"type": "http", "url": url, "method": "POST", "headers": {}, "timeout": 5.0}
    executor = HttpExecutor(secret_for=secret, policy=HostPolicy.parse("127.0.0.1"), concurrency=1)
    try:
        await executor.execute(context(), target)
        with TracerProvider().get_tracer("test").start_as_current_span("duetime.execute") as span:
            await executor.execute(context(), target)
            ids = span.get_span_context()
    finally:
        await executor.close()
    plain, traced = receiver.hits_of("/t")
    assert "traceparent" not in {k.lower() for k in plain.headers}
    flags = int(ids.trace_flags)
    assert traced.headers["traceparent"] == f"00-{ids.trace_id:032x}-{ids.span_id:016x}-{flags:02x}"
