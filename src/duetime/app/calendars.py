"""``app.calendars``: a tenant's named exclusion calendars (``schedules/calendars.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duetime._types import StoredCalendar
from duetime.app._service import Service
from duetime.app.audit import audited
from duetime.errors import ValidationError
from duetime.schedules.calendars import check_name, parse_rules, rule_document
from duetime.store.base import CalendarPutParams


class Calendars(Service):
    """The calendars of one tenant. A job names them (``calendars=[...]``); an occurrence one
    of them excludes is skipped (reason ``calendar:<name>``) or moved (``calendar_shift``)."""

    __slots__ = ()

    async def set(
        self, name: str, rules: Sequence[dict[str, Any]], *, description: str = ""
    ) -> StoredCalendar:
        """Create the calendar or replace its rules (idempotent). Rules are validated whole
        first (``ValidationError`` naming the rule, ``rules[1].weekdays``); the jobs that name
        it see the new rules from the scheduler's next tick."""
        check_name(name)
        if not isinstance(description, str) or len(description) > 500:
            raise ValidationError("description", "must be text of at most 500 characters")
        parsed = parse_rules(list(rules) if isinstance(rules, list | tuple) else rules)
        documents = [rule_document(r) for r in parsed]
        change = {"after": {"rules": documents, "description": description}}
        with audited(self, "calendar_set", "calendar", name=name, change=change):
            return await self.store.calendar_put(
                CalendarPutParams(
                    tenant=self.tenant, name=name, rules=documents, description=description
                )
            )

    async def get(self, name: str) -> StoredCalendar:
        """Raises NotFound."""
        return await self.store.calendar_get(self.tenant, check_name(name))

    async def find(self) -> list[StoredCalendar]:
        """Every calendar of the tenant, by name."""
        return await self.store.calendars_list(self.tenant)

    async def delete(self, name: str) -> None:
        """Raises NotFound, or Conflict while a job names it (the jobs named)."""
        with audited(self, "deleted", "calendar", name=check_name(name)):
            await self.store.calendar_delete(self.tenant, name)

    async def check_known(self, names: Sequence[str]) -> None:
        """``ValidationError("calendars")`` naming the first of ``names`` the tenant has no
        calendar of."""
        if not names:
            return
        found = await self.store.calendars_by_key([(self.tenant, n) for n in names])
        known = {c.name for c in found}
        missing = [n for n in names if n not in known]
        if missing:
            raise ValidationError(
                "calendars",
                f"unknown calendar {missing[0]!r} in tenant {self.tenant!r} "
                "(create it first: duetime calendars set, PUT /calendars/{name})",
            )
