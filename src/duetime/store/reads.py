"""The read side of the store: :class:`ReadStore`, the queries the API's history and list
pages and its metrics gauges make, and :func:`open_replica`, which opens one on a PostgreSQL
streaming replica (docs/howto/read-replica.md, decision 0032).

A :class:`ReadStore` has no method that writes: code handed one (``app/reads.py``) cannot
write through it, whichever database it reads. A replica's connections are opened read-only
as well (``default_transaction_read_only=on``), so even a write that got past the types would
be refused by PostgreSQL. :class:`~duetime.store.base.Store` has every method below, so the
primary store is a :class:`ReadStore` as it is (the API's reads when no replica is set).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from duetime._monitoring import ClusterStats
from duetime._types import Job, JobEvent, Page, Run, TenantQueueStats
from duetime.store.base import JobRef, RunListParams, StatsParams
from duetime.store.postgres.pooling import Pooling
from duetime.workflows.protocol import WorkflowInstanceReads
from duetime.workflows.watch import InstanceCount


class ReadStore(WorkflowInstanceReads, Protocol):
    """The queries of the API's list and history pages and of its metrics gauges: reads only.
    Every one may be served by a replica, so each may be behind the primary by the replica's
    replay lag. (``workflow_instances_list`` is declared by :class:`~duetime.workflows.protocol.
    WorkflowInstanceReads`.)"""

    dialect: str

    async def close(self) -> None: ...
    async def db_now(self) -> datetime: ...
    async def job_get(self, ref: JobRef) -> Job: ...
    async def runs_list(self, params: RunListParams) -> Page[Run]: ...
    async def runs_last_workers(
        self, tenant: str, run_ids: list[uuid.UUID]
    ) -> dict[uuid.UUID, str]: ...
    async def job_events_list(
        self, ref: JobRef, *, limit: int = 50, before: int | None = None
    ) -> list[JobEvent]: ...
    async def stats_snapshot(self, params: StatsParams) -> ClusterStats: ...
    async def workflow_instance_counts(self) -> list[InstanceCount]: ...
    async def tenant_stats(self, now: datetime | None = None) -> list[TenantQueueStats]: ...


async def open_replica(url: str, pooling: Pooling) -> ReadStore:
    """A :class:`ReadStore` on the PostgreSQL replica at ``url``, open, its connections
    read-only, its schema checked (the primary's, replicated). ``pooling`` gives the pool's
    size (the replica is reached directly: its transaction-pooling mode is not used). Raises
    ValidationError for a URL that is not ``postgresql://``, ConnectError when the replica
    cannot be reached, SchemaError when it holds no duetime schema of this version."""
    from duetime.store.postgres.replica import open_read_only

    return await open_read_only(url, pooling)
