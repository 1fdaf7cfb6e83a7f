"""The audit trail's value types and the entry of the call being made (docs/decisions/0021).

A mutating call of the app opens :func:`recording` with one :class:`AuditEntry` (who, what, on
what); the store's write that makes the change takes it with :func:`take` and inserts it in
the same transaction, just before the commit, so the change and its record commit or roll back
together. The entry travels in a context variable, so no store method's parameters change and
an unaudited call (the scheduler, the workers, maintenance) pays one ``ContextVar.get``.

Contracts:

- at most one record per entry: :func:`take` hands the entry out once (a call that writes in
  several transactions — a resume that then completes a bounded job, a bulk call in batches —
  records in the first that takes it, or explicitly in the last: see ``app/bulk.py``);
- a call that changes nothing takes nothing (a trigger answered by an earlier run of the same
  idempotency key, a failed write): no record;
- never a secret: :func:`job_change` redacts HTTP target headers; keys are recorded by id,
  role and name only, webhook secrets never.
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from duetime._redact import redact_target

ACTIONS = (
    "created",
    "updated",
    "paused",
    "resumed",
    "cancelled",
    "deleted",
    "triggered",
    "replayed",
    "revoked",
    "limits_set",
    "alert_webhooks_set",
    "webhook_secret_rotated",
)
"""The actions recorded by this release (others' features add theirs: the column is text)."""

MAX_IDS = 100
"""Ids a bulk call's record lists at most (with the full count beside them)."""


@dataclass(slots=True)
class AuditEntry:
    """One mutating call, to be recorded by the store write that makes its change. Mutable:
    that write may fill in what only it knows (the subject's id, the state before)."""

    tenant: str
    actor: str
    action: str
    subject_kind: str
    subject_id: str | None = None
    subject_name: str | None = None
    change: dict[str, Any] | None = None
    needs_change: bool = False
    """The store fills in the change (``note_job``); a call that changed nothing (a job
    declared again unchanged) is then not recorded."""
    taken: bool = False


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """A recorded call, as read back (newest first)."""

    id: uuid.UUID
    tenant: str
    at: datetime
    actor: str
    action: str
    subject_kind: str
    subject_id: str | None
    subject_name: str | None
    change: dict[str, Any] | None


_PENDING: ContextVar[AuditEntry | None] = ContextVar("duetime_audit", default=None)


@contextlib.contextmanager
def recording(entry: AuditEntry) -> Iterator[AuditEntry]:
    """Make ``entry`` the call's pending record for the ``with`` block (tasks started inside
    it inherit it)."""
    token = _PENDING.set(entry)
    try:
        yield entry
    finally:
        _PENDING.reset(token)


def pending() -> AuditEntry | None:
    """The call's entry not yet taken, or None (cheap: the trigger path asks it)."""
    entry = _PENDING.get()
    return None if entry is None or entry.taken else entry


def take() -> AuditEntry | None:
    """The call's entry, handed out once: the caller must insert it in its transaction (None
    also for an entry whose change was never filled in: nothing changed)."""
    entry = pending()
    if entry is not None:
        entry.taken = True
        if entry.needs_change and entry.change is None:
            return None
    return entry


def note_job(before: Any | None, after: Any) -> None:
    """A job was written (``before`` None: created): the pending entry's subject, action and
    change, the settings that differ. No-op without a pending entry; an update that changed
    no setting leaves the change unset (no record, see ``needs_change``)."""
    entry = pending()
    if entry is None:
        return
    entry.subject_id, entry.subject_name = str(after.id), after.name
    if before is None or entry.action == "created":
        entry.action, entry.change = "created", {"after": job_settings(after)}
        return
    change = job_change(before, after)
    entry.action = "updated"
    entry.change = change if change["after"] or change["before"] else entry.change


def note(
    *,
    subject_id: object = None,
    subject_name: str | None = None,
    change: dict[str, Any] | None = None,
    tenant: str | None = None,
) -> None:
    """Fill in what the store learns inside the transaction (no-op without a pending entry).
    ``change`` is merged onto the entry's."""
    entry = pending()
    if entry is None:
        return
    if tenant is not None:
        entry.tenant = tenant
    if subject_id is not None:
        entry.subject_id = str(subject_id)
    if subject_name is not None:
        entry.subject_name = subject_name
    if change is not None:
        entry.change = {**(entry.change or {}), **change}


_NOT_SETTINGS = frozenset(
    {"id", "tenant", "created_at", "updated_at", "next_fire_at", "next_occurrence_at", "created"}
)
_NOT_SETTINGS_ALSO = frozenset({"partition", "runs_created"})


def job_settings(job: Any) -> dict[str, Any]:
    """A job's settings as JSON-able values (what a user declares; not its clock state), its
    target's header values redacted."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(job):
        if f.name in _NOT_SETTINGS or f.name in _NOT_SETTINGS_ALSO:
            continue
        value = getattr(job, f.name)
        if f.name == "target":
            value = redact_target(value)
        out[f.name] = _plain(value)
    return out


def job_change(before: Any | None, after: Any) -> dict[str, Any]:
    """``{"before": {...}, "after": {...}}`` of the settings that differ (all of ``after``'s
    when there was no job before)."""
    new = job_settings(after)
    if before is None:
        return {"after": new}
    old = job_settings(before)
    changed = sorted(k for k in new.keys() | old.keys() if new.get(k) != old.get(k))
    return {
        "before": {k: old.get(k) for k in changed},
        "after": {k: new.get(k) for k in changed},
    }


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)  # enums, timedeltas, uuids


def url_origin(url: str) -> str:
    """A URL as the trail may show it: scheme and host only (a webhook URL's path or query
    is often its credential, as in ``hooks.slack.com/services/…``)."""
    parts = urlsplit(url)
    return (
        f"{parts.scheme}://{parts.hostname or ''}{'' if parts.port is None else f':{parts.port}'}/…"
    )


def os_user() -> str:
    """The operating-system user running this process (``unknown`` if none can be told)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return "unknown"
