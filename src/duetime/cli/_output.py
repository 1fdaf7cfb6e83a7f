"""Output and option parsing shared by the management commands (jobs, runs, dlq, preview).

- :func:`to_jsonable` turns duetime's values (Job, Run, Attempt, Schedule, Occurrence, Page …)
  into plain JSON-ready data; it has no CLI dependencies, so an HTTP API can reuse it.
- :func:`print_table` / :func:`print_fields` print rich tables when stdout is a terminal and
  plain, aligned, unwrapped text otherwise (pipes, files, tests); :func:`print_result` and
  :func:`print_rows` print a command's result as ``--json`` asks: JSON, or the text or table.
- ``parse_*`` read option values and exit with ``error: <option>: <reason>`` (code 2) when
  they are invalid; durations (``PT3H``, ``90s``, ``1h30m``) are :mod:`duetime._durations`'s.
- :func:`fetch_pages` serves ``--cursor`` and ``--all`` of the list commands, which read with
  :func:`read_listing` and print with :func:`print_listing`; :class:`ProgressBar` shows the
  progress of long commands on a terminal's stderr.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Annotated, Any, TypeVar

import orjson
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from duetime._durations import parse_duration
from duetime._redact import redact_target
from duetime._types import (
    Attempt,
    CalendarInterval,
    Job,
    Occurrence,
    OverlapPolicy,
    Page,
    RetryPolicy,
    Run,
    Schedule,
    ScheduleKind,
)
from duetime.app import AsyncApp
from duetime.cli._common import fail, print_json, with_app
from duetime.errors import ValidationError
from duetime.schedules import parse_every

E = TypeVar("E", bound=enum.Enum)
T = TypeVar("T")

# --- JSON -------------------------------------------------------------------------------------


def format_instant(value: datetime) -> str:
    """ISO 8601 in UTC with ``Z``: ``2026-03-08T07:00:00Z`` (``.ffffff`` only when nonzero)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value!r}: duetime instants are always aware")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def schedule_jsonable(schedule: Schedule) -> dict[str, Any]:
    return {
        "kind": schedule.kind.value,
        "cron": schedule.cron,
        "tz": schedule.tz,
        "at": None if schedule.at is None else format_instant(schedule.at),
        "every_seconds": None if schedule.every is None else schedule.every.total_seconds(),
        "every_calendar": None if schedule.every_calendar is None else str(schedule.every_calendar),
        "anchor": None if schedule.anchor is None else format_instant(schedule.anchor),
    }


