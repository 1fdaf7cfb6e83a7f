"""``duetime jobs …``: create (or update), list, show, pause, resume, cancel, delete, trigger."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import typer

from duetime._types import Job, JobStatus, Occurrence, Page, RetryPolicy, Run
from duetime.app import AsyncApp
from duetime.cli._common import (  # an import list like other modules': not logic
    DbOption,
    JsonOption,
    TenantOption,
    command_group,
    fail,
    print_json,
    with_app,
)
from duetime.cli._output import (
    AllPagesOption,
    CursorOption,
    compact_json,
    describe_overlap,
    describe_retry,
    describe_run_error,
    describe_schedule,
    describe_target,
    parse_choice,
    parse_every_option,
    parse_instant,
    parse_interval,
    parse_json_option,
    parse_when,
    print_fields,
    print_listing,
    print_result,
    print_table,
    read_listing,
    show_instant,
    show_local,
    show_seconds,
    to_jsonable,
)
from duetime.errors import UnknownTask, ValidationError
from duetime.schedules import preview as preview_schedule

commands = typer.Typer()
jobs = command_group(commands, "jobs", "Create, inspect and control jobs.")

JobArg = Annotated[str, typer.Argument(metavar="NAME_OR_ID", help="Job name or id.")]
# What ``jobs add`` and ``jobs update`` share: the same flag and help (``update``'s default to
# None, "keep the job's value"; an option object serves both types, typer copies it per use).
_TASK = typer.Option("--task", help="Task the job runs.")
_PRIORITY = typer.Option("--priority", help="Higher runs first.")
_MISFIRE = typer.Option("--misfire", help="Missed fires: skip, fire_once or backfill.")
_QUEUE = typer.Option("--queue", help="Queue the runs go to.")
PayloadOption = Annotated[
    str | None, typer.Option("--payload", metavar="JSON", help="JSON given to the task.")
]
MaxAttemptsOption = Annotated[
    int | None, typer.Option("--max-attempts", help="Attempts per run, counting the first.")
]
TimeoutOption = Annotated[
    float | None, typer.Option("--timeout", metavar="SECONDS", help="Per-attempt time limit.")
]
# the retry window and error classification (docs/delivery.md); `none` clears one in an update
RetryWithinOption = Annotated[
    str | None,
    typer.Option(
        "--retry-within",
        metavar="DURATION",
        help="No retry later than this after the run was due (90s, 1h, PT1H; none: no window).",
    ),
]
PermanentOnOption = Annotated[
    list[str] | None,
    typer.Option(
        "--permanent-on",
        metavar="EXCEPTION",
        help="Exception class that ends a run at once (ValueError, myapp.errors.Fatal; "
        "repeatable; none: clear).",
    ),
]
RetryOnOption = Annotated[
    list[str] | None,
    typer.Option(
        "--retry-on",
        metavar="EXCEPTION",
        help="Exception class retried even where duetime would not (repeatable; none: clear).",
    ),
]
PermanentOnStatusOption = Annotated[
    list[str] | None,
    typer.Option(
        "--permanent-on-status",
        metavar="CODE",
        help="HTTP target: status that ends a run at once (repeatable; none: clear).",
    ),
]
RetryOnStatusOption = Annotated[
    list[str] | None,
    typer.Option(
        "--retry-on-status",
        metavar="CODE",
        help="HTTP target: status that is retried (repeatable; none: clear).",
    ),
]
StartAtOption = Annotated[
    str | None,
    typer.Option(
        "--start-at",
        metavar="INSTANT",
        help="With --cron or --every: no run before this ISO 8601 instant (an --every counts "
        "from it); none: no start.",
    ),
]
EndAtOption = Annotated[
    str | None,
    typer.Option(
        "--end-at",
        metavar="INSTANT",
        help="With --cron or --every: no run after this ISO 8601 instant, then the job "
        "completes; none: no end.",
    ),
]
_OVERLAP = typer.Option(
    "--overlap",
    help="A run due while the previous one runs: skip, allow, serialize (waits), replace "
    "(stops the old one) or buffer_one (only the newest waits).",
)
CalendarOption = Annotated[
    list[str] | None,
    typer.Option(
        "--calendar",
        metavar="NAME",
        help="An exclusion calendar (duetime calendars set; repeatable): occurrences it "
        "excludes are skipped, or moved by --calendar-shift.",
    ),
]
CalendarShiftOption = Annotated[
    str | None,
    typer.Option(
        "--calendar-shift",
        help="next_business_day or previous_business_day: move an excluded occurrence to the "
        "same time of the nearest day no calendar excludes (its run keeps the occurrence).",
    ),
]
MaxWaitingOption = Annotated[
    int | None,
    typer.Option(
        "--max-waiting",
        metavar="N",
        help="With --overlap serialize: at most N runs wait (0: any); a newer run due at the "
        "cap is skipped (queue_full).",
    ),
]
ReplaceTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--replace-timeout",
        metavar="SECONDS",
        help="With --overlap replace: seconds the old run gets to stop before its successor "
        "starts anyway (default 30).",
    ),
]
AllowUnregisteredOption = Annotated[
    bool, typer.Option("--allow-unregistered", help="Accept a task no worker has registered yet.")
]
NEXT_FIRES_SHOWN = 5
RUNS_SHOWN = 10


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line: those whose value is not None."""
    return {name: value for name, value in options.items() if value is not None}


