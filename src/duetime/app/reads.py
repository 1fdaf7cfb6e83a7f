"""The API's reads that may come from a replica: :class:`ReadSide` (the process's, over the
replica when ``replica_url`` is set, else over the primary) and :class:`Reads` (one tenant's).

Only a :class:`~duetime.store.reads.ReadStore` reaches this module: the history and list pages
and the metrics gauges that use it cannot write, whichever database serves them. What reads
the replica, and what stays on the primary because it must be fresh, is listed in
docs/howto/read-replica.md (decision 0032).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from duetime._config import Settings
from duetime._monitoring import ClusterStats
from duetime._types import JobEvent, Page, Run, RunState, enum_value
from duetime.app._service import check_limit, check_window, job_ref, read_cursor
from duetime.errors import ValidationError
from duetime.store import Pooling, is_postgres_url
from duetime.store.base import RunListParams, StatsParams
from duetime.store.reads import ReadStore, open_replica
from duetime.workflows.definition import is_workflow_name
from duetime.workflows.engine import InstanceState
from duetime.workflows.types import WorkflowInstance


async def cluster_stats(store: ReadStore, settings: Settings) -> ClusterStats:
    """The whole cluster's queues now (the contract of
    :meth:`duetime.app.Monitoring.cluster_stats`)."""
    now = await store.db_now()
    live_after = now - timedelta(seconds=settings.worker_stale_after)
    stats = await store.stats_snapshot(StatsParams(live_after=live_after, now=now))
    counts = await store.workflow_instance_counts()
    return replace(
        stats,
        queues=await store.tenant_stats(now),
        workflow_instances=[(c.tenant, c.workflow, str(c.state), c.count) for c in counts],
    )


@dataclass(frozen=True, slots=True)
class Reads:
    """One tenant's reads of the list and history pages, over :attr:`store` (which may be a
    replica, behind the primary by its replay lag)."""

    store: ReadStore
    tenant: str

    async def runs(
        self,
        job: str | uuid.UUID | None = None,
        *,
        state: RunState | str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        task: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Page[Run]:
        """The contract of :meth:`duetime.app.Runs.find`, which calls this on the primary."""
        check_limit(limit)
        check_window(since, until)
        job_id = None if job is None else (await self.store.job_get(job_ref(self.tenant, job))).id
        before = read_cursor(cursor, RunListParams.before_cursor)
        return await self.store.runs_list(
            RunListParams(
                tenant=self.tenant,
                job_id=job_id,
                state=None if state is None else enum_value(RunState, state, "state"),
                limit=limit,
                before=before,
                task=task,
                since=since,
                until=until,
            )
        )

    async def last_workers(self, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
        """As :meth:`duetime.app.Monitoring.last_workers`."""
        if len(run_ids) > 1000:
            raise ValidationError("run_ids", "at most 1000 at a time")
        return await self.store.runs_last_workers(self.tenant, list(run_ids))

    async def job_history(
        self, job: str | uuid.UUID, *, limit: int = 50, before: int | None = None
    ) -> list[JobEvent]:
        """As :meth:`duetime.app.Lifecycle.history`."""
        check_limit(limit)
        return await self.store.job_events_list(
            job_ref(self.tenant, job), limit=limit, before=before
        )

    async def workflow_instances(
        self,
        *,
        workflow: str | None = None,
        state: InstanceState | str | None = None,
        job: uuid.UUID | None = None,
        limit: int = 100,
    ) -> list[WorkflowInstance]:
        """As :meth:`duetime.app.Workflows.instances`."""
        check_limit(limit)
        chosen = None if state is None else enum_value(InstanceState, state, "state")
        if workflow is not None and not is_workflow_name(workflow):
            return []  # no workflow has such a name
        return await self.store.workflow_instances_list(
            self.tenant, workflow=workflow, state=chosen, job_id=job, limit=limit
        )


@dataclass(frozen=True, slots=True)
class ReadSide:
    """Where one API process reads its list pages and gauges: ``source()`` gives the store
    at each use (the primary's is the app's, which may open after the API is made);
    :attr:`replica` says whether it is the replica."""

    source: Callable[[], ReadStore]
    settings: Settings
    replica: bool

    @property
    def store(self) -> ReadStore:
        return self.source()

    def for_tenant(self, tenant: str) -> Reads:
        return Reads(self.store, tenant)

    async def cluster_stats(self) -> ClusterStats:
        return await cluster_stats(self.store, self.settings)


def primary_reads(store: Callable[[], ReadStore], settings: Settings) -> ReadSide:
    """The reads of an API without a replica: the primary's store, as ``store()`` gives it
    at each use (``lambda: app.store``)."""
    return ReadSide(store, settings, replica=False)


@contextlib.asynccontextmanager
async def open_reads(store: Callable[[], ReadStore], settings: Settings) -> AsyncIterator[ReadSide]:
    """The API's read side while the block runs: a replica opened read-only on
    ``settings.replica_url`` (closed at the end), else ``store()`` (the primary's, left open).
    A replica needs a PostgreSQL primary; an unreachable one, or one without this schema,
    fails here (ConnectError, SchemaError), before the API serves."""
    url = settings.replica_url
    if not url:
        yield primary_reads(store, settings)
        return
    if not is_postgres_url(settings.database_url):
        raise ValidationError(
            "replica_url", "a read replica needs a PostgreSQL database_url, not SQLite"
        )
    replica = await open_replica(url, Pooling.of(settings))
    try:
        yield ReadSide(lambda: replica, settings, replica=True)
    finally:
        await replica.close()
