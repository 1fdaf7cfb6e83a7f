"""The calendar and backfill methods of the Store protocol (``queries/calendars.sql`` of each
dialect), written once for both stores; mixed into :class:`~duetime.store._sql.SQLStore`.

Calendars are plain rows (their rules a JSON list the store does not read: the pure
``schedules/calendars.py`` does); a calendar a job names cannot be deleted (Conflict), so a
job never names one that is gone — except through a race with the deleting transaction, and
the scheduler then treats the missing calendar as excluding nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duetime import _json
from duetime._types import StoredCalendar
from duetime.errors import Conflict, NotFound
from duetime.store._sql_surface import SQLSurface
from duetime.store.base import CalendarPutParams


def calendar_from_row(row: Any, c: Any) -> StoredCalendar:
    rules = c.json(row["rules"])
    return StoredCalendar(
        tenant=row["tenant"],
        name=row["name"],
        rules=list(rules),
        description=row["description"],
        created_at=c.instant(row["created_at"]),
        updated_at=c.instant(row["updated_at"]),
    )


def _like_quoted(name: str) -> str:
    """A LIKE pattern that finds ``"name"`` in a JSON list of names (``\\`` escapes)."""
    escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f'%"{escaped}"%'


class SQLCalendars(SQLSurface):
    """Calendars (``calendar_*``) and the run reads a backfill needs, over the surface."""

    if TYPE_CHECKING:  # SQLAudit's, beside this mixin in SQLStore (a stub here would hide it)

        async def _audit(self, conn: Any, now: datetime | None = None) -> None: ...

        async def _audited_one(
            self, name: str, /, *, subject_of_row: bool = False, **values: Any
        ) -> Any: ...

    def _fixed_now(self, now: datetime | None) -> datetime | None:
        raise NotImplementedError

    async def calendar_put(self, params: CalendarPutParams) -> StoredCalendar:
        row = await self._audited_one(
            "calendar_put",
            tenant=params.tenant,
            name=params.name,
            description=params.description,
            rules=_json.dumps(params.rules),
            now=self._fixed_now(params.now),
        )
        return calendar_from_row(row, self.codec)

    async def calendar_get(self, tenant: str, name: str) -> StoredCalendar:
        row = await self._read_one("calendar_get", tenant=tenant, name=name)
        if row is None:
            raise NotFound(f"calendar {name!r} not found")
        return calendar_from_row(row, self.codec)

    async def calendars_list(self, tenant: str) -> list[StoredCalendar]:
        rows = await self._read_all("calendars_list", tenant=tenant)
        return [calendar_from_row(r, self.codec) for r in rows]

    async def calendars_by_key(
        self, keys: Sequence[tuple[str, str]], conn: Any = None
    ) -> list[StoredCalendar]:
        """The calendars of ``keys`` ((tenant, name) pairs) that exist; inside a transaction
        when ``conn`` is given."""
        if not keys:
            return []
        values = {"tenants": [k[0] for k in keys], "names": [k[1] for k in keys]}
        if conn is None:
            rows = await self._read_all("calendars_by_key", **values)
        else:
            rows = await self._all(conn, "calendars_by_key", **values)
        return [calendar_from_row(r, self.codec) for r in rows]

    async def calendar_delete(self, tenant: str, name: str) -> None:
        async with self._tx() as conn:
            users = await self._all(
                conn, "calendar_users", tenant=tenant, name=name, pattern=_like_quoted(name)
            )
            if users:
                names = ", ".join(repr(r["name"]) for r in users)
                raise Conflict(
                    f"calendar {name!r} is named by jobs ({names}{', …' if len(users) == 5 else ''}"
                    "): remove it from them first"
                )
            if not await self._exec(conn, "calendar_delete", tenant=tenant, name=name):
                raise NotFound(f"calendar {name!r} not found")
            await self._audit(conn)

    async def runs_occurrences(
        self, job_id: uuid.UUID, since: datetime, until: datetime
    ) -> set[datetime]:
        rows = await self._read_all("runs_occurrences", job_id=job_id, since=since, until=until)
        return {self.codec.instant(r["scheduled_for"]) for r in rows}  # type: ignore[misc]

    async def runs_origin_states(
        self, tenant: str, job_id: uuid.UUID, origin: str
    ) -> dict[str, int]:
        rows = await self._read_all(
            "runs_origin_states", tenant=tenant, job_id=job_id, origin=origin
        )
        return {r["state"]: int(r["n"]) for r in rows}
