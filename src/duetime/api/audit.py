"""``/api/v1/audit``: the audit trail of the tenant acted on — who created, changed, paused,
resumed, triggered, replayed, cancelled, deleted or revoked what, when, with the change
(docs/audit.md). Read by its admins (a superadmin: any tenant's, with ``?tenant=``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel, Field

from duetime.api.auth import Admin
from duetime.api.endpoint import Endpoint
from duetime.api.params import Cursor, Limit
from duetime.api.schemas import NO_NUL, PageOut

Text = Annotated[str | None, Query(max_length=200, pattern=NO_NUL)]


class AuditOut(BaseModel):
    id: uuid.UUID
    tenant: str
    at: datetime
    actor: str = Field(
        description="Who: `key:<API key id>/<role>` (REST), `cli:<OS user>@<key or database>` "
        "(CLI), the Python app's `actor` (default `python:<OS user>`)."
    )
    action: str = Field(description="created, updated, paused, resumed, triggered, …")
    subject_kind: str = Field(description="job, jobs (a bulk call), run, runs, api_key, tenant")
    subject_id: str | None
    subject_name: str | None
    change: Any = Field(
        description="What changed: `before` and `after` (the settings that differ) for "
        "updates; never a secret."
    )


class AuditPage(PageOut):
    items: list[AuditOut]


class ListAudit(Endpoint):
    """List the audit trail
    Newest first; filter by actor, action, subject (an id or a name) and time (`since`
    inclusive, `until` exclusive: ISO 8601 with an offset). One record per mutating call
    (a bulk call is one record), written in the same transaction as the change."""

    method, path, tag = "GET", "/audit", "audit"
    errors = (422,)

    async def handle(
        self,
        caller: Admin,
        actor: Text = None,
        action: Text = None,
        subject: Text = None,
        since: Annotated[datetime | None, Query(description="Recorded at or after.")] = None,
        until: Annotated[datetime | None, Query(description="Recorded before.")] = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> AuditPage:
        page = await caller.app.audit(
            actor=actor,
            action=action,
            subject=subject,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )
        return AuditPage.of(page, lambda r: AuditOut.model_validate(r, from_attributes=True))


ENDPOINTS: tuple[type[Endpoint], ...] = (ListAudit,)
