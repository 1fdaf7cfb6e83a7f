"""``app.audit``: read the audit trail of the app's tenant, and the one call every mutating
service method makes to be recorded (docs/decisions/0021).

Recording is one ``with`` around the store call that makes the change::

    with audited(self, "paused", "job", name=job):
        return await self.store.job_set_status(...)

The store inserts the entry in that change's transaction (``duetime._audit``); a method of a
new feature is covered by the same one line. The actor is the app's (``App(actor=…)``, the
REST API's key, the CLI's user): see :func:`default_actor`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from duetime._audit import AuditEntry, AuditRecord, os_user, recording
from duetime._types import Page
from duetime.app._service import Service, check_limit, check_window, read_cursor
from duetime.errors import ValidationError
from duetime.store.base import AuditListParams


def default_actor() -> str:
    """Who a Python app acts as when not told: ``python:<OS user>``."""
    return f"python:{os_user()}"


def check_actor(actor: object) -> str:
    if not isinstance(actor, str) or not 1 <= len(actor) <= 200 or not actor.isprintable():
        raise ValidationError("actor", "must be 1-200 printable characters")
    return actor


@contextlib.contextmanager
def audited(
    service: Service,
    action: str,
    kind: str,
    *,
    subject_id: object = None,
    name: object = None,
    change: dict[str, Any] | None = None,
    tenant: str | None = None,
    needs_change: bool = False,
    actor: str | None = None,
) -> Iterator[AuditEntry]:
    """Record the store write made inside the block as one audit entry of ``service``'s
    tenant and actor (or ``tenant``, ``actor``): ``action`` on the ``kind`` named by
    ``subject_id`` and/or ``name`` (a job given by id or name: pass it as ``name``; the store
    fills in what it learns). ``needs_change``: the store fills in the change, and a call that
    changed nothing is not recorded."""
    subject: str | None = None
    if isinstance(name, uuid.UUID):
        subject_id, name = name, None
    elif isinstance(name, str):
        try:
            subject_id, name = uuid.UUID(name), None
        except ValueError:
            subject = name
    entry = AuditEntry(
        tenant=service.tenant if tenant is None else tenant,
        actor=service.actor if actor is None else actor,
        action=action,
        subject_kind=kind,
        subject_id=None if subject_id is None else str(subject_id),
        subject_name=subject,
        change=change,
        needs_change=needs_change,
    )
    with recording(entry):
        yield entry


class Audit(Service):
    """The audit trail of one tenant (``app.audit``; calling it finds records)."""

    __slots__ = ()

    async def find(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        subject: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[AuditRecord]:
        """This tenant's audit records, newest first, a page at a time (pass the page's
        ``next_cursor`` as ``cursor``, with the same filters): by ``actor``, ``action``,
        ``subject`` (an id or a name), recorded at or after ``since`` and before ``until``
        (aware instants). Raises ValidationError."""
        check_limit(limit)
        check_window(since, until)
        before = read_cursor(cursor, AuditListParams.before_cursor)
        return await self.store.audit_list(
            AuditListParams(
                tenant=self.tenant,
                actor=actor,
                action=action,
                subject=subject,
                since=since,
                until=until,
                limit=limit,
                before=before,
            )
        )

    __call__ = find
    """``app.audit(action="paused")`` is ``app.audit.find(action="paused")``."""
