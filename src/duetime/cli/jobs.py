"""``duetime jobs …``: create (or update), list, show, pause, resume, cancel, delete, trigger."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from datetime import timedelta
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
    describe_retry,
    describe_run_error,
    describe_schedule,
    describe_target,
    parse_choice,
    parse_interval,
    parse_json_option,
    parse_when,
    print_fields,
    print_listing,
    print_table,
    read_listing,
    show_instant,
    show_local,
    show_seconds,
    to_jsonable,
)
from duetime.errors import ValidationError
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
AllowUnregisteredOption = Annotated[
    bool, typer.Option("--allow-unregistered", help="Accept a task no worker has registered yet.")
]
NEXT_FIRES_SHOWN = 5
RUNS_SHOWN = 10


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line: those whose value is not None."""
    return {name: value for name, value in options.items() if value is not None}


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
    ]


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
        except ValidationError as exc:
            if exc.field == "task" and "unknown task" in exc.reason:
                fail(
                    f"task: unknown task {task!r}: no worker has registered it (start a "
                    "worker that serves it first, or pass --allow-unregistered)"
                )
            raise

    job = with_app(db, tenant, body)
    if as_json:
        print_json(to_jsonable(job))
        return
    typer.echo(f"{done(job)} job {job.name!r}")
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
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of --cron.")] = "UTC",
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
            metavar="SECONDS",
            help="Run every SECONDS (or a duration: 90s, 1h30m, PT15M), starting now.",
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
    priority: Annotated[int, _PRIORITY] = 0,
    timeout: TimeoutOption = None,
    misfire: Annotated[str, _MISFIRE] = "fire_once",
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
    allow_unregistered: AllowUnregisteredOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Create a job, or update the job of that name. Give exactly one of --cron, --at, --every
    or --now."""
    when = None if at is None else parse_when(at, "--at")
    interval = None if every is None else parse_interval(every, "--every")
    data = parse_json_option(payload, "--payload")

    async def body(app: AsyncApp) -> Job:
        retry = None
        if max_attempts is not None or backoff_base is not None:
            s = app.settings
            retry = RetryPolicy(
                max_attempts=s.max_attempts if max_attempts is None else max_attempts,
                backoff_base=s.backoff_base if backoff_base is None else backoff_base,
                backoff_factor=s.backoff_factor,
                backoff_cap=s.backoff_cap,
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
            queue=queue,
            tags=tag or (),
            allow_past=allow_past,
            allow_unregistered=allow_unregistered,
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
    """The job's next fire instants, from the earliest not fired yet (none unless it has one)."""
    if job.next_occurrence_at is None:
        return []
    return preview_schedule(job.schedule, job.next_occurrence_at - timedelta(microseconds=1), count)


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
        return found, _next_fires(found, NEXT_FIRES_SHOWN), runs.items

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
            ("overlap", str(found.overlap_policy)),
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
        ["UTC", "local", "DST"],
        [(show_instant(o.instant), show_local(o.local), o.dst_note) for o in fires],
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


def _status_command(action: Literal["pause", "resume", "cancel"], doc: str) -> Callable[..., None]:
    """The command ``jobs <action>``: one job's status change, printed (or as JSON)."""

    def command(
        job: JobArg,
        db: DbOption = None,
        tenant: TenantOption = "default",
        as_json: JsonOption = False,
    ) -> None:
        async def body(app: AsyncApp) -> Job:
            change = {"pause": app.pause, "resume": app.resume, "cancel": app.cancel}[action]
            return await change(job)

        changed = with_app(db, tenant, body)
        if as_json:
            print_json(to_jsonable(changed))
        else:
            typer.echo(_job_line(changed))

    command.__name__ = command.__qualname__ = action
    command.__doc__ = doc
    return jobs.command(action)(command)


pause = _status_command("pause", "Stop scheduling new runs (manual triggers still work).")
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

    async def body(app: AsyncApp) -> Run:
        return await app.trigger(job, idempotency_key=idempotency_key, payload=data)

    run = with_app(db, tenant, body)
    if as_json:
        print_json(to_jsonable(run))
    else:
        typer.echo(str(run.id))


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
        typer.Option("--every", metavar="SECONDS", help="New schedule: every SECONDS (or 90s)."),
    ] = None,
    now: Annotated[bool, typer.Option("--now", help="New schedule: one run, now.")] = False,
    payload: PayloadOption = None,
    max_attempts: MaxAttemptsOption = None,
    backoff_base: Annotated[
        float | None,
        typer.Option("--backoff-base", metavar="SECONDS", help="First retry delay."),
    ] = None,
    priority: Annotated[int | None, _PRIORITY] = None,
    timeout: TimeoutOption = None,
    misfire: Annotated[str | None, _MISFIRE] = None,
    queue: Annotated[str | None, _QUEUE] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Replace the tags (repeatable).")
    ] = None,
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
        every=None if every is None else parse_interval(every, "--every"),
        now=True if now else None,
        retry=_given(max_attempts=max_attempts, backoff_base=backoff_base) or None,
        priority=priority,
        timeout=timeout,
        misfire=misfire,
        queue=queue,
        tags=tag,
    )
    if payload is not None:  # apart: `--payload null` sets a null payload, _given drops None
        changes["payload"] = parse_json_option(payload, "--payload")
    if not changes:
        fail("nothing to change: give at least one option (see --help)")

    async def body(app: AsyncApp) -> Job:
        return await app.update_job(job, allow_unregistered=allow_unregistered, **changes)

    _save(db, tenant, as_json, task, body, lambda _: "updated")