def occurrence_jsonable(occurrence: Occurrence) -> dict[str, Any]:
    """``utc`` (``…Z``), ``local`` (ISO 8601 with the zone's offset), ``dst_note``, and
    ``calendar_note`` when the job's calendars skip or move it."""
    out = {
        "utc": format_instant(occurrence.instant),
        "local": occurrence.local.isoformat(),
        "dst_note": occurrence.dst_note,
    }
    if occurrence.calendar_note is not None:
        out["calendar_note"] = occurrence.calendar_note
    return out


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data for duetime's values.

    Dataclasses become dicts of their fields; datetimes ISO 8601 UTC with ``Z``; timedeltas
    seconds (float); UUIDs strings; enums their value; tuples, lists and sets lists. A
    ``Schedule`` is flattened to ``kind/cron/tz/at/every_seconds/every_calendar/anchor``; an
    ``Occurrence`` is ``utc/local/dst_note``; an ``Attempt`` also gets ``duration_seconds``
    (None if it never started). A ``Page`` is ``{"items": [...], "next_cursor": ...}``. The
    header values of a ``Job``'s or ``Run``'s ``target`` read ``"<redacted>"`` (webhook
    credentials).
    """
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, datetime):
        return format_instant(obj)
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, Schedule):
        return schedule_jsonable(obj)
    if isinstance(obj, Occurrence):
        return occurrence_jsonable(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        data = {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, Attempt):
            duration = obj.duration
            data["duration_seconds"] = None if duration is None else duration.total_seconds()
        if isinstance(obj, Job | Run):  # webhook credentials are never shown
            data["target"] = to_jsonable(redact_target(obj.target))
        if isinstance(obj, Job):  # what one call did, not the job's state
            data.pop("created", None)
        return data
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    raise TypeError(f"cannot turn {type(obj).__name__} into JSON")


# --- text -------------------------------------------------------------------------------------


def show_instant(value: datetime | None) -> str:
    """An instant for tables: UTC to the second, e.g. ``2026-03-08T07:00:00Z``."""
    if value is None:
        return "-"
    return format_instant(value.replace(microsecond=0))


def show_local(value: datetime) -> str:
    """A local time for tables: ISO 8601 with its offset, to the second."""
    return value.replace(microsecond=0).isoformat()


def show_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.3f}s".replace(".000s", "s")
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def show_duration(value: timedelta | None) -> str:
    return "-" if value is None else show_seconds(value.total_seconds())


def describe_schedule(schedule: Schedule) -> str:
    kind = schedule.kind
    if kind is ScheduleKind.CRON:
        return f"cron {schedule.cron} ({schedule.tz})"
    if kind is ScheduleKind.EVERY:
        if schedule.every_calendar is not None:  # stepped in its zone: the zone is shown
            return f"every {schedule.every_calendar} ({schedule.tz})"
        every = "?" if schedule.every is None else show_duration(schedule.every)
        return f"every {every}"
    if kind is ScheduleKind.AT:
        return f"at {show_instant(schedule.at)}"
    return "now"


def describe_target(target: Mapping[str, Any] | None) -> str:
    """``POST https://… (headers Authorization: <redacted>; timeout 30s)``: header values are
    never shown."""
    if target is None:
        return "-"
    shown = redact_target(target) or {}
    if shown.get("type") == "command":  # the command's text is the workers' configuration
        return f"command {shown.get('name')}"
    text = f"{shown.get('method', 'POST')} {shown.get('url', '?')}"
    details = []
    if shown.get("headers"):
        headers = shown["headers"].items()
        details.append("headers " + ", ".join(f"{k}: {_header(v)}" for k, v in headers))
    if shown.get("timeout") is not None:
        details.append(f"timeout {show_seconds(shown['timeout'])}")
    return f"{text} ({'; '.join(details)})" if details else text


def _header(value: Any) -> str:
    """A shown header value: the redaction marker, or a secret reference by name."""
    if isinstance(value, Mapping) and "secret" in value:
        return f"secret {value['secret']}"
    return str(value)


def describe_retry(retry: RetryPolicy) -> str:
    attempts = "1 attempt" if retry.max_attempts == 1 else f"{retry.max_attempts} attempts"
    text = (
        f"{attempts}, backoff {retry.backoff_base:g}s x"
        f"{retry.backoff_factor:g} up to {retry.backoff_cap:g}s"
    )
    if retry.within is not None:
        text += f", within {show_seconds(retry.within)} of the run's instant"
    for label, values in (
        ("permanent on", retry.permanent_on),
        ("retried on", retry.retry_on),
        ("permanent on status", retry.permanent_on_status),
        ("retried on status", retry.retry_on_status),
    ):
        if values:
            text += f"; {label} {', '.join(map(str, values))}"
    return text


def describe_overlap(job: Job) -> str:
    """``serialize (at most 3 waiting)``, ``replace (stop within 30s)``, ``allow (4 at once)``."""
    policy = job.overlap_policy
    details: list[str] = []
    if policy is OverlapPolicy.ALLOW and job.max_concurrency:
        details.append(f"{job.max_concurrency} at once")
    if job.concurrency_key is not None:
        details.append(f"key {job.concurrency_key}")
    if job.max_waiting:
        details.append(f"at most {job.max_waiting} waiting")
    if policy is OverlapPolicy.REPLACE:
        details.append(f"stop within {show_seconds(job.replace_timeout)}")
    return f"{policy} ({', '.join(details)})" if details else str(policy)


def describe_error(error_class: str | None, message: str | None) -> str:
    if error_class is None and message is None:
        return "-"
    if error_class and message:
        return f"{error_class}: {message}"
    return error_class or message or "-"


def describe_run_error(run: Run) -> str:
    return describe_error(run.last_error_class, run.last_error_message)


def compact_json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    return value if isinstance(value, str) else str(value)


def _single_line(text: str) -> str:
    return " ".join(text.split())


def _console() -> Console:
    return Console(highlight=False)


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    empty: str = "nothing to show",
) -> None:
    """Rows under column headers; ``empty`` goes to stderr when there are no rows."""
    cells = [[_cell(v) for v in row] for row in rows]
    if not cells:
        typer.echo(empty, err=True)
        return
    console = _console()
    if console.is_terminal:
        table = Table(title=title, title_justify="left", header_style="bold")
        for column in columns:
            table.add_column(column)
        for row in cells:
            table.add_row(*(Text(v) for v in row))
        console.print(table)
        return
    plain = [[_single_line(v) for v in row] for row in cells]
    headers = list(columns)
    widths = [max(len(headers[i]), *(len(r[i]) for r in plain)) for i in range(len(headers))]
    if title:
        typer.echo(f"{title}:")
    for row in [headers, *plain]:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def print_fields(pairs: Sequence[tuple[str, Any]], *, title: str | None = None) -> None:
    """``key  value`` lines (a two-column table in a terminal)."""
    console = _console()
    if console.is_terminal:
        table = Table(title=title, title_justify="left", show_header=False, box=None)
        table.add_column(style="bold")
        table.add_column()
        for key, value in pairs:
            table.add_row(key, Text(_cell(value)))
        console.print(table)
        return
    if title:
        typer.echo(f"{title}:")
    width = max(len(key) for key, _ in pairs)
    for key, value in pairs:
        typer.echo(f"{key.ljust(width)}  {_single_line(_cell(value))}")


def print_result(
    value: T, as_json: bool, show: Callable[[T], object], *, data: Callable[[T], Any] = to_jsonable
) -> None:
    """A command's result: ``data(value)`` as JSON (``--json``; by default
    :func:`to_jsonable`'s), or what ``show(value)`` prints for a reader."""
    if as_json:
        print_json(data(value))
    else:
        show(value)


