"""``duetime jobs …``: create (or update), list, show, pause, resume, cancel, delete, trigger."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

import typer

from duetime._types import Job, JobStatus, Occurrence, RetryPolicy, Run
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, JsonOption, TenantOption, fail, print_json, with_app
from duetime.cli._output import (
    check_limit,
    compact_json,
    describe_retry,
    describe_run_error,
    describe_schedule,
    parse_choice,
    parse_json_option,
    parse_when,
    print_fields,
    print_table,
    show_instant,
    show_local,
    show_seconds,
    to_jsonable,
)
from duetime.cli._root import cli
from duetime.errors import NotFound, ValidationError
from duetime.schedules import preview as preview_schedule
from duetime.store.base import JobRef

jobs = typer.Typer(name="jobs", help="Create, inspect and control jobs.", no_args_is_help=True)
cli.add_typer(jobs, name="jobs")

JobArg = Annotated[str, typer.Argument(metavar="NAME_OR_ID", help="Job name or id.")]
NEXT_FIRES_SHOWN = 5
RUNS_SHOWN = 10


def _job_line(job: Job) -> str:
    next_fire = f", next fire {show_instant(job.next_fire_at)}" if job.next_fire_at else ""
    return f"job {job.name!r} is {job.status}{next_fire}"


def _job_summary(job: Job) -> list[tuple[str, Any]]:
    return [
        ("id", str(job.id)),
        ("name", job.name),
        ("status", str(job.status)),
        ("task", job.task),
        ("schedule", describe_schedule(job.schedule)),
        ("next fire", show_instant(job.next_fire_at)),
    ]


# --- add --------------------------------------------------------------------------------------


@jobs.command("add")
def add(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Job name (unique within the tenant).")
    ],
    task: Annotated[str, typer.Option("--task", help="Task the job runs.")],
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
        float | None,
        typer.Option("--every", metavar="SECONDS", help="Run every SECONDS, starting now."),
    ] = None,
    now: Annotated[bool, typer.Option("--now", help="One run, now.")] = False,
    payload: Annotated[
        str | None, typer.Option("--payload", metavar="JSON", help="JSON given to the task.")
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option("--max-attempts", help="Attempts per run, counting the first.")
    ] = None,
    backoff_base: Annotated[
        float | None,
        typer.Option(
            "--backoff-base", metavar="SECONDS", help="First retry delay (exponential, jittered)."
        ),
    ] = None,
    priority: Annotated[int, typer.Option("--priority", help="Higher runs first.")] = 0,
    timeout: Annotated[
        float | None, typer.Option("--timeout", metavar="SECONDS", help="Per-attempt time limit.")
    ] = None,
    misfire: Annotated[
        str, typer.Option("--misfire", help="Missed fires: skip, fire_once or backfill.")
    ] = "fire_once",
    queue: Annotated[str, typer.Option("--queue", help="Queue the runs go to.")] = "default",
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Tag the job (repeatable).")
    ] = None,
    allow_unregistered: Annotated[
        bool,
        typer.Option("--allow-unregistered", help="Accept a task no worker has registered yet."),
    ] = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Create a job, or update the job of that name. Give exactly one of --cron, --at, --every
    or --now."""
    when = None if at is None else parse_when(at, "--at")
    data = parse_json_option(payload, "--payload")

    async def body(app: AsyncApp) -> tuple[Job, bool]:
        retry = None
        if max_attempts is not None or backoff_base is not None:
            s = app.settings
            retry = RetryPolicy(
                max_attempts=s.max_attempts if max_attempts is None else max_attempts,
                backoff_base=s.backoff_base if backoff_base is None else backoff_base,
                backoff_factor=s.backoff_factor,
                backoff_cap=s.backoff_cap,
            )
        try:
            await app.store.job_get(JobRef(tenant=app.tenant, name=name))
            existed = True
        except NotFound:
            existed = False
        try:
            job = await app.schedule(
                name,
                task=task,
                cron=cron,
                at=when,
                every=every,
                now=now,
                tz=tz,
                payload=data,
                retry=retry,
                priority=priority,
                timeout=timeout,
                misfire=misfire,
                queue=queue,
                tags=tag or (),
                allow_unregistered=allow_unregistered,
            )
        except ValidationError as exc:
            if exc.field == "task" and "unknown task" in exc.reason:
                fail(
                    f"task: unknown task {task!r}: no worker has registered it (start a "
                    "worker that serves it first, or pass --allow-unregistered)"
                )
            raise
        return job, not existed

    job, created = with_app(db, tenant, body)
    if as_json:
        print_json(to_jsonable(job))
        return
    typer.echo(f"{'created' if created else 'updated'} job {job.name!r}")
    print_fields(_job_summary(job))


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
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", help="Continue after the page that printed this cursor."),
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """List jobs by name."""
    wanted = parse_choice(status, JobStatus, "--status")
    check_limit(limit)

    async def body(app: AsyncApp) -> Any:
        return await app.list(
            status=wanted, name_prefix=prefix, tag=tag, limit=limit, cursor=cursor
        )

    page = with_app(db, tenant, body)
    if as_json:
        print_json(to_jsonable(page))
        return
    print_table(
        ["name", "status", "schedule", "task", "next fire (UTC)", "tags"],
        [
            (
                j.name,
                str(j.status),
                describe_schedule(j.schedule),
                j.task,
                show_instant(j.next_fire_at),
                ",".join(j.tags),
            )
            for j in page.items
        ],
        empty="no jobs",
    )
    if page.next_cursor is not None:
        typer.echo(f"more: --cursor {page.next_cursor}", err=True)