def _retry_rules(
    within: str | None,
    permanent_on: list[str] | None,
    retry_on: list[str] | None,
    permanent_on_status: list[str] | None,
    retry_on_status: list[str] | None,
) -> dict[str, Any]:
    """The retry window and classification options given, as RetryPolicy fields (``none``
    clears one); registration validates the values and names the field at fault."""
    rules: dict[str, Any] = {}
    if within is not None:
        cleared = within.strip().lower() == "none"
        rules["within"] = None if cleared else parse_interval(within, "--retry-within")
    for name, values in (("permanent_on", permanent_on), ("retry_on", retry_on)):
        if values is not None:
            rules[name] = () if values == ["none"] else tuple(values)
    for name, codes in (
        ("permanent_on_status", permanent_on_status),
        ("retry_on_status", retry_on_status),
    ):
        if codes is not None:
            rules[name] = () if codes == ["none"] else _status_codes(codes, name)
    return rules


def _status_codes(codes: list[str], name: str) -> tuple[int, ...]:
    option = "--" + name.replace("_", "-")
    try:
        return tuple(int(code) for code in codes)
    except ValueError:
        fail(f"{option}: {codes!r} must be HTTP status codes (404, 503)")


def _job_line(job: Job) -> str:
    first = job.next_occurrence_at
    next_fire = f", next fire {show_instant(first)}" if first else ""
    return f"job {job.name!r} is {job.status}{next_fire}"


def _job_summary(job: Job) -> list[tuple[str, Any]]:
    return [
        ("id", str(job.id)),
        ("name", job.name),
        ("status", str(job.status)),
        ("task", job.task),
        ("schedule", describe_schedule(job.schedule)),
        ("next fire", show_instant(job.next_occurrence_at)),
        *_bounds_fields(job),
        *_calendar_fields(job),
        *_pause_fields(job),
    ]


def _calendar_fields(job: Job) -> list[tuple[str, Any]]:
    if not job.calendars:
        return []
    shift = f" ({job.calendar_shift})" if job.calendar_shift else " (excluded: skipped)"
    return [("calendars", ", ".join(job.calendars) + shift)]


def _pause_fields(job: Job) -> list[tuple[str, Any]]:
    """A paused job's note (``paused by``, ``pause note``, ``paused until``), what it has;
    ``pause after`` with pause on failure (decision 0023)."""
    fields: list[tuple[str, Any]] = []
    if job.pause is not None:
        if job.pause.by:
            fields.append(("paused by", job.pause.by))
        if job.pause.note:
            fields.append(("pause note", job.pause.note))
        if job.pause.until is not None:
            fields.append(("paused until", show_instant(job.pause.until)))
    if job.pause_after_dead is not None:
        fields.append(("pause after", f"{job.pause_after_dead} consecutive dead runs"))
    return fields


def _bounds_fields(job: Job) -> list[tuple[str, Any]]:
    """A job's bounds, those it has: ``start at``, ``end at``, ``runs left: 3 of 10``."""
    fields: list[tuple[str, Any]] = []
    if job.start_at is not None:
        fields.append(("start at", show_instant(job.start_at)))
    if job.end_at is not None:
        fields.append(("end at", show_instant(job.end_at)))
    if job.max_runs is not None:
        fields.append(("runs left", f"{job.runs_left} of {job.max_runs}"))
    return fields