def print_rows(
    items: Sequence[T],
    as_json: bool,
    columns: Sequence[str],
    row: Callable[[T], Sequence[Any]],
    *,
    empty: str,
    title: str | None = None,
    data: Callable[[Sequence[T]], Any] = to_jsonable,
) -> None:
    """A list that is not paged (see :func:`print_listing` for pages): ``data(items)`` as JSON
    (``--json``), or a table of ``row(item)`` per item (``empty`` on stderr when none)."""
    print_result(
        items,
        as_json,
        lambda shown: print_table(columns, [row(i) for i in shown], title=title, empty=empty),
        data=data,
    )


def clip(text: str, width: int = 60) -> str:
    text = _single_line(text)
    return text if len(text) <= width else text[: width - 1] + "…"


# --- parsing option values ------------------------------------------------------------------


def parse_instant(text: str, option: str) -> datetime:
    """An ISO 8601 instant with an offset or ``Z``; exits with an error naming ``option``."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"{option}: {text!r} is not an ISO 8601 instant (e.g. 2026-12-01T10:00:00Z)")
    if value.tzinfo is None or value.utcoffset() is None:
        fail(f"{option}: {text!r} needs a time zone offset or Z (e.g. 2026-12-01T10:00:00Z)")
    return value


def parse_when(text: str, option: str) -> datetime | timedelta:
    """An ISO 8601 instant with an offset, or a delay from now (``PT3H``, ``90s``)."""
    delay = parse_duration(text)
    if delay is not None:
        return delay
    try:
        datetime.fromisoformat(text.strip())
    except ValueError:
        fail(
            f"{option}: {text!r} is neither an ISO 8601 instant (2026-12-01T10:00:00Z) nor a "
            "duration (PT3H, 90s, 1h30m)"
        )
    return parse_instant(text, option)


def parse_interval(text: str, option: str) -> float:
    """Seconds (``30``, ``0.5``) or a duration (``90s``, ``1h30m``, ``PT15M``), in seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    duration = parse_duration(text)
    if duration is None:
        fail(f"{option}: {text!r} is neither seconds (30) nor a duration (PT15M, 90s, 1h30m)")
    return duration.total_seconds()


