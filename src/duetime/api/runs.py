"""``/api/v1/runs``: read runs (with their attempts), cancel one."""

from __future__ import annotations

from duetime._types import RunState
from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import Cursor, JobFilter, Limit, RunId
from duetime.api.schemas import RunDetail, RunOut, RunPage, parse_id


class ListRuns(Endpoint):
    """List runs
    Newest scheduled instant first; filter by state and job."""

    method, path, tag = "GET", "/runs", "runs"
    errors = (404, 422)

    async def handle(
        self,
        caller: Viewer,
        state: RunState | None = None,
        job_id: JobFilter = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> RunPage:
        job = None if job_id is None else parse_id(job_id, "job")
        page = await caller.app.runs(job, state=state, limit=limit, cursor=cursor)
        return RunPage(items=[RunOut.of(r) for r in page.items], next_cursor=page.next_cursor)


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
