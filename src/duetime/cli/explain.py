"""``duetime explain JOB``: why a job did or didn't fire — its last occurrences, each with what
happened and why, and its next fire instants (UTC and local, DST notes)."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.app import AsyncApp
from duetime.cli._common import DbOption, JsonOption, TenantOption, print_json, with_app
from duetime.cli._output import (
    check_limit,
    print_fields,
    print_table,
    show_instant,
    show_local,
    to_jsonable,
)
from duetime.explain import Explanation

commands = typer.Typer()


@commands.command("explain")
def explain(
    job: Annotated[str, typer.Argument(metavar="JOB", help="The job's name or id.")],
    last: Annotated[int, typer.Option("--last", help="How many past occurrences (1-100).")] = 10,
    count: Annotated[int, typer.Option("--next", help="How many next fire instants.")] = 5,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Why JOB did or didn't fire, and when it fires next.

    Its last occurrences, each with what happened and why (fired, retried, skipped by overlap
    or misfire policy, paused, dead with its error, waiting for a worker), and its next fire
    instants in UTC and local time with DST notes."""
    check_limit(last, "--last", 100)
    check_limit(count, "--next", 100)

    async def body(app: AsyncApp) -> Explanation:
        return await app.explain(job, last=last, count=count)

    result = with_app(db, tenant, body, create=False)
    if as_json:
        data = to_jsonable(result)
        for item, report in zip(data["last"], result.last, strict=True):
            item["local"] = report.local.isoformat()
        for item, fire in zip(data["next"], result.next, strict=True):
            item["local"] = fire.local.isoformat()
        print_json(data)
        return
    render(result)


def render(e: Explanation) -> None:
    print_fields(
        [
            ("job", f"{e.name} ({e.job_id})"),
            ("tenant", e.tenant),
            ("status", str(e.status)),
            ("schedule", e.schedule),
            ("next fire", show_instant(e.next_occurrence_at)),
        ],
        title="explain",
    )
    typer.echo("")
    typer.echo(e.summary)
    for note in e.notes:
        typer.echo(f"  note: {note}")
    typer.echo("")
    print_table(
        ["scheduled (UTC)", f"local ({e.tz})", "what", "why"],
        [
            (
                show_instant(r.instant) + ("" if r.count == 1 else f" (+{r.count - 1} more)"),
                show_local(r.local),
                r.what,
                r.why,
            )
            for r in e.last
        ],
        title="last occurrences (newest first)",
        empty="no occurrence yet",
    )
    typer.echo("")
    print_table(
        ["#", "UTC", f"local ({e.tz})", "note"],
        [
            (i, show_instant(n.instant), show_local(n.local), n.note)
            for i, n in enumerate(e.next, 1)
        ],
        title="next fire instants",
        empty="no next fire instant (the job is not active)",
    )
