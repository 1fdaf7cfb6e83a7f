"""``app.runs``: find and read runs, their attempts, skipped occurrences and dead letters;
replay dead runs; cancel a run. Calling the service itself finds runs: ``app.runs(job)``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from duetime._types import Attempt, Page, Run, RunState
from duetime.app._service import Scope, Service, check_limit, parse_run_id
from duetime.app.audit import audited
from duetime.app.jobs import Jobs
from duetime.app.reads import Reads
from duetime.errors import NotFound, ValidationError
from duetime.store.base import (
    PlannedSkip,
    RunCancelParams,
    RunIdPrefixParams,
    RunReplayParams,
)


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
        task: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Page[Run]:
        """Runs (of ``job``, by id or name, if given; of ``task``; scheduled at or after
        ``since`` and before ``until``, aware instants), newest scheduled instant first, a page
        at a time (pass the page's ``next_cursor`` as ``cursor`` for the next, with the same
        filters)."""
        return await Reads(self.store, self.tenant).runs(
            job,
            state=state,
            limit=limit,
            cursor=cursor,
            task=task,
            since=since,
            until=until,
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
        every dead run (of ``job``, if given), up to ``limit``. Returns the replayed ids. A
        workflow step's dead run is not replayed here (it is not returned): retry its
        instance (``app.workflows.retry``), which re-opens what depends on it."""
        job_id = None if job is None else (await self._jobs.get(job)).id
        with audited(self, "replayed", "runs", subject_id=job_id):
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
        found = parse_run_id(run_id)
        with audited(self, "cancelled", "run", subject_id=found):
            return await self.store.run_cancel(RunCancelParams(self.tenant, found))

    async def by_id_prefix(self, prefix: str, *, limit: int = 10) -> list[Run]:
        """The runs whose id begins with ``prefix`` (at least 8 hex digits of the id as
        ``str(run.id)`` or ``duetime up`` prints it, with or without its dashes), in id order,
        at most ``limit``. Raises NotFound for text that is no id or prefix of one, and
        ValidationError for fewer than 8 hex digits."""
        check_limit(limit)
        return await self.store.runs_by_id_prefix(
            RunIdPrefixParams(self.tenant, id_prefix(prefix), limit=limit)
        )

    async def resolve(self, run: str | uuid.UUID) -> uuid.UUID:
        """The id ``run`` names: a full id (a UUID or its text, not looked up) or the prefix of
        exactly one run of the tenant (see :meth:`by_id_prefix`). Raises NotFound when no run
        has the prefix (or ``run`` is no id at all), ValidationError for a prefix shorter than
        8 hex digits, and :class:`AmbiguousRunId` (a ValidationError) naming the candidates
        when several runs have it."""
        if isinstance(run, uuid.UUID):
            return run
        try:
            return uuid.UUID(run)
        except ValueError:
            pass
        prefix = id_prefix(run)
        found = await self.by_id_prefix(prefix, limit=AMBIGUOUS_SHOWN + 1)
        if not found:
            raise NotFound(f"no run {run} in tenant {self.tenant}")
        if len(found) > 1:
            raise AmbiguousRunId(
                run, self.tenant, found[:AMBIGUOUS_SHOWN], more=len(found) > AMBIGUOUS_SHOWN
            )
        return found[0].id


MIN_PREFIX = 8
"""The fewest hex digits of a run id that name a run (``duetime up`` prints 8)."""
AMBIGUOUS_SHOWN = 10
"""How many candidates an :class:`AmbiguousRunId` names."""


def id_prefix(text: str) -> str:
    """The hex digits of a run-id prefix: ``text`` lowercased, with its dashes where the id's
    text form has them (``abcd1234-ef``) or none (``abcd1234ef``). NotFound for text that
    is no id or prefix of one; ValidationError for fewer than 8 digits."""
    lowered = text.lower()
    digits = lowered.replace("-", "")
    if not _is_hex(digits) or (
        "-" in lowered and not str(uuid.UUID(digits.ljust(32, "0"))).startswith(lowered)
    ):
        raise NotFound(f"run {text!r} not found (not a run id or a prefix of one)")
    if len(digits) < MIN_PREFIX:
        raise ValidationError(
            "run_id",
            f"{text!r} is too short: give the full id or at least {MIN_PREFIX} of its "
            "characters (as `duetime up` prints them)",
        )
    return digits


def _is_hex(digits: str) -> bool:
    return 0 < len(digits) <= 32 and not digits.strip("0123456789abcdef")


class AmbiguousRunId(ValidationError):
    """A run-id prefix that more than one run of the tenant has: ``candidates`` (in id order,
    at most :data:`AMBIGUOUS_SHOWN`) and ``more`` (others have it too)."""

    def __init__(self, prefix: str, tenant: str, candidates: list[Run], *, more: bool) -> None:
        named = ", ".join(
            f"{r.id} ({r.job_name}, {r.scheduled_for.isoformat()})" for r in candidates
        )
        super().__init__(
            "run_id",
            f"{prefix} is ambiguous in tenant {tenant}: {named}{', and more' if more else ''}",
        )
        self.prefix = prefix
        self.tenant = tenant
        self.candidates = candidates
        self.more = more