def parse_every_option(text: str, option: str) -> float | timedelta | CalendarInterval:
    """``--every``: seconds (``30``), a duration (``90s``, ``1h30m``, ``PT15M``), or a count of
    units in words (``"90 seconds"``, ``"2 hours"``: fixed; ``"1 day"``, ``"2 weeks"``,
    ``"1 month"``: calendar units in ``--tz``); anything else (``"1 fortnight"``, ``"0 days"``,
    ``"1.5 months"``) is a usage error saying why."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_every(text)
    except ValidationError as exc:
        fail(f"{option}: {exc.reason}")


def parse_json_option(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        fail(f"{option}: is not valid JSON ({exc})")


def parse_choice(value: str | None, kind: type[E], option: str) -> E | None:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(v.value) for v in kind)
        fail(f"{option}: {value!r} is not one of: {allowed}")


CursorOption = Annotated[
    str | None, typer.Option("--cursor", help="Continue after the page that printed this cursor.")
]
"""``--cursor``, of every command that lists a page (with ``--limit``, see :func:`check_limit`)."""


def check_limit(limit: int, option: str = "--limit", maximum: int = 1000) -> None:
    if not 1 <= limit <= maximum:
        fail(f"{option}: must be 1-{maximum}, got {limit}")


AllPagesOption = Annotated[
    bool,
    typer.Option("--all", help="Print every page (fetched --limit at a time), not only the first."),
]
"""``--all``, of every command that lists a page: walk the pages (see :func:`fetch_pages`)."""


def check_all_pages(every: bool, cursor: str | None) -> None:
    """``--all`` starts from the first page: it refuses a ``--cursor`` (exit 2)."""
    if every and cursor is not None:
        fail("--all: cannot be combined with --cursor (--all lists every page from the first)")


async def fetch_pages(
    fetch: Callable[[str | None], Awaitable[Page[T]]],
    cursor: str | None,
    every: bool,
    *,
    what: str = "items",
) -> Page[T]:
    """The page at ``cursor`` (``fetch(cursor)``); with ``every`` (``--all``), every page from
    the first, as one page without a next cursor, with a progress bar on a terminal's stderr
    (``what`` names the items). Call :func:`check_all_pages` first."""
    if not every:
        return await fetch(cursor)
    items: list[T] = []
    with ProgressBar(f"listing {what}") as bar:
        while True:
            page = await fetch(cursor)
            items.extend(page.items)
            bar.update(len(items), f"{len(items):,} {what}")
            if page.next_cursor is None or page.next_cursor == cursor:
                return Page(items=items)
            cursor = page.next_cursor


def read_listing(
    db: str | None,
    tenant: str,
    fetch: Callable[[AsyncApp, str | None], Awaitable[Page[T]]],
    *,
    limit: int,
    cursor: str | None,
    every: bool,
    what: str,
) -> Page[T]:
    """What a list command lists: checks ``--limit`` and ``--all``/``--cursor`` (exit 2), then
    reads, with the app open read-only on ``db``, the page ``fetch(app, cursor)`` or with
    ``every`` all of them (:func:`fetch_pages`; ``what`` names the items)."""
    check_limit(limit)
    check_all_pages(every, cursor)

    async def body(app: AsyncApp) -> Page[T]:
        return await fetch_pages(lambda at: fetch(app, at), cursor, every, what=what)

    return with_app(db, tenant, body, create=False)


def print_listing(
    page: Page[T],
    as_json: bool,
    columns: Sequence[str],
    row: Callable[[T], Sequence[Any]],
    *,
    empty: str,
) -> None:
    """A list command's output: the page as JSON (``--json``), or a table of ``row(item)`` per
    item and, when more pages follow, the ``--cursor`` of the next on stderr."""
    print_rows(page.items, as_json, columns, row, empty=empty, data=lambda _: to_jsonable(page))
    if not as_json and page.next_cursor is not None:
        typer.echo(f"more: --cursor {page.next_cursor}", err=True)


# --- progress ---------------------------------------------------------------------------------


class ProgressBar:
    """``with ProgressBar("importing jobs", total=n) as bar: bar.update(done, note)``.

    While the block runs, a rich progress bar (description, bar, percentage when ``total`` is
    known, ``note``, elapsed time) is drawn on stderr — only when stderr is an interactive
    terminal. Otherwise it does nothing at all: pipes, files and ``--json`` scripts get the
    same output as without it. Stdout is never touched; lines written to ``sys.stderr`` meanwhile
    (``fail``'s) print above the bar, which is erased when the block raises. Update it per chunk
    of work, not per item (each update takes a lock)."""

    def __init__(self, description: str, total: float | None = None) -> None:
        console = Console(stderr=True)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if not console.is_interactive:
            return
        columns: list[ProgressColumn] = [TextColumn("{task.description}"), BarColumn()]
        if total is not None:
            columns.append(TaskProgressColumn())
        columns += [TextColumn("{task.fields[note]}"), TimeElapsedColumn()]
        self._progress = Progress(*columns, console=console, redirect_stdout=False)
        self._task = self._progress.add_task(description, total=total, note="")

    def __enter__(self) -> ProgressBar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            if error is not None:  # it failed (its error printed above the bar): no bar left
                self._progress.live.transient = True
            self._progress.stop()

    def update(self, completed: float, note: str = "") -> None:
        """Show ``completed`` (of ``total``) and ``note``."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=completed, note=note)