def _bound_instant(text: str | None, option: str) -> datetime | None:
    """``--start-at``/``--end-at``: an ISO 8601 instant; ``none`` (jobs update) clears it."""
    if text is None or text.strip().lower() == "none":
        return None
    return parse_instant(text, option)


def _max_runs(text: str) -> int | None:
    """``--max-runs``: a whole number (registration checks it is at least 1), or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        fail(f"--max-runs: {text!r} must be a whole number (or none)")


_FLAGS = {
    "retry.max_attempts": "--max-attempts",
    "retry.backoff": "--backoff-base",
    "retry.within": "--retry-within",
    "retry.permanent_on": "--permanent-on",
    "retry.retry_on": "--retry-on",
    "retry.permanent_on_status": "--permanent-on-status",
    "retry.retry_on_status": "--retry-on-status",
    "start_at": "--start-at",
    "end_at": "--end-at",
    "max_runs": "--max-runs",
    "calendars": "--calendar",
    "calendar_shift": "--calendar-shift",
}
"""The flag a registration error's field is given by (the Python API names the field)."""


def _save(
    db: str | None,
    tenant: str,
    as_json: bool,
    task: str | None,
    save: Callable[[AsyncApp], Coroutine[Any, Any, Job]],
    done: Callable[[Job], str],
) -> None:
    """Create or change a job (``jobs add``, ``jobs update``) and print it, saying what was
    ``done``; an unknown task exits with the CLI's wording (naming --allow-unregistered)."""

    async def body(app: AsyncApp) -> Job:
        try:
            return await save(app)
        except UnknownTask:
            fail(
                f"task: unknown task {task!r}: no worker has registered it (start a "
                "worker that serves it first, or pass --allow-unregistered)"
            )
        except ValidationError as exc:
            flag = _FLAGS.get(exc.field)
            if flag is None:
                raise
            fail(f"{flag}: {exc.reason}")

    print_result(with_app(db, tenant, body), as_json, lambda job: _print_saved(job, done(job)))


def _print_saved(job: Job, verb: str) -> None:
    typer.echo(f"{verb} job {job.name!r}")
    print_fields(_job_summary(job))


# --- add --------------------------------------------------------------------------------------


