"""``/api/v1/runs``: read runs (with their attempts), cancel one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Query
from pydantic import Field

from duetime._types import Run, RunState
from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import Cursor, JobFilter, Limit, RunId
from duetime.api.schemas import NO_NUL, PageOut, RunDetail, RunOut, parse_id

TaskFilter = Annotated[
    str | None, Query(max_length=200, pattern=NO_NUL, description="Only runs of this task.")
]


class RunListItem(RunOut):
    worker: str | None = Field(
        description="The worker of its latest attempt (the one holding it while it runs); "
        "null before its first attempt."
    )
    duration_seconds: float | None = Field(description="started → finished; null until both.")


class RunListPage(PageOut):
    items: list[RunListItem]


class ListRuns(Endpoint):
    """List runs
    Newest scheduled instant first; filter by state, job, task and scheduled instant (`since`
    inclusive, `until` exclusive: ISO 8601 with an offset). Each run names the worker of its
    latest attempt and its duration."""

    method, path, tag = "GET", "/runs", "runs"
    errors = (404, 422)

    async def handle(
        self,
        caller: Viewer,
        state: RunState | None = None,
        job_id: JobFilter = None,
        limit: Limit = 100,
        cursor: Cursor = None,
        task: TaskFilter = None,
        since: Annotated[datetime | None, Query(description="Scheduled at or after.")] = None,
        until: Annotated[datetime | None, Query(description="Scheduled before.")] = None,
    ) -> RunListPage:
        job = None if job_id is None else parse_id(job_id, "job")
        page = await caller.reads.runs(
            job, state=state, limit=limit, cursor=cursor, task=task, since=since, until=until
        )
        workers = await caller.reads.last_workers([r.id for r in page.items])

        def item(r: Run) -> RunListItem:
            return RunListItem(
                **RunOut.fields_of(r),
                worker=r.lease_owner or workers.get(r.id),
                duration_seconds=None
                if r.started_at is None or r.finished_at is None
                else (r.finished_at - r.started_at).total_seconds(),
            )

        return RunListPage.of(page, item)


class GetRun(Endpoint):
    """Get a run, with its attempts"""

    method, path, tag = "GET", "/runs/{run_id}", "runs"
    errors = (404,)

    async def handle(self, run_id: RunId, caller: Viewer) -> RunDetail:
        found = parse_id(run_id, "run")
        run = await caller.app.run(found)
        return RunDetail.with_attempts(run, await caller.app.attempts(found))


class CancelRun(Endpoint):
    """Cancel a run
    A scheduled or running run (its worker's later writes are refused). A finished run is
    409."""

    method, path, tag = "POST", "/runs/{run_id}/cancel", "runs"
    errors = (404, 409)

    async def handle(self, run_id: RunId, caller: Operator) -> RunOut:
        return RunOut.of(await caller.app.cancel_run(parse_id(run_id, "run")))


ENDPOINTS: tuple[type[Endpoint], ...] = (ListRuns, GetRun, CancelRun)
