"""``/api/v1/outbox``: broker messages (docs/brokers.md) — the tenant's dead messages (refused
by their broker for good), their replay, and the outbox's depth."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

from duetime._outbox import OutboxRow
from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import Limit


class DeadMessageOut(BaseModel):
    id: int = Field(description="The message's outbox id (replay names it).")
    message_id: str = Field(description="`<run id>:<attempt>`: the same on every publish.")
    run_id: str
    attempt: int
    connection: str
    target: dict[str, str]
    headers: dict[str, str]
    body: str = Field(description="The payload as JSON text.")
    tries: int
    last_error: str | None = Field(description="The broker's refusal.")
    created_at: datetime
    dead_at: datetime | None

    @classmethod
    def of(cls, row: OutboxRow) -> DeadMessageOut:
        return cls(
            id=row.id,
            message_id=row.message_id,
            run_id=str(row.run_id),
            attempt=row.attempt,
            connection=row.connection,
            target={k: str(v) for k, v in row.target.items()},
            headers=row.headers,
            body=row.body,
            tries=row.tries,
            last_error=row.last_error,
            created_at=row.created_at,
            dead_at=row.dead_at,
        )


class DeadMessagesOut(BaseModel):
    messages: list[DeadMessageOut]
    next_after: int | None = Field(description="Pass as `after` for the next page; null: none.")


OutboxId = Annotated[int, Field(ge=1, le=2**63 - 1, strict=True)]
"""An outbox row's id (a bigint)."""


class ReplayMessagesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[OutboxId] | None = Field(
        None, min_length=1, max_length=1000, description="Outbox ids; omitted: every one."
    )


class ReplayMessagesOut(BaseModel):
    replayed: int


class DepthOut(BaseModel):
    pending: int = Field(description="Messages not yet published (every tenant's).")
    oldest: datetime | None = Field(description="When the oldest pending message was made.")
    dead: int
    by_connection: dict[str, int]


class ListDeadMessages(Endpoint):
    """List dead broker messages
    Messages their broker refused for good (unknown stream or exchange, unroutable, too
    large), oldest first."""

    method, path, tag = "GET", "/outbox/dead", "outbox"
    errors = (422,)

    async def handle(
        self,
        caller: Viewer,
        limit: Limit = 100,
        after: Annotated[
            int | None, Query(ge=0, le=2**63 - 1, description="The last id of a page.")
        ] = None,
    ) -> DeadMessagesOut:
        rows = await caller.app.outbox.dead(limit=limit, after=after)
        more = len(rows) == limit
        return DeadMessagesOut(
            messages=[DeadMessageOut.of(r) for r in rows],
            next_after=rows[-1].id if rows and more else None,
        )


class ReplayDeadMessages(Endpoint):
    """Replay dead broker messages
    Put them back in the outbox, due at once; the relays publish them again with their
    message ids."""

    method, path, tag = "POST", "/outbox/dead/replay", "outbox"
    errors = (422,)

    async def handle(self, body: ReplayMessagesIn, caller: Operator) -> ReplayMessagesOut:
        return ReplayMessagesOut(replayed=await caller.app.outbox.replay(body.ids))


class OutboxDepth(Endpoint):
    """Outbox depth
    Unpublished broker messages and the oldest one's age, and dead messages."""

    method, path, tag = "GET", "/outbox", "outbox"

    async def handle(self, caller: Viewer) -> DepthOut:
        depth = await caller.app.outbox.depth()
        return DepthOut(
            pending=depth.pending,
            oldest=depth.oldest,
            dead=depth.dead,
            by_connection=depth.by_connection,
        )


TAG = {"name": "outbox", "description": "Broker messages: dead ones and replays (issue 19)."}

ENDPOINTS: tuple[type[Endpoint], ...] = (ListDeadMessages, ReplayDeadMessages, OutboxDepth)