@jobs.command("add")
def add(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Job name (unique within the tenant).")
    ],
    task: Annotated[str, _TASK],
    cron: Annotated[
        str | None, typer.Option("--cron", help="Cron expression, e.g. '*/5 * * * *' (in --tz).")
    ] = None,
    tz: Annotated[
        str, typer.Option("--tz", help="IANA time zone of --cron and of a calendar --every.")
    ] = "UTC",
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="One run at an ISO 8601 instant (2026-12-01T10:00:00Z) or after a delay "
            "(PT3H, 90s, 1h30m).",
        ),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every",
            metavar="INTERVAL",
            help="Run every INTERVAL, starting now: seconds or a duration (90, 90s, 1h30m, "
            "PT15M, '2 hours': fixed) or calendar units in --tz ('1 day', '2 weeks', '1 month': "
            "the same local time across DST).",
        ),
    ] = None,
    now: Annotated[bool, typer.Option("--now", help="One run, now.")] = False,
    payload: PayloadOption = None,
    max_attempts: MaxAttemptsOption = None,
    backoff_base: Annotated[
        float | None,
        typer.Option(
            "--backoff-base", metavar="SECONDS", help="First retry delay (exponential, jittered)."
        ),
    ] = None,
    retry_within: RetryWithinOption = None,
    permanent_on: PermanentOnOption = None,
    retry_on: RetryOnOption = None,
    permanent_on_status: PermanentOnStatusOption = None,
    retry_on_status: RetryOnStatusOption = None,
    priority: Annotated[int, _PRIORITY] = 0,
    timeout: TimeoutOption = None,
    misfire: Annotated[str, _MISFIRE] = "fire_once",
    overlap: Annotated[str, _OVERLAP] = "skip",
    max_waiting: MaxWaitingOption = None,
    replace_timeout: ReplaceTimeoutOption = None,
    queue: Annotated[str, _QUEUE] = "default",
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Tag the job (repeatable).")
    ] = None,
    allow_past: Annotated[
        bool,
        typer.Option(
            "--allow-past",
            help="Accept an --at further in the past than the misfire grace (runs at once).",
        ),
    ] = False,
    start_at: StartAtOption = None,
    end_at: EndAtOption = None,
    max_runs: Annotated[
        int | None,
        typer.Option(
            "--max-runs",
            help="With --cron or --every: at most this many scheduled runs, then the job "
            "completes (manual triggers do not count).",
        ),
    ] = None,
    calendar: CalendarOption = None,
    calendar_shift: CalendarShiftOption = None,
    allow_unregistered: AllowUnregisteredOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Create a job, or update the job of that name. Give exactly one of --cron, --at, --every
    or --now."""
    starts, ends = _bound_instant(start_at, "--start-at"), _bound_instant(end_at, "--end-at")
    when = None if at is None else parse_when(at, "--at")
    interval = None if every is None else parse_every_option(every, "--every")
    data = parse_json_option(payload, "--payload")
    rules = _retry_rules(retry_within, permanent_on, retry_on, permanent_on_status, retry_on_status)

    async def body(app: AsyncApp) -> Job:
        retry = None
        if max_attempts is not None or backoff_base is not None or rules:
            s = app.settings
            retry = RetryPolicy(
                max_attempts=s.max_attempts if max_attempts is None else max_attempts,
                backoff_base=s.backoff_base if backoff_base is None else backoff_base,
                backoff_factor=s.backoff_factor,
                backoff_cap=s.backoff_cap,
                **rules,
            )
        return await app.schedule(
            name,
            task=task,
            cron=cron,
            at=when,
            every=interval,
            now=now,
            tz=tz,
            payload=data,
            retry=retry,
            priority=priority,
            timeout=timeout,
            misfire=misfire,
            overlap=overlap,
            **_given(max_waiting=max_waiting, replace_timeout=replace_timeout),
            queue=queue,
            tags=tag or (),
            allow_past=allow_past,
            allow_unregistered=allow_unregistered,
            start_at=starts,
            end_at=ends,
            max_runs=max_runs,
            calendars=calendar or (),
            calendar_shift=calendar_shift,
        )

    _save(db, tenant, as_json, task, body, lambda job: "created" if job.created else "updated")


# --- list -------------------------------------------------------------------------------------


@jobs.command("list")
def list_jobs(
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only jobs in this status: active, paused, cancelled, completed."
        ),
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Only jobs whose name starts with this.")
    ] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Only jobs with this tag.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Jobs per page (1-1000).")] = 100,
    cursor: CursorOption = None,
    every: AllPagesOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """List jobs by name, a page at a time (--limit, --cursor), or all of them (--all)."""
    wanted = parse_choice(status, JobStatus, "--status")

    async def fetch(app: AsyncApp, at: str | None) -> Page[Job]:
        return await app.jobs.find(
            status=wanted, name_prefix=prefix, tag=tag, limit=limit, cursor=at
        )

    page = read_listing(db, tenant, fetch, limit=limit, cursor=cursor, every=every, what="jobs")
    print_listing(
        page,
        as_json,
        ["name", "status", "schedule", "task", "next fire (UTC)", "tags"],
        lambda j: (
            j.name,
            str(j.status),
            describe_schedule(j.schedule),
            j.task,
            show_instant(j.next_occurrence_at),
            ",".join(j.tags),
        ),
        empty="no jobs",
    )


# --- show -------------------------------------------------------------------------------------


def _next_fires(job: Job, count: int) -> list[Occurrence]:
    """The job's next fire instants, from the earliest not fired yet (none unless it has one);
    a job with bounds asks the app, which honours them."""
    if job.next_occurrence_at is None:
        return []
    return preview_schedule(job.schedule, job.next_occurrence_at - timedelta(microseconds=1), count)


async def _next_fires_of(app: AsyncApp, job: Job, count: int) -> list[Occurrence]:
    bounded = job.start_at or job.end_at or job.max_runs is not None
    return await app.next_fires(job.id, count) if bounded else _next_fires(job, count)


@jobs.command("show")
def show(
    job: JobArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """A job, its next 5 fire instants and its last 10 runs."""

    async def body(app: AsyncApp) -> tuple[Job, list[Occurrence], list[Run]]:
        found = await app.get(job)
        runs = await app.runs(found.id, limit=RUNS_SHOWN)
        return found, await _next_fires_of(app, found, NEXT_FIRES_SHOWN), runs.items

    found, fires, runs = with_app(db, tenant, body, create=False)
    if as_json:
        print_json(
            {"job": to_jsonable(found), "next_fires": to_jsonable(fires), "runs": to_jsonable(runs)}
        )
        return
    print_fields(
        [
            *_job_summary(found),
            *([("target", describe_target(found.target))] if found.target is not None else []),
            ("tenant", found.tenant),
            ("payload", compact_json(found.payload)),
            ("priority", found.priority),
            ("retry", describe_retry(found.retry)),
            ("timeout", show_seconds(found.timeout)),
            ("misfire", f"{found.misfire_policy} (grace {show_seconds(found.misfire_grace)})"),
            ("overlap", describe_overlap(found)),
            ("delivery", str(found.delivery)),
            ("queue", found.queue),
            ("tags", ", ".join(found.tags)),
            ("metadata", compact_json(found.metadata) if found.metadata else "-"),
            ("created", show_instant(found.created_at)),
            ("updated", show_instant(found.updated_at)),
        ]
    )
    typer.echo("")
    print_table(
        ["UTC", "local", "note"],
        [(show_instant(o.instant), show_local(o.local), o.note) for o in fires],
        title="next fires",
        empty="next fires: none",
    )
    typer.echo("")
    print_table(
        ["run id", "scheduled for", "state", "attempt", "trigger", "error"],
        [
            (
                str(r.id),
                show_instant(r.scheduled_for),
                str(r.state),
                f"{r.attempt}/{r.max_attempts}",
                str(r.trigger),
                describe_run_error(r),
            )
            for r in runs
        ],
        title=f"last {RUNS_SHOWN} runs",
        empty="runs: none yet",
    )


# --- status changes ---------------------------------------------------------------------------


def _status_command(action: Literal["resume", "cancel"], doc: str) -> Callable[..., None]:
    """The command ``jobs <action>``: one job's status change, printed (or as JSON)."""

    def command(
        job: JobArg,
        db: DbOption = None,
        tenant: TenantOption = "default",
        as_json: JsonOption = False,
    ) -> None:
        async def body(app: AsyncApp) -> Job:
            change = {"resume": app.resume, "cancel": app.cancel}[action]
            return await change(job)

        print_result(with_app(db, tenant, body), as_json, lambda j: typer.echo(_job_line(j)))

    command.__name__ = command.__qualname__ = action
    command.__doc__ = doc
    return jobs.command(action)(command)


