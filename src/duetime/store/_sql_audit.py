"""The audit trail's store methods (``queries/audit.sql`` of each dialect), written once for
both stores; mixed into :class:`~duetime.store._sql.SQLStore` (docs/decisions/0021).

:meth:`SQLAudit._audit` is what a mutating method calls as the last statement of its
transaction: it inserts the call's pending entry (``duetime._audit``), if any and not yet
taken, so the record commits or rolls back with the change. Without an entry it costs one
``ContextVar.get`` and no statement.
"""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import datetime
from typing import Any

from duetime import _json
from duetime._audit import AuditEntry, AuditRecord, note, pending, take
from duetime._types import Page
from duetime.store._sql_surface import SQLSurface
from duetime.store.base import AuditListParams, AuditPruneParams

_last_ns = 0


def ordered_id() -> uuid.UUID:
    """A UUIDv7: milliseconds since the epoch, then a sub-millisecond count that grows in this
    process, then random bits — records of one instant (a frozen clock, one transaction's
    microsecond) list in the order this process wrote them."""
    global _last_ns
    _last_ns = max(time.time_ns(), _last_ns + 256)
    millis, within = divmod(_last_ns, 1_000_000)
    value = (millis << 80) | (0x7 << 76) | ((within >> 8) << 64)
    value |= (0b10 << 62) | secrets.randbits(62)
    return uuid.UUID(int=value)


def audit_values(entry: AuditEntry, now: datetime | None) -> dict[str, Any]:
    """The ``audit_insert`` parameters of an entry (``now`` None: the database's clock)."""
    return {
        "id": ordered_id(),
        "tenant": entry.tenant,
        "now": now,
        "actor": entry.actor,
        "action": entry.action,
        "subject_kind": entry.subject_kind,
        "subject_id": entry.subject_id,
        "subject_name": entry.subject_name,
        "change": None if entry.change is None else _json.dumps(entry.change),
    }


class SQLAudit(SQLSurface):
    """Record, read and prune the audit trail over the store's connection surface."""

    audits_in_statement = False
    """Whether the one-statement trigger writes its audit record itself (PostgreSQL: a
    data-modifying CTE, ``run_trigger_by_*_audited``); else ``_audit`` follows it in the same
    transaction (SQLite's ``_write`` is one ``BEGIN IMMEDIATE``)."""

    def _fixed_now(self, now: datetime | None) -> datetime | None:
        raise NotImplementedError

    async def _audit(self, conn: Any, now: datetime | None = None) -> None:
        """Insert the call's pending audit entry in ``conn``'s transaction (once per entry)."""
        entry = take()
        if entry is not None:
            await self._audit_insert(conn, audit_values(entry, self._fixed_now(now)))

    async def _audit_insert(self, conn: Any, values: dict[str, Any]) -> None:
        """Run ``audit_insert`` (SQLite overrides it: one trip to its connection's thread)."""
        await self._exec(conn, "audit_insert", **values)

    async def _audited_one(
        self, name: str, /, *, subject_of_row: bool = False, **values: Any
    ) -> Any:
        """``_write_one`` of a mutating statement; with a pending audit entry, in a
        transaction that records it too when the statement returned a row (made a change).
        ``subject_of_row``: the row's ``id`` and ``tenant`` are the record's subject and
        tenant (a key revoked by id in any tenant)."""
        if pending() is None:
            return await self._write_one(name, **values)
        async with self._tx() as conn:
            row = await self._one(conn, name, **values)
            if row is not None:
                if subject_of_row:
                    note(subject_id=self.codec.uuid(row["id"]), tenant=row["tenant"])
                await self._audit(conn)
            return row

    async def audit_record(self, entry: AuditEntry) -> None:
        """Insert ``entry`` in a transaction of its own: for a call whose change spans
        transactions already committed (a bulk call's batches; see ``app/bulk.py``)."""
        async with self._tx() as conn:
            await self._exec(conn, "audit_insert", **audit_values(entry, self._fixed_now(None)))

    async def audit_list(self, params: AuditListParams) -> Page[AuditRecord]:
        before_at, before_id = params.before or (None, None)
        return await self._read_page(
            "audit_list",
            params.limit,
            self._audit_record,
            lambda last: AuditListParams.cursor_of(last.at, last.id),
            tenant=params.tenant,
            actor=params.actor,
            action=params.action,
            subject=params.subject,
            since=params.since,
            until=params.until,
            before_at=before_at,
            before_id=before_id,
        )

    async def audit_prune(self, params: AuditPruneParams) -> int:
        """Up to ``params.limit`` records older than ``params.before``: retention's delete,
        the only one; leader-fenced like ``history_prune``."""
        async with self._tx() as conn:
            if not await self._holds(conn, params.leader, await self._now(conn, None)):
                return 0
            return await self._exec(conn, "audit_prune", before=params.before, limit=params.limit)

    def _audit_record(self, row: Any) -> AuditRecord:
        c = self.codec
        at = c.instant(row["at"])
        assert at is not None  # NOT NULL column
        return AuditRecord(
            id=c.uuid(row["id"]),
            tenant=row["tenant"],
            at=at,
            actor=row["actor"],
            action=row["action"],
            subject_kind=row["subject_kind"],
            subject_id=row["subject_id"],
            subject_name=row["subject_name"],
            change=c.json(row["change"]),
        )
