"""``duetime runs …`` (list, show, cancel) and ``duetime dlq …`` (the dead-letter queue: list,
replay)."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from duetime._types import Attempt, Page, Run, RunState
from duetime.app import AsyncApp
from duetime.app.runs import AmbiguousRunId
from duetime.cli._common import (
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
    ProgressBar,
    clip,
    compact_json,
    describe_error,
    describe_run_error,
    parse_choice,
    print_fields,
    print_listing,
    print_result,
    print_table,
    read_listing,
    show_duration,
    show_instant,
    to_jsonable,
)

commands = typer.Typer()
runs = command_group(commands, "runs", "Inspect and cancel runs.")
dlq = command_group(
    commands, "dlq", "The dead-letter queue: runs out of attempts, or failed permanently."
)

RunArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN_ID", help="Run id, or its first 8 or more characters (as `up` prints it)."
    ),
]
LimitOption = Annotated[int, typer.Option("--limit", help="Runs per page (1-1000).")]


async def resolve_run(app: AsyncApp, text: str) -> uuid.UUID:
    """The run ``text`` names in the command's tenant: a full id, or a prefix of at least 8
    characters that one run's id has. Several runs with the prefix: prints the error and the
    candidates (id, job, scheduled for) on stderr and exits 2; no run or bad text: the app's
    one-line error (NotFound, ValidationError), printed by ``with_app``."""
    try:
        return await app.runs.resolve(text)
    except AmbiguousRunId as exc:
        typer.echo(
            f"error: run id {exc.prefix} is ambiguous in tenant {exc.tenant}: "
            f"{'more than ' if exc.more else ''}{len(exc.candidates)} runs have it "
            "(give more of the id):",
            err=True,
        )
        for run in exc.candidates:
            typer.echo(f"  {run.id}  {run.job_name}  {show_instant(run.scheduled_for)}", err=True)
        if exc.more:
            typer.echo("  (and more)", err=True)
        raise typer.Exit(2) from None


# --- runs -------------------------------------------------------------------------------------


@runs.command("list")
def list_runs(
    job: Annotated[
        str | None, typer.Option("--job", metavar="NAME_OR_ID", help="Only runs of this job.")
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="Only runs in this state: scheduled, running, succeeded, dead, "
            "cancelled, skipped.",
        ),
    ] = None,
    limit: LimitOption = 100,
    cursor: CursorOption = None,
    every: AllPagesOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """List runs, newest scheduled instant first (a page at a time, or --all)."""
    wanted = parse_choice(state, RunState, "--state")

    async def fetch(app: AsyncApp, at: str | None) -> Page[Run]:
        return await app.runs(job, state=wanted, limit=limit, cursor=at)

    page = read_listing(db, tenant, fetch, limit=limit, cursor=cursor, every=every, what="runs")
    print_listing(
        page,
        as_json,
        ["run id", "job", "state", "scheduled for", "attempt", "trigger", "reason"],
        lambda r: (
            str(r.id),
            r.job_name,
            str(r.state),
            show_instant(r.scheduled_for),
            f"{r.attempt}/{r.max_attempts}",
            str(r.trigger),
            r.reason,
        ),
        empty="no runs",
    )


@runs.command("show")
def show_run(
    run_id: RunArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """A run and its attempts (worker, start, end, duration, outcome, error, traceback)."""

    async def body(app: AsyncApp) -> tuple[Run, list[Attempt]]:
        found = await resolve_run(app, run_id)
        return await app.run(found), await app.attempts(found)

    run, attempts = with_app(db, tenant, body, create=False)
    if as_json:
        print_json({"run": to_jsonable(run), "attempts": to_jsonable(attempts)})
        return
    print_fields(
        [
            ("id", str(run.id)),
            ("job", f"{run.job_name} ({run.job_id})"),
            ("task", run.task),
            ("state", str(run.state)),
            ("reason", run.reason),
            ("trigger", str(run.trigger)),
            ("scheduled for", show_instant(run.scheduled_for)),
            ("available at", show_instant(run.available_at)),
            ("started", show_instant(run.started_at)),
            ("finished", show_instant(run.finished_at)),
            ("attempt", f"{run.attempt} of {run.max_attempts}"),
            (
                "lease",
                f"{run.lease_owner} until {show_instant(run.lease_expires_at)}"
                if run.lease_owner
                else "-",
            ),
            ("priority", run.priority),
            ("queue", run.queue),
            ("payload", compact_json(run.payload)),
            ("idempotency key", run.idempotency_key),
            ("replays", run.replays),
            ("last error", describe_run_error(run)),
        ]
    )
    typer.echo("")
    print_table(
        ["#", "worker", "started", "finished", "duration", "outcome", "error"],
        [
            (
                a.number,
                a.worker_id,
                show_instant(a.started_at),
                show_instant(a.finished_at),
                show_duration(a.duration),
                str(a.outcome),
                describe_error(a.error_class, a.error_message),
            )
            for a in attempts
        ],
        title="attempts",
        empty="attempts: none finished yet",
    )
    for a in attempts:  # a failed attempt's traceback, as Python printed it (issue 17)
        if a.traceback:
            typer.echo(f"\nattempt {a.number} traceback:")
            typer.echo(a.traceback.rstrip("\n"))


# the same arguments as show_run's: typer reads each command's options from its own signature
@runs.command("cancel")
def cancel_run(
    run_id: RunArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Cancel a scheduled or running run (a running one's worker is fenced off)."""

    async def body(app: AsyncApp) -> Run:
        return await app.cancel_run(await resolve_run(app, run_id))

    print_result(
        with_app(db, tenant, body), as_json, lambda r: typer.echo(f"run {r.id} is {r.state}")
    )


