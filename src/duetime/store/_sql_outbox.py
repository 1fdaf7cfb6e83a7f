"""The transactional outbox, once for both dialects (:class:`duetime._outbox.OutboxStore`;
SQL in each dialect's ``queries/outbox.sql``; docs/brokers.md, decision 0026).

A broker run's message exists exactly when its success does: on PostgreSQL the completion
statement inserts it (``runs_complete_outbox``: one round trip, docs/decisions/0040); on SQLite
:meth:`SQLOutbox._outbox_insert` runs inside the transaction of ``runs_complete`` that applied
the completions. The relay's methods are one statement each (a claim locks with ``FOR UPDATE
SKIP LOCKED`` on PostgreSQL; SQLite has one writer).

Run events (:class:`duetime._outbox.RunEvents`, set on the store by the process as
``run_events``) are outbox rows too, written by :meth:`SQLOutbox._run_events` (also after
:meth:`SQLOutbox._end_runs`, the statements that end a job's pending runs) and
:meth:`SQLOutbox._skip_events` in the transaction of the change they report; with none set,
neither writes anything and the callers keep their statements as they were."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duetime import _json
from duetime._outbox import (
    SKIP_EVENTS,
    OutboxClaimParams,
    OutboxDepth,
    OutboxRetry,
    OutboxRow,
    RunEvents,
)
from duetime.store._sql_surface import SQLSurface
from duetime.store.base import PlannedSkip, RunCompletion


def outbox_records(completions: Sequence[RunCompletion]) -> list[dict[str, Any]]:
    """The outbox rows of the completions that carry a message (succeeded broker runs), each
    with its attempt's fencing ``token`` (PostgreSQL's completion statement joins a message to
    its applied (run, token) pair; the insert reads the other fields)."""
    return [
        {
            "message_id": m.message_id,
            "tenant": m.tenant,
            "run_id": m.run_id,
            "token": c.token,
            "attempt": m.attempt,
            "connection": m.connection,
            "target": dict(m.target),
            "body": m.body,
            "headers": dict(m.headers),
        }
        for c in completions
        if (m := c.outbox) is not None
    ]


class SQLOutbox(SQLSurface):
    run_events: RunEvents | None = None
    """The operator's run events (``DUETIME_RUN_EVENTS``), or None: no event is written."""

    def _fixed_now(self, now: datetime | None) -> datetime | None:
        raise NotImplementedError

    def _records(self, rows: Sequence[dict[str, Any]]) -> str:
        raise NotImplementedError

    async def _audit(self, conn: Any, now: datetime | None = None) -> None:
        raise NotImplementedError

    async def _outbox_insert(
        self, conn: Any, completions: Sequence[RunCompletion], now: datetime
    ) -> None:
        """Inside the transaction that applied ``completions``: insert the message of each
        one that carries one (only succeeded broker runs do). PostgreSQL's completion inserts
        them itself (``runs_complete_outbox``); SQLite calls this."""
        rows = outbox_records(completions)
        if rows:
            await self._exec(conn, "outbox_insert", batch=self._records(rows), now=now)

    def _events_for(self, kinds: frozenset[str]) -> RunEvents | None:
        """The run events to write for a change that may report ``kinds``, or None."""
        events = self.run_events
        return events if events is not None and events.kinds & kinds else None

    def _run_event_values(
        self, ids: Sequence[uuid.UUID], kinds: frozenset[str], now: datetime | None
    ) -> dict[str, Any] | None:
        """The parameters of ``outbox_run_events`` for the runs ``ids`` and the wanted ones of
        ``kinds``; None when there is nothing to write."""
        events = self._events_for(kinds)
        if events is None or not ids:
            return None
        return {
            "ids": list(ids),
            "target": _json.dumps(dict(events.target)),
            "now": now,
            **events.sql_params(kinds),
        }

    async def _run_events(
        self,
        conn: Any,
        ids: Sequence[uuid.UUID],
        kinds: frozenset[str],
        now: datetime | None,
    ) -> None:
        """Inside the transaction that changed the runs ``ids``: the event each run's state
        now names, for those of ``kinds`` the operator wants (one statement; none when no
        run events are set)."""
        values = self._run_event_values(ids, kinds, now)
        if values is not None:
            await self._exec(conn, "outbox_run_events", **values)

    async def _end_runs(
        self, conn: Any, name: str, kinds: frozenset[str], now: datetime, **values: Any
    ) -> int:
        """Run the statement ``name``, which ends runs and returns their ids, inside the
        caller's transaction, then the events of ``kinds`` of the runs it ended (none when no
        run events are set: the statement alone). Returns how many runs it ended."""
        rows = await self._all(conn, name, now=now, **values)
        await self._run_events(conn, [self.codec.uuid(r["id"]) for r in rows], kinds, now)
        return len(rows)

    async def _skip_events(
        self, conn: Any, skips: Sequence[tuple[uuid.UUID, PlannedSkip]], now: datetime
    ) -> None:
        """Inside the scheduler's transaction that recorded ``skips``: one ``skipped`` event
        per skip range, when the operator wants them."""
        events = self._events_for(SKIP_EVENTS)
        if events is None or not skips:
            return
        await self._exec(
            conn,
            "outbox_skip_events",
            job_id=[j for j, _ in skips],
            first_at=[s.first for _, s in skips],
            last_at=[s.last for _, s in skips],
            count=[s.count for _, s in skips],
            reason=[s.reason for _, s in skips],
            target=_json.dumps(dict(events.target)),
            now=now,
            **events.sql_params(SKIP_EVENTS),
        )

    async def outbox_claim(self, params: OutboxClaimParams) -> list[OutboxRow]:
        if not params.connections:
            return []
        async with self._write() as conn:
            rows = await self._all(
                conn,
                "outbox_claim",
                connections=list(params.connections),
                limit=params.limit,
                lease=params.lease,
                now=self._fixed_now(params.now),
            )
        return sorted((self._outbox_row(r) for r in rows), key=lambda r: r.id)

    async def outbox_sent(self, ids: Sequence[int], now: datetime | None = None) -> int:
        if not ids:
            return 0
        async with self._write() as conn:
            return await self._exec(conn, "outbox_sent", ids=list(ids), now=self._fixed_now(now))

    async def outbox_retry(
        self, retries: Sequence[OutboxRetry], now: datetime | None = None
    ) -> int:
        if not retries:
            return 0
        batch = _json.dumps([[r.id, r.delay, r.error] for r in retries])
        async with self._write() as conn:
            return await self._exec(conn, "outbox_retry", batch=batch, now=self._fixed_now(now))

    async def outbox_dead(
        self, dead: Sequence[tuple[int, str]], now: datetime | None = None
    ) -> int:
        if not dead:
            return 0
        batch = _json.dumps([[i, error] for i, error in dead])
        async with self._write() as conn:
            return await self._exec(conn, "outbox_dead", batch=batch, now=self._fixed_now(now))

    async def outbox_dead_list(
        self, tenant: str | None, limit: int = 100, after_id: int | None = None
    ) -> list[OutboxRow]:
        async with self._read() as conn:
            rows = await self._all(
                conn, "outbox_dead_list", tenant=tenant, limit=limit, after_id=after_id or 0
            )
        return [self._outbox_row(r) for r in rows]

    async def outbox_replay(
        self, tenant: str | None, ids: Sequence[int] | None, now: datetime | None = None
    ) -> int:
        async with self._tx() as conn:
            count = await self._exec(
                conn,
                "outbox_replay",
                tenant=tenant,
                ids=None if ids is None else list(ids),
                now=self._fixed_now(now),
            )
            if count:
                await self._audit(conn, now)
        return count

    async def outbox_depth(self, now: datetime | None = None) -> OutboxDepth:
        async with self._read() as conn:
            pending = await self._all(conn, "outbox_pending_counts")
            dead = await self._one(conn, "outbox_dead_count")
        by_connection = {r["connection"]: int(r["n"]) for r in pending}
        oldest = [t for r in pending if (t := self.codec.instant(r["oldest"])) is not None]
        return OutboxDepth(
            pending=sum(by_connection.values()),
            oldest=min(oldest) if oldest else None,
            dead=int(dead["n"]),
            by_connection=by_connection,
        )

    async def outbox_prune(self, before: datetime, limit: int = 1000) -> int:
        async with self._write() as conn:
            return await self._exec(conn, "outbox_prune", before=before, limit=limit)

    def _outbox_row(self, r: Any) -> OutboxRow:
        c = self.codec
        created = c.instant(r["created_at"])
        assert created is not None
        return OutboxRow(
            id=int(r["id"]),
            message_id=r["message_id"],
            tenant=r["tenant"],
            run_id=c.uuid(r["run_id"]),
            attempt=int(r["attempt"]),
            connection=r["connection"],
            target=c.json(r["target"]),
            body=r["body"],
            headers=c.json(r["headers"]),
            created_at=created,
            tries=int(r["tries"]),
            last_error=r["last_error"],
            sent_at=c.instant(r["sent_at"]),
            dead_at=c.instant(r["dead_at"]),
        )


def completion_event_runs(applied: Sequence[RunCompletion]) -> list[uuid.UUID]:
    """The runs whose applied completion reports an event: all but attempts handed back
    unstarted (``refund_attempt``: nothing happened to report)."""
    return [c.run_id for c in applied if not c.refund_attempt]
