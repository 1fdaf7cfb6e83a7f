"""``duetime tenants …``: fairness limits per tenant — set, show (docs/fairness.md) — and where
a tenant's alerts go (`alerts`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from duetime._durations import parse_duration
from duetime._types import SecretRotation, TenantLimits, TenantQueueStats
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, JsonOption, command_group, print_json, with_app
from duetime.cli._output import print_fields, print_result, print_table, to_jsonable

commands = typer.Typer()
tenants = command_group(
    commands,
    "tenants",
    "Tenant fairness: in-flight and start-rate quotas, weights, and what waits.",
)


def _limit(value: Any) -> str:
    return "no limit" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _limits_fields(limits: TenantLimits) -> list[tuple[str, Any]]:
    return [
        ("tenant", limits.tenant),
        ("max in flight", _limit(limits.max_in_flight)),
        ("max starts/s", _limit(limits.max_starts_per_second)),
        ("weight", limits.weight),
        ("max jobs", _limit(limits.max_jobs)),
        ("max backfill runs", _limit(limits.max_backfill_runs)),
    ]


@tenants.command("set")
def set_limits(
    tenant: Annotated[str, typer.Argument(metavar="TENANT", help="The tenant's id.")],
    max_in_flight: Annotated[
        int | None,
        typer.Option(
            "--max-in-flight", min=0, help="Runs running at once, all workers together; 0: none."
        ),
    ] = None,
    max_starts_per_second: Annotated[
        float | None,
        typer.Option(
            "--max-starts-per-second",
            min=0.0,
            help="Run starts per second, all workers together (bursts of max(1, R)); 0: none.",
        ),
    ] = None,
    weight: Annotated[
        int | None,
        typer.Option("--weight", min=1, max=1000, help="Share of each claim (default 1)."),
    ] = None,
    max_jobs: Annotated[
        int | None,
        typer.Option(
            "--max-jobs", min=0, help="Jobs registered at once (cancelled ones aside); 0: no cap."
        ),
    ] = None,
    max_backfill_runs: Annotated[
        int | None,
        typer.Option("--max-backfill-runs", min=0, help="Runs one backfill may create; 0: no cap."),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Set a tenant's limits; options not given keep their value. Every claim of every worker
    enforces them from the next claim on (runs already running are not stopped)."""
    if (
        max_in_flight is None
        and max_starts_per_second is None
        and weight is None
        and (max_jobs is None and max_backfill_runs is None)
    ):
        typer.echo(
            "error: give at least one of --max-in-flight, --max-starts-per-second, --weight, "
            "--max-jobs, --max-backfill-runs",
            err=True,
        )
        raise typer.Exit(2)

    async def body(app: AsyncApp) -> TenantLimits:
        return await app.tenant_limits_set(
            tenant,
            max_in_flight=max_in_flight,
            max_starts_per_second=max_starts_per_second,
            weight=weight,
            max_jobs=max_jobs,
            max_backfill_runs=max_backfill_runs,
        )

    print_result(
        with_app(db, "default", body),
        as_json,
        lambda limits: print_fields(_limits_fields(limits), title="tenant limits"),
    )


@tenants.command("show")
def show(
    tenant: Annotated[
        str | None,
        typer.Argument(metavar="[TENANT]", help="One tenant (default: every known tenant)."),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """A tenant's limits and its queues (due, oldest due, in flight, throttled); without
    TENANT, every tenant's."""

    async def body(app: AsyncApp) -> tuple[list[TenantLimits], list[TenantQueueStats]]:
        stats = await app.tenant_stats()
        if tenant is not None:
            return [await app.tenant_limits_get(tenant)], [s for s in stats if s.tenant == tenant]
        known = {limits.tenant: limits for limits in await app.tenant_limits_list()}
        for s in stats:  # tenants with runs but no row yet: defaults
            known.setdefault(s.tenant, TenantLimits(s.tenant))
        return [known[t] for t in sorted(known)], stats

    limits, stats = with_app(db, "default", body, create=False)
    if as_json:
        found = {lim.tenant: {**to_jsonable(lim), "queues": []} for lim in limits}
        for s in stats:
            entry = to_jsonable(s)
            entry.pop("tenant")
            found[s.tenant]["queues"].append(entry)
        print_json(found[tenant] if tenant is not None else {"items": list(found.values())})
        return
    if tenant is not None:
        print_fields(_limits_fields(limits[0]), title="tenant limits")
    else:
        print_table(
            ["tenant", "max in flight", "max starts/s", "weight"],
            [
                (x.tenant, _limit(x.max_in_flight), _limit(x.max_starts_per_second), x.weight)
                for x in limits
            ],
            empty="no tenants",
        )
    print_table(
        ["tenant", "queue", "due", "oldest due (s)", "in flight", "throttled"],
        [
            (s.tenant, s.queue, s.due, f"{s.oldest_due_age:.1f}", s.in_flight, s.throttled)
            for s in stats
        ],
        title="queues",
        empty="no runs waiting or running",
    )


@tenants.command("rotate-secret")
def rotate_secret(
    tenant: Annotated[str, typer.Argument(metavar="TENANT", help="The tenant's id.")],
    overlap: Annotated[
        str,
        typer.Option(
            "--overlap",
            help="How long the previous secret still signs too (both signatures are sent), "
            "e.g. 1d, 12h, PT30M; at least 1m.",
        ),
    ] = "1d",
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give a tenant a new webhook signing secret, printed once: give it to the receivers,
    which accept either signature until the overlap ends (docs/webhooks.md)."""
    length = parse_duration(overlap)
    if length is None:
        typer.echo(f"error: --overlap {overlap!r} is not a duration such as 1d or PT12H", err=True)
        raise typer.Exit(2)

    async def body(app: AsyncApp) -> SecretRotation:
        return await app.rotate_webhook_secret(length.total_seconds(), tenant=tenant)

    rotation = with_app(db, "default", body)
    if as_json:
        print_json(to_jsonable(rotation))
        return
    print_fields(
        [
            ("tenant", rotation.tenant),
            ("new secret", rotation.secret),
            ("old secret signs until", rotation.previous_until.isoformat(timespec="seconds")),
        ]
    )


@tenants.command("alerts")
def alerts(
    tenant: Annotated[str, typer.Argument(metavar="TENANT", help="The tenant's id.")],
    webhook: Annotated[
        list[str] | None,
        typer.Option(
            "--webhook",
            help="Send the tenant's alerts to this URL too (repeat for several); replaces the "
            "list. Without --webhook or --clear, shows it.",
        ),
    ] = None,
    clear: Annotated[
        bool, typer.Option("--clear", help="Send the tenant's alerts nowhere extra.")
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Where a tenant's alerts go besides the installation's DUETIME_ALERT_WEBHOOKS: show it,
    or set it (signed with the tenant's webhook secret; hosts checked as webhook targets')."""
    if clear and webhook:
        typer.echo("error: --clear and --webhook do not go together", err=True)
        raise typer.Exit(2)
    changing = clear or bool(webhook)

    async def body(app: AsyncApp) -> list[str]:
        if changing:
            return await app.tenant_alert_webhooks_set(webhook or [], tenant=tenant)
        return await app.tenant_alert_webhooks(tenant)

    urls = with_app(db, "default", body, create=changing)
    if as_json:
        print_json({"tenant": tenant, "webhooks": urls})
        return
    print_table(
        ["webhook"],
        [(u,) for u in urls],
        title=f"alert webhooks of tenant {tenant}",
        empty="none: only the installation's DUETIME_ALERT_WEBHOOKS",
    )
