"""``duetime nodes``: the processes of the cluster, their roles, the leader, last heartbeats;
``duetime breakers``: the circuit breakers workers report open."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer

from duetime._types import BreakerState, Leadership, NodeInfo
from duetime.app import AsyncApp
from duetime.cli._common import DbOption, JsonOption, print_json, with_app
from duetime.cli._output import print_table, to_jsonable

commands = typer.Typer()


@commands.command()
def nodes(db: DbOption = None, json: JsonOption = False) -> None:
    """List nodes (roles, partitions, last heartbeat) and the current leader."""

    async def body(app: AsyncApp) -> tuple[list[NodeInfo], Leadership | None, datetime]:
        listed, leader = await app.nodes()
        return listed, leader, app.clock.now()

    listed, leader, now = with_app(db, "default", body, create=False)
    if json:
        print_json({"nodes": to_jsonable(listed), "leader": to_jsonable(leader)})
        return
    if leader is not None and leader.expires_at <= now:  # the last leader stopped: none leads
        typer.echo(
            f"leader: none (the last, {leader.node_id}, term {leader.term}, expired "
            f"{leader.expires_at.isoformat()})"
        )
        leader = None
    elif leader is None:
        typer.echo("leader: none")
    else:
        typer.echo(
            f"leader: {leader.node_id} (term {leader.term}, until {leader.expires_at.isoformat()})"
        )
    if not listed:
        typer.echo("no nodes have registered", err=True)
        return
    rows: list[dict[str, Any]] = []
    for node in listed:
        mark = "*" if leader is not None and leader.node_id == node.id else " "
        rows.append(
            {
                "": mark,
                "node": node.id,
                "roles": ",".join(node.roles),
                "partitions": node.partitions or "all",
                "heartbeat": node.heartbeat_at.isoformat(timespec="seconds"),
            }
        )
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in rows[0]}
    typer.echo("  ".join(k.ljust(w) for k, w in widths.items()))
    for row in rows:
        typer.echo("  ".join(str(row[k]).ljust(w) for k, w in widths.items()))


@commands.command()
def breakers(db: DbOption = None, json: JsonOption = False) -> None:
    """List circuit breakers workers report open or half-open (per target host or command)."""

    async def body(app: AsyncApp) -> list[BreakerState]:
        return await app.breakers()

    listed = with_app(db, "default", body, create=False)
    if json:
        print_json({"breakers": to_jsonable(listed)})
        return
    print_table(
        ["target", "state", "failures", "opened", "retry at", "worker"],
        [
            (
                b.key,
                b.state,
                b.failures,
                b.opened_at.isoformat(timespec="seconds"),
                b.retry_at.isoformat(timespec="seconds"),
                b.worker_id,
            )
            for b in listed
        ],
        title="circuit breakers",
        empty="no breaker is open: every target host and command is answering",
    )
