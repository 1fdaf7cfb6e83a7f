"""Structured logs (every line about a run carries its run id, job, tenant, attempt and fencing
token) and OpenTelemetry spans around claim, execute and complete (only when tracing is set
up)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from duetime import _logs, _tracing
from tests.observability.obskit import open_app, worker
from tests.waiting import eventually


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    _logs.configure("info", "json", stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_carry_the_bound_run(json_logs: io.StringIO) -> None:
    run = SimpleNamespace(id="r-1", job_name="nightly", tenant="acme", attempt=2, token=7)
    log = logging.getLogger("duetime.test")
    with _logs.bind_run(run):
        log.warning("about the run %s", "r-1")
    log.info("not about a run", extra={"shard": 3})
    about, other = lines(json_logs)
    assert about["message"] == "about the run r-1"
    assert about["level"] == "warning"
    assert (about["run_id"], about["job"], about["tenant"]) == ("r-1", "nightly", "acme")
    assert (about["attempt"], about["token"]) == (2, 7)
    assert "run_id" not in other
    assert other["shard"] == 3


async def test_lines_logged_while_a_run_executes_are_about_it(
    store_url: str, json_logs: io.StringIO
) -> None:
    app = await open_app(store_url)

    @app.task("l.chatty")
    async def chatty(ctx, payload):  # type: ignore[no-untyped-def]
        logging.getLogger("user.code").info("working on it")

    try:
        job = await app.schedule("chatty", task="l.chatty", now=True)
        await app.materializer().run_once()
        async with worker(app, ["l.chatty"]):

            async def done():  # type: ignore[no-untyped-def]
                runs = (await app.runs(job.id)).items
                return runs and runs[0].state == "succeeded" and runs[0]

            run = await eventually(done, what="the run to succeed")
        (line,) = [x for x in lines(json_logs) if x["message"] == "working on it"]
        assert line["run_id"] == str(run.id)
        assert line["job"] == "chatty"
        assert line["tenant"] == "default"
        assert line["attempt"] == 1
        assert line["token"] == run.token
    finally:
        await app.close()


@pytest.fixture
def text_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger writing duetime's text format, with the run's fields, to a string."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_logs.TextFormatter())
    handler.addFilter(_logs.RunContextFilter())
    log = logging.getLogger("duetime.test.text")
    log.addHandler(handler)
    log.propagate = False
    try:
        yield log, stream
    finally:
        log.removeHandler(handler)


def test_text_format_names_the_run(text_log: tuple[logging.Logger, io.StringIO]) -> None:
    log, stream = text_log
    run = SimpleNamespace(id="r-2", job_name="j", tenant="t", attempt=1, token=1)
    with _logs.bind_run(run):
        log.warning("hello")
    assert stream.getvalue().rstrip().endswith("hello [run=r-2 job=j attempt=1]")


async def test_spans_around_claim_execute_and_complete(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not _tracing.enabled()  # nothing configured: no spans, no cost
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert _tracing._trace is not None
    monkeypatch.setattr(_tracing._trace, "get_tracer_provider", lambda: provider)
    monkeypatch.setattr(
        _tracing._trace, "get_tracer", lambda name, *a, **k: provider.get_tracer(name)
    )
    monkeypatch.setattr(_tracing, "_known", (False, float("-inf")))  # forget the last answer
    assert _tracing.enabled()

    app = await open_app(store_url)

    @app.task("t.traced")
    async def traced(ctx, payload):  # type: ignore[no-untyped-def]
        return None

    try:
        job = await app.schedule("traced", task="t.traced", now=True)
        await app.materializer().run_once()
        async with worker(app, ["t.traced"]):

            async def done():  # type: ignore[no-untyped-def]
                runs = (await app.runs(job.id)).items
                return runs and runs[0].state == "succeeded" and runs[0]

            run = await eventually(done, what="the run to succeed")

            async def completed():  # type: ignore[no-untyped-def]
                return any(s.name == "duetime.complete" for s in exporter.get_finished_spans())

            await eventually(completed, what="the complete span")
        names = {s.name for s in exporter.get_finished_spans()}
        assert {"duetime.claim", "duetime.execute", "duetime.complete"} <= names
        (execute,) = [s for s in exporter.get_finished_spans() if s.name == "duetime.execute"]
        assert execute.attributes is not None
        assert execute.attributes["duetime.run_id"] == str(run.id)
        assert execute.attributes["duetime.job"] == "traced"
        assert execute.attributes["duetime.token"] == run.token
    finally:
        await app.close()


def test_text_format_names_the_run_before_a_traceback(
    text_log: tuple[logging.Logger, io.StringIO],
) -> None:
    """The run's fields end the message's first line; the traceback follows unchanged."""
    log, stream = text_log
    run = SimpleNamespace(id="r-3", job_name="j", tenant="t", attempt=2, token=1)
    with _logs.bind_run(run):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.warning("failed", exc_info=True)
    first, *rest = stream.getvalue().rstrip().splitlines()
    assert first.endswith("failed [run=r-3 job=j attempt=2]")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "RuntimeError: boom"


def test_the_cli_logs_to_the_stderr_of_the_moment(capsys: pytest.CaptureFixture[str]) -> None:
    """A command run in-process (a test runner, an embedding program) swaps ``sys.stderr`` for
    its own stream and closes it after: a record logged later goes to the stderr then in
    place, never to the closed one ("--- Logging error --- … I/O operation on closed file")."""
    from typer.testing import CliRunner

    from duetime.cli._lifecycle import configure_logging

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        with CliRunner().isolation():
            configure_logging("info")
        logging.getLogger("duetime.test").warning("after the command")
        err = capsys.readouterr().err
        assert "after the command" in err
        assert "Logging error" not in err
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
