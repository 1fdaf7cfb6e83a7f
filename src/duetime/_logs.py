"""Logging: the run a line is about, and a JSON format.

Every line logged while a run is being handled — in its executing task, or inside
``with bind_run(run)`` — carries the run's id, job, tenant, attempt and fencing token as record
attributes (``run_id``, ``job``, ``tenant``, ``attempt``, ``token``), so a JSON log line about a
run always says which. ``configure(level, "json")`` sets up one JSON object per line on stderr
(``--log-format json`` / ``DUETIME_LOG_FORMAT=json``); the text format appends the run's id
and job in brackets.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import logging
import sys
from collections.abc import Iterator
from typing import Any, Protocol, TextIO

import orjson

RUN_FIELDS = ("run_id", "job", "tenant", "attempt", "token")
FORMATS = ("text", "json")


# A structural type of property stubs, like app/_service.py's: declarations, nothing to share.
class _RunLike(Protocol):
    @property
    def id(self) -> Any: ...
    @property
    def job_name(self) -> str: ...
    @property
    def tenant(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def token(self) -> int: ...


_current: contextvars.ContextVar[_RunLike | None] = contextvars.ContextVar(
    "duetime_run", default=None
)
"""The run the current task is about; its fields are read only when a line is logged."""


def run_fields(run: _RunLike) -> dict[str, Any]:
    return {
        "run_id": str(run.id),
        "job": run.job_name,
        "tenant": run.tenant,
        "attempt": run.attempt,
        "token": run.token,
    }


@contextlib.contextmanager
def bind_run(run: _RunLike) -> Iterator[None]:
    """Lines logged inside this block are about ``run``."""
    token = _current.set(run)
    try:
        yield
    finally:
        _current.reset(token)


def set_run(run: _RunLike) -> None:
    """The rest of the current task (its context) is about ``run``."""
    _current.set(run)


class RunContextFilter(logging.Filter):
    """Adds the bound run's fields to each record (unless the call passed them in ``extra``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run = _current.get()
        if run is not None:
            for key, value in run_fields(run).items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the run's fields when the line is
    about a run, any other ``extra`` fields, and the exception text if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """The plain format; a line about a run ends with ``[run=… job=… attempt=…]`` (its first
    line, when a traceback follows)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        run_id = getattr(record, "run_id", None)
        if run_id is None:
            return text
        # a line about a run but not an attempt of it (an alert) has no attempt: leave it out
        fields = [f"run={run_id}"] + [
            f"{name}={getattr(record, name)}"
            for name in ("job", "attempt")
            if getattr(record, name, None) is not None
        ]
        # on the message's first line: a traceback that follows stays as Python printed it
        first, newline, rest = text.partition("\n")
        return f"{first} [{' '.join(fields)}]{newline}{rest}"


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes each record to ``sys.stderr`` as it is when the record is emitted, never to a
    stream captured at configuration that has since been replaced or closed (an embedding
    program's, or a test runner's)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure(level: str = "info", fmt: str = "text", stream: Any = None) -> None:
    """Log to stderr (or ``stream``) at ``level`` in ``fmt`` ("text" or "json")."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    handler: logging.Handler = logging.StreamHandler(stream) if stream else _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RunContextFilter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
