"""``app.jobs``: declare, read, find, pause, resume, cancel, delete and trigger jobs, and
preview when they fire."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Unpack

from duetime import _json
from duetime._redact import has_redacted, keep_redacted
from duetime._types import (  # an import list like other modules': not logic
    CalendarInterval,
    DeliveryMode,
    Job,
    JobPause,
    JobStatus,
    MisfirePolicy,
    Occurrence,
    OverlapPolicy,
    Page,
    RetryPolicy,
    Run,
    Schedule,
    ScheduleKind,
    enum_value,
)
from duetime.app._service import (
    Service,
    check_limit,
    check_task,
    check_workflow,
    job_ref,
)
from duetime.app.audit import audited
from duetime.app.backfill import ORIGIN, BackfillProgress, BackfillResult, Progress
from duetime.app.backfill import backfill as backfill_range
from duetime.app.calendars import Calendars
from duetime.app.pause_notes import pause_note
from duetime.errors import NotFound, ValidationError
from duetime.registration import (
    MAX_NAME,
    JobChanges,
    JobSpec,
    build_upsert,
    change_job,
    changed_task,
    check_delivery,
    check_priority,
    request_hash,
    upsert_job,
)
from duetime.scheduler.bounds import Bounds, is_bounded
from duetime.scheduler.calendar_plan import annotate, calendars_of
from duetime.schedules import first_fire, next_fire_after, preview, tzdb, validate_schedule
from duetime.store.base import (
    JobListParams,
    JobRef,
    JobSetStatusParams,
    RunTriggerParams,
    Store,
)
from duetime.workflows.definition import STEP_KEY_PREFIX

_STATUS_ACTIONS = {
    JobStatus.PAUSED: "paused",
    JobStatus.ACTIVE: "resumed",
    JobStatus.CANCELLED: "cancelled",
}
"""The audit action of each status a job is set to."""


class Jobs(Service):
    """The jobs of one tenant (``app.jobs``; the same methods sit flat on the app too)."""

    __slots__ = ()

    async def schedule(
        self,
        name: str,
        *,
        task: str | None = None,
        target: dict[str, Any] | None = None,
        cron: str | None = None,
        at: datetime | timedelta | None = None,
        every: timedelta | float | str | CalendarInterval | None = None,
        now: bool = False,
        tz: str = "UTC",
        anchor: datetime | None = None,
        payload: Any = None,
        retry: RetryPolicy | None = None,
        priority: int = 0,
        timeout: float | None = None,
        misfire: MisfirePolicy | str = MisfirePolicy.FIRE_ONCE,
        misfire_grace: float | None = None,
        overlap: OverlapPolicy | str = OverlapPolicy.SKIP,
        delivery: DeliveryMode | str = DeliveryMode.AT_LEAST_ONCE,
        queue: str = "default",
        tags: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        max_concurrency: int | None = None,
        concurrency_key: str | None = None,
        max_backfill: int = 100,
        replace_timeout: float | timedelta = 30.0,
        max_waiting: int = 0,
        sla: float | timedelta | None = None,
        expected_duration: float | timedelta | None = None,
        jitter: float | timedelta = 0.0,
        allow_past: bool = False,
        allow_unregistered: bool = False,
        create_only: bool = False,
        rearm: bool = False,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        max_runs: int | None = None,
        connection: object = None,
        calendars: Sequence[str] = (),
        calendar_shift: str | None = None,
    ) -> Job:
        """Create the job ``name`` of this tenant, or update it if it exists; the returned
        job's ``created`` says which.

        Either ``task`` (a registered function's name) or ``target`` (``{"type": "http", "url":
        …, "method": "POST", "headers": {…}, "timeout": 30}``: each run is sent to that URL as
        a signed webhook, see docs/webhooks.md; a header value ``"<redacted>"``, as the REST
        API and the CLI show every one, keeps the job's stored value). Exactly one of ``cron``
        (with ``tz``), ``at`` (a datetime with offset, or a delay), ``every`` (interval, from
        ``anchor``, default now: a fixed duration — ``timedelta``, seconds, ``"90 seconds"``,
        ``"2 hours"``, ``"PT15M"`` — or calendar units in ``tz`` that keep the anchor's wall
        time across DST changes — ``"1 day"``, ``"2 weeks"``, ``"1 month"``) or
        ``now=True``. Declaring a job again unchanged keeps its next fire instant and status
        — an ``at`` delay (``at=timedelta(hours=3)``) counts from the first declaration, so
        a program may declare its jobs at every start and a one-shot that ran does not run
        again; ``rearm=True`` counts the schedule as changed (a delay
        from now, a one-shot that ran runs again). A changed schedule takes effect from its
        next occurrence (runs not yet started are skipped): a cron or ``every`` one first fires
        at its first occurrence strictly after the change (and after the job's last fired
        one), never at the instant of the change; an ``every`` given without ``anchor`` keeps
        the job's anchor. ``sla``: seconds after each scheduled instant within which a run
        must succeed, else the leader raises an alert;
        ``expected_duration``: how long a run normally takes (stuck-run alerts; default: learnt
        from the job's history).
        ``priority``: -1000 to 1000, higher first, with aging; ``queue``: the worker pool that
        runs it; ``jitter``: seconds each run may become available after its instant, stable
        per occurrence (docs/fairness.md). ``overlap``: ``skip`` (default), ``allow``,
        ``serialize``, ``replace`` or ``buffer_one``; ``replace_timeout``: seconds a replaced
        run gets to stop before its successor starts anyway; ``max_waiting``: runs that may
        wait for a busy key (0: no limit), a newer one due at the cap is skipped
        (docs/api.md, "Overlap"). ``create_only``: a name in use raises Conflict.
        An ``at`` further in the past than the misfire grace is refused unless ``allow_past``
        (then it is due at once). Bounds, for ``cron`` and ``every`` only: no occurrence before
        ``start_at`` or after ``end_at`` fires, at most ``max_runs`` scheduled runs are created
        (manual triggers do not count); then the job is ``completed`` (docs/api.md, "Bounds").
        ``connection``: the caller's own PostgreSQL connection or session (see
        :meth:`trigger`): the job is written in its transaction.
        ``calendars``: names of the tenant's exclusion calendars (``app.calendars``; an unknown
        one is a ValidationError naming ``calendars``): an occurrence they exclude is skipped
        (reason ``calendar:<name>``), or with ``calendar_shift`` (``next_business_day``,
        ``previous_business_day``) runs at the same wall time of the nearest day none excludes,
        keeping the occurrence as its ``scheduled_for`` (docs/api.md, "Calendars").
        Raises ValidationError.
        """
        spec = JobSpec(
            name=name,
            task=task,
            target=target,
            cron=cron,
            at=at,
            every=every,
            now=now,
            tz=tz,
            anchor=anchor,
            payload=payload,
            retry=retry,
            priority=priority,
            timeout=timeout,
            misfire=misfire,
            misfire_grace=misfire_grace,
            overlap=overlap,
            delivery=delivery,
            queue=queue,
            tags=tuple(tags),
            metadata=dict(metadata or {}),
            max_concurrency=max_concurrency,
            concurrency_key=concurrency_key,
            max_backfill=max_backfill,
            replace_timeout=replace_timeout,
            max_waiting=max_waiting,
            sla=sla,
            expected_duration=expected_duration,
            jitter=jitter,
            allow_past=allow_past,
            start_at=start_at,
            end_at=end_at,
            max_runs=max_runs,
            calendars=tuple(calendars),
            calendar_shift=calendar_shift,
        )
        return await self.schedule_spec(
            spec,
            allow_unregistered=allow_unregistered,
            create_only=create_only,
            rearm=rearm,
            connection=connection,
        )

    async def schedule_spec(
        self,
        spec: JobSpec,
        *,
        allow_unregistered: bool = False,
        create_only: bool = False,
        rearm: bool = False,
        connection: object = None,
    ) -> Job:
        """:meth:`schedule` with its arguments as one :class:`~duetime.registration.JobSpec`."""
        if has_redacted(spec.target):  # written back as read: keep the stored credentials
            spec = replace(spec, target=keep_redacted(spec.target, await self._stored(spec)))
        params = build_upsert(
            spec,
            tenant=self.tenant,
            settings=self.settings,
            now=self.clock.now(),
            create_only=create_only,
            rearm=rearm,
        )
        check_delivery(params, self.store.dialect)
        await check_task(self._scope, params.task, allow_unregistered)
        await check_workflow(self._scope, params.target)
        await Calendars(self._scope).check_known(params.calendars)
        with audited(self, "updated", "job", name=params.name, needs_change=True):
            job, created = await upsert_job(await self._writer(connection), params)
        return replace(job, created=created)

    async def _writer(self, connection: object) -> Store:
        """The store that writes: the app's own, or its statements enlisted in the caller's
        transaction on ``connection`` (PostgreSQL; docs/integrations.md)."""
        return self.store if connection is None else await self.store.enlist(connection)

    async def update_job(
        self,
        job: str | uuid.UUID,
        *,
        allow_unregistered: bool = False,
        **changes: Unpack[JobChanges],
    ) -> Job:
        """Change some of a job's settings, atomically: ``app.update_job("nightly",
        priority=5, retry={"max_attempts": 9})``. Each keyword (a
        :class:`~duetime.registration.JobChanges` key: ``schedule``'s parameters but the name)
        replaces that setting; the others keep the values the job has when the update is
        applied, in one store transaction that locks it, so concurrent updates of different
        settings all survive. ``retry`` may be partial (a dict merged onto the job's policy).
        Giving any of ``cron``, ``at``, ``every`` or ``now`` replaces the schedule (its runs not
        yet started are skipped); an equivalent one keeps its next fire instant, but an ``at``
        delay always counts from now (it re-arms the one-shot). A header value
        ``"<redacted>"`` in ``target`` keeps the stored value. Raises NotFound,
        ValidationError (nothing changed)."""
        task = changed_task(changes)
        if task is not None:  # before the transaction: on SQLite the lookup would wait on it
            await check_task(self._scope, task, allow_unregistered)
        if changes.get("calendars"):
            await Calendars(self._scope).check_known(list(changes["calendars"]))
        with audited(self, "updated", "job", name=job, needs_change=True):
            return await change_job(
                self.store,
                job_ref(self.tenant, job),
                changes,
                settings=self.settings,
                now=self.clock.now(),
            )

    async def _stored(self, spec: JobSpec) -> dict[str, Any] | None:
        """The stored target of the job ``spec`` names (None: no such job, or a bad name,
        which build_upsert refuses)."""
        name = spec.name
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            return None
        try:
            return (await self.store.job_get(JobRef(tenant=self.tenant, name=name))).target
        except NotFound:
            return None

    async def backfill(
        self,
        job: str | uuid.UUID,
        since: datetime,
        until: datetime,
        *,
        dry_run: bool = False,
        yes: bool = False,
        progress: Progress | None = None,
    ) -> BackfillResult:
        """Create a run for every occurrence of ``job`` from ``since`` to ``until`` (both
        included, in the past) that has none: idempotent, through the job's calendars, released
        at ``Settings.backfill_rate`` runs per second, never misfired (origin ``backfill``).
        ``dry_run`` creates nothing and lists what would run. A range longer than a year needs
        ``yes``. ``progress(done, total)`` is called after each chunk written. Raises
        NotFound, ValidationError, BackfillCapReached (``app/backfill.py``). Audited once,
        with the first runs it writes (a dry run, or a range with nothing missing, writes no
        record)."""
        span = {"from": str(since), "to": str(until)}
        with audited(self, "backfilled", "job", name=job, change=span):
            return await backfill_range(
                self.store,
                job_ref(self.tenant, job),
                since,
                until,
                now=await self.store.db_now(),
                rate=self.settings.backfill_rate,
                dry_run=dry_run,
                yes=yes,
                progress=progress,
            )

    async def backfill_progress(self, job: str | uuid.UUID) -> BackfillProgress:
        """The job's backfilled runs by state (those history still keeps)."""
        found = await self.get(job)
        states = await self.store.runs_origin_states(self.tenant, found.id, ORIGIN)
        return BackfillProgress(job_id=found.id, job=found.name, states=states)

    async def get(self, job: str | uuid.UUID) -> Job:
        """A job by id or name. Raises NotFound."""
        return await self.store.job_get(job_ref(self.tenant, job))

    async def find(
        self,
        *,
        status: JobStatus | str | None = None,
        name_prefix: str | None = None,
        tag: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Job]:
        """This tenant's jobs by name, a page at a time (pass the page's ``next_cursor`` as
        ``cursor`` for the next), filtered by status, name prefix and tag."""
        check_limit(limit)
        return await self.store.job_list(
            JobListParams(
                tenant=self.tenant,
                status=None if status is None else enum_value(JobStatus, status, "status"),
                name_prefix=name_prefix,
                tag=tag,
                limit=limit,
                after_name=cursor,
            )
        )

    async def pause(
        self,
        job: str | uuid.UUID,
        *,
        note: str | None = None,
        until: datetime | None = None,
        by: str | None = None,
    ) -> Job:
        """Pause: its not-yet-started runs are skipped — those not yet due withdrawn
        (deleted) — and triggers still run. Conflict if the job is cancelled or completed.
        ``note`` says why, ``by`` who (default: this app's actor), ``until`` when it resumes
        by itself (the leader's lifecycle pass; an aware instant in the future). Pausing a
        paused job with a note replaces its note. Each pause and resume is in
        :meth:`~duetime.app.Lifecycle.history`."""
        pause = pause_note(note=note, until=until, by=by or self._scope.actor, now=self.clock.now())
        return await self._set_status(job, JobStatus.PAUSED, pause=pause)

    async def _resume_paused(self, job: Job) -> Job:
        """The end of ``job``'s pause (``pause.until`` reached): resumed as :meth:`resume`
        does, recorded as ``auto_resumed`` by ``duetime``; unchanged if its pause changed
        since it was read (the lifecycle pass's guard). For app/lifecycle.py only."""
        until = job.pause.until if job.pause else None
        return await self._set_status(
            job.id, JobStatus.ACTIVE, actor="duetime", event="auto_resumed", expect_until=until
        )

    async def resume(self, job: str | uuid.UUID) -> Job:
        """Resume a paused job at its next occurrence after now (within its bounds: a job with
        none left, its ``end_at`` passed or ``max_runs`` used up, is ``completed``)."""
        return await self._set_status(job, JobStatus.ACTIVE)

    async def cancel(self, job: str | uuid.UUID) -> Job:
        """Cancel for good: its pending runs are cancelled and it never fires again."""
        return await self._set_status(job, JobStatus.CANCELLED)

    async def _set_status(
        self,
        job: str | uuid.UUID,
        status: JobStatus,
        *,
        pause: JobPause | None = None,
        actor: str | None = None,
        event: str | None = None,
        expect_until: datetime | None = None,
    ) -> Job:
        ref = job_ref(self.tenant, job)
        next_fire_at = None
        if status is JobStatus.ACTIVE:
            current = await self.store.job_get(ref)
            next_fire_at = self._resume_instant(current.schedule, current.next_fire_at)
            next_fire_at = Bounds.of(current).next_occurrence(current.schedule, next_fire_at)
        # a pause withdraws the runs not yet due by this clock, the one resume counts from
        withdraw_after = self.clock.now() if status is JobStatus.PAUSED else None
        with audited(self, _STATUS_ACTIONS[status], "job", name=job, actor=actor):
            changed = await self.store.job_set_status(
                JobSetStatusParams(
                    job=ref,
                    status=status,
                    next_fire_at=next_fire_at,
                    withdraw_after=withdraw_after,
                    pause=pause,
                    actor=actor or self._scope.actor,
                    event=event,
                    expect_until=expect_until,
                    tzdata_version=tzdb.current().version if next_fire_at else None,
                )
            )
        if changed.status is JobStatus.ACTIVE and next_fire_at is None and is_bounded(changed):
            # resumed past its bounds: active without a next fire (the scheduler leaves it
            # alone) until this completes it
            async with self.store.transaction() as tx:
                await tx.jobs_count_runs([(changed.id, 0, True)])
            changed = await self.store.job_get(ref)
        return changed

    def _resume_instant(self, schedule: Schedule, pending: datetime | None) -> datetime | None:
        """Where a resumed job picks up: its next occurrence after now (paused ones were
        skipped, not missed); a one-shot keeps its instant if it never ran."""
        now = self.clock.now()
        if schedule.one_shot:
            return pending
        if schedule.kind is ScheduleKind.EVERY:
            return next_fire_after(schedule, now)
        return first_fire(schedule, now)

    async def delete(self, job: str | uuid.UUID) -> None:
        """Delete a job with its runs and their history."""
        with audited(self, "deleted", "job", name=job):
            await self.store.job_delete(job_ref(self.tenant, job))

    async def trigger(
        self,
        job: str | uuid.UUID,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        priority: int | None = None,
        connection: object = None,
    ) -> Run:
        """Run the job now. With ``idempotency_key`` the same key never makes two runs (a repeat
        returns the first; the same key with another payload raises Conflict).

        ``connection``: the caller's own open transaction on duetime's PostgreSQL database — a
        psycopg 3 ``Connection``/``AsyncConnection`` or a SQLAlchemy 2 ``Session``/
        ``AsyncSession`` (``postgresql+psycopg``): the run is written there and exists exactly
        when that transaction commits (none after a rollback); workers hear of it at the
        commit. UsageError for another kind of connection, UnsupportedFeature on SQLite."""
        run, _ = await self.trigger_run(
            job,
            idempotency_key=idempotency_key,
            payload=payload,
            priority=priority,
            connection=connection,
        )
        return run

    # trigger's parameters spelled again in full: a public signature that help() and IDEs show.
    async def trigger_run(
        self,
        job: str | uuid.UUID,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        priority: int | None = None,
        connection: object = None,
    ) -> tuple[Run, bool]:
        """:meth:`trigger`, also saying whether this call created the run (False: an earlier
        call with the same idempotency key did, and this is its run)."""
        encoded = None
        if payload is not None:
            encoded = _json.encode_payload(payload, limit=self.settings.payload_limit)
        if idempotency_key is not None and not 1 <= len(idempotency_key) <= 200:
            raise ValidationError("idempotency_key", "must be 1-200 characters")
        if idempotency_key is not None and idempotency_key.startswith(STEP_KEY_PREFIX):
            raise ValidationError(
                "idempotency_key", f"must not start with {STEP_KEY_PREFIX!r} (workflow steps' keys)"
            )
        if priority is not None:
            check_priority(priority)
        writer = await self._writer(connection)
        with audited(self, "triggered", "job", name=job):
            return await writer.run_trigger(
                RunTriggerParams(
                    job=job_ref(self.tenant, job),
                    payload=encoded,
                    priority=priority,
                    idempotency_key=idempotency_key,
                    request_hash=request_hash(payload, priority),
                )
            )

    def preview(
        self, cron: str, *, tz: str = "UTC", after: datetime | None = None, count: int = 10
    ) -> list[Occurrence]:
        """The next ``count`` fire instants of a cron expression strictly after ``after``.
        Raises ValidationError for a bad expression or zone, or one that never fires."""
        schedule = Schedule(ScheduleKind.CRON, cron=cron, tz=tz)
        start = after or self.clock.now()
        validate_schedule(schedule, start)
        return preview(schedule, start, count)

    async def preview_job(
        self, job: str | uuid.UUID, *, after: datetime | None = None, count: int = 10
    ) -> list[Occurrence]:
        """The next ``count`` fire instants of a job's schedule strictly after ``after``
        (default now), whatever its status: its ``H`` values are the job's own; within its
        bounds (none before ``start_at`` or past ``end_at``, at most the runs ``max_runs``
        leaves)."""
        current = await self.get(job)
        return await self._through_calendars(
            current,
            Bounds.of(current).preview(
                current.schedule,
                after or self.clock.now(),
                count,
                created_before=current.next_fire_at,
            ),
        )

    async def next_fires(self, job: str | uuid.UUID, count: int = 5) -> list[Occurrence]:
        """The job's next ``count`` fire instants, from its ``next_occurrence_at`` on (the
        earliest occurrence not fired yet, runs written ahead included; none unless it is
        active; within its bounds: none past ``end_at``, at most ``max_runs``)."""
        current = await self.get(job)
        first = current.next_occurrence_at
        if first is None or current.status is not JobStatus.ACTIVE:
            return []
        return await self._through_calendars(
            current,
            Bounds.of(current).preview(
                current.schedule,
                first - timedelta(microseconds=1),
                count,
                created_before=current.next_fire_at,
            ),
        )

    async def _through_calendars(self, job: Job, fires: list[Occurrence]) -> list[Occurrence]:
        """``fires`` with a note on each occurrence the job's calendars skip or move."""
        if not job.calendars:
            return fires
        stored = await self.store.calendars_by_key([(job.tenant, n) for n in job.calendars])
        return annotate(job, calendars_of(job, stored), fires)
