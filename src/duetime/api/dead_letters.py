"""``/api/v1/dead-letters``: runs out of attempts or failed permanently; replay them."""

from __future__ import annotations

from duetime._types import RunState
from duetime.api.auth import Operator, Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.params import Cursor, JobFilter, Limit, RunId
from duetime.api.schemas import ReplayIn, ReplayOut, RunOut, RunPage, parse_id
from duetime.errors import Conflict, ValidationError


class ListDeadLetters(Endpoint):
    """List dead letters
    Runs out of attempts or failed permanently, newest first."""

    method, path, tag = "GET", "/dead-letters", "dead-letters"
    errors = (404, 422)

    async def handle(
        self,
        caller: Viewer,
        job_id: JobFilter = None,
        limit: Limit = 100,
        cursor: Cursor = None,
    ) -> RunPage:
        job = None if job_id is None else parse_id(job_id, "job")
        page = await caller.reads.runs(job, state=RunState.DEAD, limit=limit, cursor=cursor)
        return RunPage.of(page, RunOut.of)


class ReplayDeadLetter(Endpoint):
    """Replay one dead run
    Back to `scheduled` with a fresh attempt budget (recorded in `replays`). A run that is not
    dead is 409."""

    method, path, tag = "POST", "/dead-letters/{run_id}/replay", "dead-letters"
    errors = (404, 409)

    async def handle(self, run_id: RunId, caller: Operator) -> RunOut:
        found = parse_id(run_id, "run")
        before = await caller.app.run(found)
        if not await caller.app.replay([found]):
            raise Conflict(f"run {found} is {before.state}; only dead runs can be replayed")
        return RunOut.of(await caller.app.run(found))


class ReplayDeadLetters(Endpoint):
    """Replay dead runs in bulk
    Those of `job_id`, or every dead run of the tenant with `"all": true`, oldest first, up to
    `limit`."""

    method, path, tag = "POST", "/dead-letters/replay", "dead-letters"
    errors = (404, 422)

    async def handle(self, body: ReplayIn, caller: Operator) -> ReplayOut:
        if body.job_id is None and not body.all:
            raise ValidationError("job_id", 'give a job_id, or "all": true to replay every one')
        job = None if body.job_id is None else parse_id(body.job_id, "job")
        replayed = await caller.app.replay(job=job, limit=body.limit)
        return ReplayOut(replayed=replayed, count=len(replayed))


ENDPOINTS: tuple[type[Endpoint], ...] = (
    ListDeadLetters,
    ReplayDeadLetters,
    ReplayDeadLetter,
)
