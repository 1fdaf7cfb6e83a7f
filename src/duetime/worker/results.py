"""A handler's return value as the run keeps it (``runs.result``, JSON text)."""

from __future__ import annotations

import logging

from duetime import _json
from duetime.errors import Permanent

log = logging.getLogger("duetime.worker")


class ResultRefused(Permanent):
    """A step's result cannot be kept (not JSON, or over the result limit): its children
    need it, so the step fails at once (no retry would change it)."""


def encode_result(value: object, *, limit: int, required: bool, run: str) -> str | None:
    """``value`` as JSON text, or None when there is nothing to keep. A value that is not
    JSON or is over ``limit`` bytes raises :class:`ResultRefused` when ``required`` (a
    workflow step's), else is dropped with a warning (a job's result is informational; a task
    that returned an object before results were kept must not start failing)."""
    if value is None:
        return None
    try:
        text = _json.dumps(value)
    except TypeError as exc:
        problem = f"the result is not JSON ({exc})"
    else:
        if len(text.encode()) <= limit:
            return text
        problem = f"the result is {len(text.encode()):,} bytes of JSON; the limit is {limit:,}"
    if required:
        raise ResultRefused(problem)
    log.warning("run %s: %s; it is not kept", run, problem)
    return None
