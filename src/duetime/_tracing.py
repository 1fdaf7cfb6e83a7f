"""OpenTelemetry spans around claim, execute and complete — only when tracing is set up.

``opentelemetry-api`` is optional (the ``otel`` extra). Spans are made when it is installed and
an SDK tracer provider has been configured (by the application, or by
``opentelemetry-instrument`` with an exporter); otherwise :func:`span` is a no-op that costs
one check per call.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

try:  # pragma: no cover - depends on the environment
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover
    _trace = None  # type: ignore[assignment]

TRACER_NAME = "duetime"


_RECHECK_AFTER = 1.0
_known: tuple[bool, float] = (False, float("-inf"))


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span (a webhook's header, a broker message's),
    or None without tracing or outside a recorded span."""
    if _trace is None:
        return None
    context = _trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def enabled() -> bool:
    """True when spans would go somewhere: a real (non-proxy, non-no-op) tracer provider.

    OpenTelemetry sets the global provider once: a positive answer is kept; a negative one is
    asked again after a second (an application may configure tracing after start-up)."""
    global _known
    if _trace is None:
        return False
    answer, checked_at = _known
    if answer:
        return True
    now = time.monotonic()
    if now - checked_at < _RECHECK_AFTER:
        return False
    provider = _trace.get_tracer_provider()
    answer = type(provider).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider")
    _known = (answer, now)
    return answer


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span named ``name`` with ``attributes`` (None values dropped), current inside the
    block; an exception leaving the block is recorded on it. No-op without tracing."""
    if not enabled():
        yield None
        return
    assert _trace is not None
    tracer = _trace.get_tracer(TRACER_NAME)
    attrs = {k: v for k, v in attributes.items() if v is not None}
    with tracer.start_as_current_span(name, attributes=attrs) as current:
        yield current