@jobs.command("pause")
def pause(
    job: JobArg,
    note: Annotated[str | None, typer.Option("--note", help="Why it is paused.")] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Resume by itself at this ISO 8601 instant (with an offset)."),
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Who paused it (default: this CLI's actor).")
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Stop scheduling new runs (manual triggers still work); --note, --by and --until say
    why, who and until when (pausing a paused job with them replaces its note)."""
    resume_at = None if until is None else parse_instant(until, "--until")

    changed = with_app(db, tenant, lambda app: app.pause(job, note=note, until=resume_at, by=by))
    print_result(changed, as_json, _say_paused)


def _say_paused(changed: Job) -> None:
    line = _job_line(changed)
    if changed.pause is not None and changed.pause.until is not None:
        line += f", until {show_instant(changed.pause.until)}"
    typer.echo(line)


resume = _status_command(
    "resume", "Schedule again from the next occurrence (fires missed while paused are skipped)."
)
cancel = _status_command(
    "cancel", "Stop the job for good (it stays listed; runs not yet started are skipped)."
)


@jobs.command("delete")
def delete(
    job: JobArg,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask (needed without a terminal).")
    ] = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
) -> None:
    """Delete the job and its history (asks first unless --yes)."""
    if not yes:
        if not sys.stdin.isatty():
            typer.echo(f"refusing to delete job {job!r} without a terminal: give --yes", err=True)
            raise typer.Exit(2)
        if not typer.confirm(f"Delete job {job!r} and all its history?", default=False):
            typer.echo("not deleted", err=True)
            raise typer.Exit(1)

    async def body(app: AsyncApp) -> None:
        await app.delete(job)

    with_app(db, tenant, body)
    typer.echo(f"deleted job {job!r}")


# --- trigger ----------------------------------------------------------------------------------


# (every command's signature ends in the same --db/--tenant/--json options: typer reads them there)
@jobs.command("trigger")
def trigger(
    job: JobArg,
    idempotency_key: Annotated[
        str | None, typer.Option("--idempotency-key", help="The same key never makes two runs.")
    ] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            "--payload", metavar="JSON", help="JSON overriding the job's payload for this run."
        ),
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Run the job now; prints the run id."""
    data = parse_json_option(payload, "--payload")

    run = with_app(
        db, tenant, lambda app: app.trigger(job, idempotency_key=idempotency_key, payload=data)
    )
    print_result(run, as_json, lambda r: typer.echo(str(r.id)))


# --- update -----------------------------------------------------------------------------------


# Its options are add's again, with None for "keep": typer reads each command's options from
# its own signature (the option objects themselves are shared, above).
@jobs.command("update")
def update(
    job: JobArg,
    task: Annotated[str | None, _TASK] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help="New schedule: a cron expression (in --tz).")
    ] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA time zone of the schedule.")] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="New schedule: one run at an ISO 8601 instant or after a delay."),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every",
            metavar="INTERVAL",
            help="New schedule: every INTERVAL (90s, '2 hours', '1 day' in --tz; see jobs add), "
            "from the job's anchor: the first run is the first one after now.",
        ),
    ] = None,
    now: Annotated[bool, typer.Option("--now", help="New schedule: one run, now.")] = False,
    payload: PayloadOption = None,
    max_attempts: MaxAttemptsOption = None,
    backoff_base: Annotated[
        float | None,
        typer.Option("--backoff-base", metavar="SECONDS", help="First retry delay."),
    ] = None,
    retry_within: RetryWithinOption = None,
    permanent_on: PermanentOnOption = None,
    retry_on: RetryOnOption = None,
    permanent_on_status: PermanentOnStatusOption = None,
    retry_on_status: RetryOnStatusOption = None,
    priority: Annotated[int | None, _PRIORITY] = None,
    timeout: TimeoutOption = None,
    misfire: Annotated[str | None, _MISFIRE] = None,
    overlap: Annotated[str | None, _OVERLAP] = None,
    max_waiting: MaxWaitingOption = None,
    replace_timeout: ReplaceTimeoutOption = None,
    queue: Annotated[str | None, _QUEUE] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Replace the tags (repeatable).")
    ] = None,
    start_at: StartAtOption = None,
    end_at: EndAtOption = None,
    max_runs: Annotated[
        str | None,
        typer.Option(
            "--max-runs",
            metavar="N",
            help="Scheduled runs allowed over the job's life (runs left = N minus those made; "
            "a completed job with runs left is active again); none: no limit. Set on a job "
            "without one, it counts runs created from now: runs already written ahead (up to "
            "10 s before their instant) still fire and do not count.",
        ),
    ] = None,
    calendar: CalendarOption = None,
    calendar_shift: CalendarShiftOption = None,
    allow_unregistered: AllowUnregisteredOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Change some settings of a job, atomically; the others keep their values. --cron, --at,
    --every or --now replace the schedule (runs not yet started are skipped)."""
    changes = _given(
        task=task,
        cron=cron,
        tz=tz,
        at=None if at is None else parse_when(at, "--at"),
        every=None if every is None else parse_every_option(every, "--every"),
        now=True if now else None,
        retry=_given(max_attempts=max_attempts, backoff_base=backoff_base)
        | _retry_rules(retry_within, permanent_on, retry_on, permanent_on_status, retry_on_status)
        or None,
        priority=priority,
        timeout=timeout,
        misfire=misfire,
        overlap=overlap,
        max_waiting=max_waiting,
        replace_timeout=replace_timeout,
        queue=queue,
        tags=tag,
    )
    if payload is not None:  # apart: `--payload null` sets a null payload, _given drops None
        changes["payload"] = parse_json_option(payload, "--payload")
    if start_at is not None:  # apart too: `none` clears a bound
        changes["start_at"] = _bound_instant(start_at, "--start-at")
    if end_at is not None:
        changes["end_at"] = _bound_instant(end_at, "--end-at")
    if max_runs is not None:
        changes["max_runs"] = _max_runs(max_runs)
    if calendar is not None:  # `--calendar none` clears them (and a shift)
        changes["calendars"] = [] if calendar == ["none"] else calendar
        if calendar == ["none"] and calendar_shift is None:
            changes["calendar_shift"] = None
    if calendar_shift is not None:
        changes["calendar_shift"] = None if calendar_shift == "none" else calendar_shift
    if not changes:
        fail("nothing to change: give at least one option (see --help)")

    async def body(app: AsyncApp) -> Job:
        return await app.update_job(job, allow_unregistered=allow_unregistered, **changes)

    _save(db, tenant, as_json, task, body, lambda _: "updated")
