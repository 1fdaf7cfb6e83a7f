"""The connection surface each dialect supplies (see ``store/_sql.py``'s docstring), declared
once for :class:`~duetime.store._sql_monitoring.SQLObservability` and
:class:`~duetime.store._sql.SQLStore`, with the few helpers every method over it shares.

The ``_read_*`` / ``_write_*`` helpers only name a connection scope around one named
statement (``_read_all(name, **values)`` is ``async with self._read() as conn: return await
self._all(conn, name, **values)``): the statement, its parameters and its round trip are the
caller's, and the query name stays at the call site.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from duetime._types import Page
from duetime.store._rows import Codec
from duetime.store.base import LeaderFence

_T = TypeVar("_T")

Answer = Callable[[], Awaitable[list[Any]]]
"""The rows of a statement sent with :meth:`SQLSurface._send`, read when awaited."""


class SQLSurface:
    """What a dialect implements (``_tx`` … ``_now``) and what is built on it once."""

    codec: Codec

    # --- the dialect's surface (implemented by each store) ----------------------------------

    def _tx(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _write(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def _all(self, conn: Any, name: str, /, **values: Any) -> list[Any]:
        raise NotImplementedError

    async def _tuples(self, conn: Any, name: str, /, **values: Any) -> list[Sequence[Any]]:
        """:meth:`_all`'s rows as values by position, for statements whose rows are decoded by
        position (the claim's): no mapping made per row. SQLite's rows are indexable as they
        come; PostgreSQL's are plain tuples instead of dicts."""
        return await self._all(conn, name, **values)

    async def _exec(self, conn: Any, name: str, /, **values: Any) -> int:
        raise NotImplementedError

    async def _now(self, conn: Any, now: datetime | None) -> datetime:
        raise NotImplementedError

    async def _send(self, conn: Any, name: str, /, **values: Any) -> Answer:
        """Send a statement whose rows the caller reads later, by awaiting the answer returned.
        Here it runs at once; PostgreSQL queues it in the connection's pipeline instead (it
        travels with the next statement waited for, or the commit, and is answered then)."""
        rows = await self._all(conn, name, **values)

        async def answer() -> list[Any]:
            return rows

        return answer

    # --- one statement in a scope of its own ----------------------------------------------

    async def _one(self, conn: Any, name: str, /, **values: Any) -> Any:
        rows = await self._all(conn, name, **values)
        return rows[0] if rows else None

    async def _scoped(
        self,
        scope: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
        run: Callable[..., Awaitable[_T]],
        name: str,
        values: dict[str, Any],
    ) -> _T:
        async with scope() as conn:
            return await run(conn, name, **values)

    async def _read_all(self, name: str, /, **values: Any) -> list[Any]:
        return await self._scoped(self._read, self._all, name, values)

    async def _read_page(
        self,
        name: str,
        limit: int,
        item: Callable[[Any], _T],
        cursor_of: Callable[[_T], str],
        /,
        **values: Any,
    ) -> Page[_T]:
        """A page of up to ``limit`` items of the list query ``name``, asked for ``limit + 1``
        rows (the extra row only says a next page exists); the page's cursor is ``cursor_of``
        its last item."""
        rows = await self._read_all(name, limit=limit + 1, **values)
        items = [item(r) for r in rows[:limit]]
        return Page(items, cursor_of(items[-1]) if len(rows) > limit else None)

    async def _read_one(self, name: str, /, **values: Any) -> Any:
        return await self._scoped(self._read, self._one, name, values)

    async def _write_all(self, name: str, /, **values: Any) -> list[Any]:
        return await self._scoped(self._write, self._all, name, values)

    async def _write_one(self, name: str, /, **values: Any) -> Any:
        return await self._scoped(self._write, self._one, name, values)

    async def _write_exec(self, name: str, /, **values: Any) -> int:
        return await self._scoped(self._write, self._exec, name, values)

    # --- leadership fence -------------------------------------------------------------------

    async def _holds(self, conn: Any, fence: LeaderFence | None, now: datetime) -> bool:
        """Inside a transaction: True if ``fence`` still leads; on PostgreSQL the leader row
        is locked (FOR KEY SHARE) so a takeover waits until this transaction ends (the
        leader's own renewal does not)."""
        if fence is None:
            return True
        row = await self._one(conn, "leader_hold", node_id=fence.node_id, term=fence.term, now=now)
        return row is not None