# --- show -------------------------------------------------------------------------------------


def _next_fires(job: Job, count: int) -> list[Occurrence]:
    """The job's next fire instants, starting with its pending one (none unless it has one)."""
    if job.next_fire_at is None:
        return []
    return preview_schedule(job.schedule, job.next_fire_at - timedelta(microseconds=1), count)


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

    found, fires, runs = with_app(db, tenant, body)
    if as_json:
        print_json(
            {"job": to_jsonable(found), "next_fires": to_jsonable(fires), "runs": to_jsonable(runs)}
        )
        return
    print_fields(
        [
            *_job_summary(found),
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


def _set_status(action: str, job: str, db: str | None, tenant: str, as_json: bool) -> None:
    async def body(app: AsyncApp) -> Job:
        return await getattr(app, action)(job)

    changed = with_app(db, tenant, body)
    if as_json:
        print_json(to_jsonable(changed))
    else:
        typer.echo(_job_line(changed))


@jobs.command("pause")
def pause(
    job: JobArg, db: DbOption = None, tenant: TenantOption = "default", as_json: JsonOption = False
) -> None:
    """Stop scheduling new runs (manual triggers still work)."""
    _set_status("pause", job, db, tenant, as_json)


@jobs.command("resume")
def resume(
    job: JobArg, db: DbOption = None, tenant: TenantOption = "default", as_json: JsonOption = False
) -> None:
    """Schedule again from the next occurrence (fires missed while paused are skipped)."""
    _set_status("resume", job, db, tenant, as_json)


@jobs.command("cancel")
def cancel(
    job: JobArg, db: DbOption = None, tenant: TenantOption = "default", as_json: JsonOption = False
) -> None:
    """Stop the job for good (it stays listed; runs not yet started are skipped)."""
    _set_status("cancel", job, db, tenant, as_json)


@jobs.command("delete")
def delete(job: JobArg, db: DbOption = None, tenant: TenantOption = "default") -> None:
    """Delete the job and its history."""

    async def body(app: AsyncApp) -> None:
        await app.delete(job)

    with_app(db, tenant, body)
    typer.echo(f"deleted job {job!r}")


# --- trigger ----------------------------------------------------------------------------------


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
