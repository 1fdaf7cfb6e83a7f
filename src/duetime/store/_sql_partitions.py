"""Partition leases, once for both dialects (:class:`duetime._partitions.PartitionLeaseStore`;
SQL in each dialect's ``queries/partition_leases.sql``; docs/decisions/0028).

Each method is one transaction that reads its instant once (the store's clock: a test clock
or the database's) and stamps every statement with it. On PostgreSQL a takeover locks lease
rows ``FOR UPDATE`` that a materializing transaction of the previous owner holds ``FOR KEY
SHARE`` (``jobs_due_leased``): it waits for that transaction to commit. A renewal or a release
is a no-key update: it never waits for the node's own materializer. Every claim, leave and
beat first locks all the rows it may change in key order, in one statement, and changes no
other row after: two nodes whose views of the members (or instants) differ never lock rows in
opposite orders, so they cannot deadlock. On SQLite ``BEGIN IMMEDIATE`` serializes them all."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from duetime._partitions import PartitionClaimParams, PartitionLease
from duetime.store import _rows
from duetime.store._rows import Codec
from duetime.store._sql_surface import SQLSurface


class SQLPartitionLeases(SQLSurface):
    codec: Codec

    async def partition_members_beat(
        self, node_id: str, ttl: float, now: datetime | None = None
    ) -> tuple[str, ...]:
        async with self._tx() as conn:
            at = await self._now(conn, now)
            await self._exec(conn, "partition_members_lock", node_id=node_id, now=at)
            await self._exec(conn, "partition_members_prune", now=at)
            await self._exec(conn, "partition_member_beat", node_id=node_id, ttl=ttl, now=at)
            rows = await self._all(conn, "partition_members_live", now=at)
        return tuple(r["node_id"] for r in rows)

    async def partition_leases_claim(
        self, params: PartitionClaimParams
    ) -> tuple[PartitionLease, ...]:
        want = sorted(set(params.want))
        rows: list[Any] = []
        async with self._tx() as conn:
            at = await self._now(conn, params.now)
            locked = await self._lock_leases(conn, params.node_id, want, at)
            values = {"node_id": params.node_id, "want": want, "ttl": params.ttl, "now": at}
            await self._exec(
                conn,
                "partition_leases_release",
                node_id=params.node_id,
                keep=want,
                locked=locked,
                now=at,
            )
            if want:
                for name in ("partition_leases_renew", "partition_leases_take"):
                    rows += await self._all(conn, name, **values, locked=locked)
                rows += await self._all(conn, "partition_leases_insert", **values)
        return tuple(sorted((self._lease(r) for r in rows), key=lambda lease: lease.partition))

    async def partition_leases_leave(self, node_id: str, now: datetime | None = None) -> None:
        async with self._tx() as conn:
            at = await self._now(conn, now)
            locked = await self._lock_leases(conn, node_id, [], at)
            await self._exec(
                conn, "partition_leases_release", node_id=node_id, keep=[], locked=locked, now=at
            )
            await self._exec(conn, "partition_member_leave", node_id=node_id)

    async def _lock_leases(
        self, conn: Any, node_id: str, want: list[int], at: datetime
    ) -> list[int]:
        """Lock, in partition order, every lease row the transaction may change; their keys
        (the later statements change only these: one lock order for every claim)."""
        rows = await self._all(conn, "partition_leases_lock", node_id=node_id, want=want, now=at)
        return [r["partition_key"] for r in rows]

    async def partition_leases_list(self) -> list[PartitionLease]:
        return [self._lease(r) for r in await self._read_all("partition_leases_list")]

    def _lease(self, row: Any) -> PartitionLease:
        expires = _rows._required(self.codec, row["expires_at"])
        return PartitionLease(row["partition_key"], row["owner"], row["epoch"], expires)