# --- dlq --------------------------------------------------------------------------------------


@dlq.command("list")
def list_dead(
    limit: LimitOption = 100,
    cursor: CursorOption = None,
    every: AllPagesOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Dead runs, newest scheduled instant first (a page at a time, or --all)."""

    async def fetch(app: AsyncApp, at: str | None) -> Page[Run]:
        return await app.dead_letters(limit=limit, cursor=at)

    page = read_listing(
        db, tenant, fetch, limit=limit, cursor=cursor, every=every, what="dead runs"
    )
    print_listing(
        page,
        as_json,
        ["run id", "job", "scheduled for", "attempts", "reason", "last error"],
        lambda r: (
            str(r.id),
            r.job_name,
            show_instant(r.scheduled_for),
            r.attempt,
            r.reason,
            clip(describe_run_error(r)),
        ),
        empty="the dead-letter queue is empty",
    )


REPLAY_BATCH = 1000


@dlq.command("replay")
def replay(
    run_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="RUN_ID",
            help="Dead runs to replay: ids, or their first 8 or more characters.",
            show_default=False,
        ),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option("--job", metavar="NAME_OR_ID", help="Replay every dead run of this job."),
    ] = None,
    replay_all: Annotated[
        bool, typer.Option("--all", help="Replay every dead run of the tenant.")
    ] = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Put dead runs back in the queue with a fresh attempt budget: the given RUN_IDs, every
    dead run of --job, or every dead run with --all."""
    ids = list(dict.fromkeys(run_ids or ()))
    modes = [
        m
        for m, on in (("RUN_ID", bool(ids)), ("--job", job is not None), ("--all", replay_all))
        if on
    ]
    if not modes:
        fail("RUN_ID: nothing selected to replay: give run ids, --job NAME or --all")
    if len(modes) > 1:
        fail(f"{modes[1]}: give only one of RUN_IDs, --job or --all (got {' and '.join(modes)})")

    given: dict[str, uuid.UUID] = {}  # each RUN_ID as given → the run it names

    async def body(app: AsyncApp) -> list[uuid.UUID]:
        if ids:
            for text in ids:
                given[text] = await resolve_run(app, text)
            return await app.replay(list(dict.fromkeys(given.values())))
        # Every dead run (of the job), in batches: stop when a batch comes back short, or
        # brings only runs already replayed (they died again meanwhile).
        done: dict[uuid.UUID, None] = {}
        with ProgressBar("replaying dead runs") as bar:
            while True:
                batch = await app.replay(job=job, limit=REPLAY_BATCH)
                fresh = [i for i in batch if i not in done]
                done.update(dict.fromkeys(fresh))
                bar.update(len(done), f"{len(done):,} replayed")
                if len(batch) < REPLAY_BATCH or not fresh:
                    return list(done)

    replayed = with_app(db, tenant, body)
    if as_json:
        print_json({"replayed": len(replayed), "run_ids": to_jsonable(replayed)})
        return
    typer.echo(f"replayed {len(replayed)} run{'' if len(replayed) == 1 else 's'}")
    if ids and len(replayed) < len(set(given.values())):
        missed = [text for text, found in given.items() if found not in set(replayed)]
        typer.echo(f"not dead (or not found), left as they are: {', '.join(missed)}", err=True)
