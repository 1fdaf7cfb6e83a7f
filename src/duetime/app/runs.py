"""``app.runs``: find and read runs, their attempts, skipped occurrences and dead letters;
replay dead runs; cancel a run. Calling the service itself finds runs: ``app.runs(job)``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from duetime._types import Attempt, Page, Run, RunState
from duetime.app._service import Scope, Service, check_limit, enum_value, parse_run_id
from duetime.app.jobs import Jobs
from duetime.errors import ValidationError
from duetime.store.base import PlannedSkip, RunCancelParams, RunListParams, RunReplayParams


class Runs(Service):
    """The runs of one tenant (``app.runs``)."""

    __slots__ = ("_jobs",)

    def __init__(self, scope: Scope, jobs: Jobs) -> None:
        super().__init__(scope)
        self._jobs = jobs

    async def find(
        self,
        job: str | uuid.UUID | None = None,
        *,
        state: RunState | str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Run]:
        """Runs (of ``job``, by id or name, if given), newest scheduled instant first, a page
        at a time (pass the page's ``next_cursor`` as ``cursor`` for the next)."""
        check_limit(limit)
        job_id = None if job is None else (await self._jobs.get(job)).id
        before = None
        if cursor:
            try:
                before = RunListParams.before_cursor(cursor)
            except ValueError:
                raise ValidationError("cursor", "is not a cursor this API returned") from None
        return await self.store.runs_list(
            RunListParams(
                tenant=self.tenant,
                job_id=job_id,
                state=None if state is None else enum_value(RunState, state, "state"),
                limit=limit,
                before=before,
            )
        )

    __call__ = find
    """``app.runs(job, state=…)`` is ``app.runs.find(job, state=…)``: the flat API's name."""

    async def get(self, run_id: str | uuid.UUID) -> Run:
        """A run by id. Raises NotFound."""
        return await self.store.run_get(self.tenant, parse_run_id(run_id))

    async def attempts(self, run_id: str | uuid.UUID) -> list[Attempt]:
        """A run's attempts, first first: worker, times, outcome, error."""
        return await self.store.attempts_list(self.tenant, parse_run_id(run_id))

    async def skips(self, job: str | uuid.UUID) -> list[PlannedSkip]:
        """A job's skipped occurrences (misfires, overlap, pauses), as ranges with a count."""
        return await self.store.skips_list(self.tenant, (await self._jobs.get(job)).id)

    async def dead_letters(self, *, limit: int = 100, cursor: str | None = None) -> Page[Run]:
        """Dead runs, newest first."""
        return await self.find(state=RunState.DEAD, limit=limit, cursor=cursor)

    async def replay(
        self,
        runs: Sequence[str | uuid.UUID] | None = None,
        *,
        job: str | uuid.UUID | None = None,
        limit: int = 1000,
    ) -> list[uuid.UUID]:
        """Put dead runs back in the queue with a fresh attempt budget: the given ``runs``, or
        every dead run (of ``job``, if given), up to ``limit``. Returns the replayed ids."""
        job_id = None if job is None else (await self._jobs.get(job)).id
        return await self.store.runs_replay(
            RunReplayParams(
                tenant=self.tenant,
                run_ids=None if runs is None else [parse_run_id(r) for r in runs],
                job_id=job_id,
                limit=limit,
            )
        )

    async def cancel(self, run_id: str | uuid.UUID) -> Run:
        """Cancel a scheduled or running run (a running one stops at its next heartbeat).
        Conflict if it has finished."""
        return await self.store.run_cancel(RunCancelParams(self.tenant, parse_run_id(run_id)))
