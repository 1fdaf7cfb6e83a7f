"""SQLite: long-run writes (progress, checkpoints, cancel flags), each fenced by (id, token).

Exactly-once delivery is refused: the worker's SQLite connection is shared by the whole
process and serialized, so a handler's transaction cannot stay open beside it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

import aiosqlite

from duetime.errors import UnsupportedFeature
from duetime.store import _rows
from duetime.store._rows import SQLiteCodec
from duetime.store.base import ClaimedRun, RunCheckpointParams, RunProgressParams


class _Host(Protocol):
    """What the mixin needs from :class:`~duetime.store.sqlite.store.SQLiteStore`."""

    def _tx(self) -> contextlib.AbstractAsyncContextManager[aiosqlite.Connection]: ...
    def _read(self) -> contextlib.AbstractAsyncContextManager[aiosqlite.Connection]: ...
    async def _exec(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> int: ...
    async def _one(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> Any: ...
    async def _all(self, conn: aiosqlite.Connection, name: str, /, **values: Any) -> list[Any]: ...


class SQLiteLongRuns:
    """Mixed into SQLiteStore: the long-run methods of the Store protocol."""

    async def run_progress_set(self: _Host, params: RunProgressParams) -> bool:
        async with self._tx() as conn:
            changed = await self._exec(
                conn,
                "run_progress_set",
                id=params.run_id,
                token=params.token,
                fraction=params.fraction,
                message=params.message,
            )
        return changed == 1

    async def run_checkpoint_set(self: _Host, params: RunCheckpointParams) -> bool:
        async with self._tx() as conn:
            changed = await self._exec(
                conn,
                "run_checkpoint_set",
                id=params.run_id,
                token=params.token,
                checkpoint=params.checkpoint,
            )
        return changed == 1

    async def runs_held(self: _Host, worker_id: str) -> list[ClaimedRun]:
        async with self._read() as conn:
            rows = await self._all(conn, "runs_held", worker_id=worker_id)
        return [_rows.claimed_from_row(r, SQLiteCodec()) for r in rows]

    async def runs_cancel_requested(
        self: _Host, runs: Sequence[tuple[uuid.UUID, int]]
    ) -> set[uuid.UUID]:
        found: set[uuid.UUID] = set()
        if not runs:
            return found
        async with self._read() as conn:
            for run_id, token in runs:
                if await self._one(conn, "run_cancel_requested", id=run_id, token=token):
                    found.add(run_id)
        return found

    async def exactly_once_begin(self) -> NoReturn:
        raise UnsupportedFeature(
            "exactly_once delivery needs PostgreSQL; SQLite cannot commit a handler's writes "
            "with the run's completion"
        )
