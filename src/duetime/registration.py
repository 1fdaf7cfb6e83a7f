"""Turning what a user asks for (``app.schedule(...)``, ``POST /jobs``) into a validated job.

Every rejection is a :class:`~duetime.errors.ValidationError` naming the field and the reason.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import operator
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypedDict, cast

from duetime import _json
from duetime._config import Settings
from duetime._durations import MAX_SECONDS
from duetime._redact import has_redacted, keep_redacted, refuse_redacted
from duetime._types import (
    CalendarInterval,
    DeliveryMode,
    Job,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    RunState,
    Schedule,
    ScheduleKind,
    enum_value,
    job_hash_seed,
)
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.policies import retry_rules
from duetime.policies.status import status_after_schedule_change
from duetime.scheduler.bounds import Bounds, bounded_first, is_bounded, validated_bounds
from duetime.schedules import (
    first_fire,
    first_fire_after_change,
    next_fire_after,
    parse_every,
    tzdb,
    validate_schedule,
)
from duetime.schedules.calendars import calendar_fields
from duetime.store.base import BulkJob, JobRef, JobUpsertParams, Store, StoreTx
from duetime.targets.brokers.validate import is_broker_target, validate_broker_target
from duetime.targets.command import command_task, validate_command_target
from duetime.targets.http import HTTP_TASK, validate_target
from duetime.workflows.definition import WORKFLOW_TASK

PARTITIONS = 256
MAX_NAME = 200
PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
"""Priorities (higher first) are whole numbers in this range (docs/fairness.md)."""
MAX_JITTER = 3600.0


def check_priority(value: object, field_name: str = "priority") -> int:
    """``value`` if it is a priority, else ValidationError naming ``field_name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not PRIORITY_MIN <= value <= PRIORITY_MAX
    ):
        raise ValidationError(
            field_name, f"must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    return value


def _jitter(value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_JITTER
    ):
        raise ValidationError("jitter", f"must be 0 to {MAX_JITTER:g} seconds")
    return float(value)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """The user's request, before validation. Exactly one of cron/at/every/now is set."""

    name: str
    task: str | None = None
    target: dict[str, Any] | None = None
    cron: str | None = None
    at: datetime | timedelta | None = None
    every: timedelta | float | str | CalendarInterval | None = None
    """A fixed duration (``timedelta``, seconds, ``"90 seconds"``, ``"2 hours"``, ``"PT15M"``,
    ``"90s"``) or calendar units in ``tz`` (``"1 day"``, ``"2 weeks"``, ``"1 month"``)."""
    now: bool = False
    tz: str = "UTC"
    anchor: datetime | None = None
    payload: Any = None
    retry: RetryPolicy | None = None
    priority: int = 0
    timeout: float | None = None
    misfire: MisfirePolicy | str = MisfirePolicy.FIRE_ONCE
    misfire_grace: float | None = None
    overlap: OverlapPolicy | str = OverlapPolicy.SKIP
    delivery: DeliveryMode | str = DeliveryMode.AT_LEAST_ONCE
    queue: str = "default"
    tags: tuple[str, ...] = field(default_factory=tuple)
    metadata: dict[str, Any] = field(default_factory=dict)
    max_concurrency: int | None = None
    """Runs at once for ``allow`` (default unlimited, 0); the others run one at a time."""
    concurrency_key: str | None = None
    max_backfill: int = 100
    replace_timeout: float | timedelta = 30.0
    """With overlap ``replace``: seconds a replaced run gets to stop before its successor
    starts anyway."""
    max_waiting: int = 0
    """Runs that may wait for the overlap key while it is busy (0 = no limit); a newer run due
    at the cap is skipped ``queue_full``."""
    sla: float | timedelta | None = None
    """Seconds after each scheduled instant within which a run must succeed (alerts)."""
    expected_duration: float | timedelta | None = None
    """Seconds a run normally takes (stuck-run alerts); default: learnt from history."""
    jitter: float | timedelta = 0.0
    """Seconds: each run becomes available up to this long after its instant (stable per
    occurrence); its ``scheduled_for`` stays the instant."""
    allow_past: bool = False
    """Accept an ``at`` further in the past than the misfire grace (it is due at once)."""
    start_at: datetime | None = None
    """Recurring schedules only: no occurrence before this instant fires."""
    end_at: datetime | None = None
    """Recurring schedules only: no occurrence after this instant fires; then it completes."""
    max_runs: int | None = None
    """Recurring schedules only: at most this many scheduled runs; then it completes."""
    calendars: Sequence[str] = ()
    """Names of the tenant's exclusion calendars: occurrences they exclude are skipped (or
    moved, with ``calendar_shift``). The app checks that they exist."""
    calendar_shift: str | None = None
    """``next_business_day`` / ``previous_business_day`` (needs calendars)."""


def partition_of(job_id: uuid.UUID) -> int:
    """The job's virtual partition (0-255): a stable hash of its id, fixed at creation."""
    return hashlib.sha256(job_id.bytes).digest()[0] % PARTITIONS


def _valid_tag(tag: object) -> bool:
    return isinstance(tag, str) and 0 < len(tag) <= 100 and tag.isprintable()


def _schedule(spec: JobSpec, now: datetime) -> Schedule:
    cron, at, every = spec.cron, spec.at, spec.every
    if (cron is not None) + (at is not None) + (every is not None) + bool(spec.now) != 1:
        given = [k for k, v in (("cron", cron), ("at", at), ("every", every)) if v is not None]
        given += ["now"] if spec.now else []
        what = "none" if not given else " and ".join(given)
        raise ValidationError(
            "schedule", f"give exactly one of cron, at, every or now (got {what})"
        )
    kind = "cron" if cron is not None else "at" if at is not None else "every"
    kind = "now" if spec.now else kind
    if kind == "now":
        return Schedule(ScheduleKind.NOW, at=now)
    if kind == "cron":
        if not isinstance(spec.cron, str):
            raise ValidationError("cron", "must be a string such as '*/5 * * * *'")
        return Schedule(ScheduleKind.CRON, cron=spec.cron.strip(), tz=spec.tz)
    if kind == "at":
        at = spec.at
        if isinstance(at, timedelta):
            at = now + at
        if not isinstance(at, datetime):
            raise ValidationError("at", "must be a datetime with a time zone, or a timedelta")
        return Schedule(ScheduleKind.AT, at=at, tz=spec.tz)
    every = spec.every
    if isinstance(every, str):
        every = parse_every(every)
    if isinstance(every, CalendarInterval):
        return Schedule(ScheduleKind.EVERY, every_calendar=every, anchor=spec.anchor, tz=spec.tz)
    if isinstance(every, int | float) and not isinstance(every, bool):
        try:
            every = timedelta(seconds=every)  # NaN: ValueError; too large: OverflowError
        except (ValueError, OverflowError):
            raise ValidationError(
                "every",
                f"must be a finite number of seconds (within ±999999999 days), got {every!r}",
            ) from None
    if not isinstance(every, timedelta):
        raise ValidationError(
            "every", "must be a timedelta, a number of seconds or text such as '1 day'"
        )
    return Schedule(ScheduleKind.EVERY, every=every, anchor=spec.anchor, tz=spec.tz)


def equivalent_schedules(requested: Schedule, stored: Schedule) -> bool:
    """Is a stored schedule the same as ``requested`` (so re-declaring a job keeps its next
    fire instant)? ``now`` jobs are equal to any ``now`` job; an ``every`` job with no explicit
    anchor is equal to any stored one of the same interval (the same duration, or the same
    calendar interval however written: ``7 days`` is ``1 week``) in the same zone, whatever its
    anchor."""
    if requested.kind is ScheduleKind.NOW:
        return stored.kind is ScheduleKind.NOW
    requested, stored = _normal_interval(requested), _normal_interval(stored)
    if requested.kind is ScheduleKind.EVERY and requested.anchor is None:
        return replace(stored, anchor=None) == requested
    return stored == requested


def _normal_interval(schedule: Schedule) -> Schedule:
    """``schedule`` with its calendar interval in days rather than weeks, for comparing."""
    every = schedule.every_calendar
    if every is None or every.normalized == every:
        return schedule
    return replace(schedule, every_calendar=every.normalized)


async def upsert_job(store: Store, params: JobUpsertParams) -> tuple[Job, bool]:
    """Create the job ``params`` describe, or update the one of that (tenant, name), in one
    store transaction (:func:`upsert_in`). Returns the job and whether it was created."""
    async with store.transaction() as tx:
        return await upsert_in(tx, params)


def same_declaration(params: JobUpsertParams, old: Job) -> bool:
    """Is ``params`` a one-shot declared with the same delay as the stored ``old``
    (``at=timedelta(hours=3)`` both times)? Then it is the same declaration, though the delay
    resolves to a later instant each time it is declared."""
    requested = params.requested or params.schedule
    return (
        params.declared_delay is not None
        and params.declared_delay == old.declared_delay
        and replace(requested, at=old.schedule.at) == old.schedule
    )


async def upsert_in(tx: StoreTx, params: JobUpsertParams) -> tuple[Job, bool]:
    """:func:`upsert_job` inside the caller's transaction: insert; if the name is taken (and
    ``create_only`` is not set), lock the stored job and compare (:func:`replace_in`) — an
    unchanged declaration keeps its schedule, next fire instant and status; a changed one (or
    ``rearm``) replaces them (a completed job is active again) and its not-yet-started
    scheduled runs are skipped (``schedule_changed``)."""
    created = await tx.job_insert(params)
    if created is not None:
        if params.next_fire_at is None and is_bounded(created):  # nothing left in its bounds
            created = await tx.job_update(
                params,
                created,
                schedule=created.schedule,
                next_fire_at=None,
                status=JobStatus.COMPLETED,
            )
        return created, True
    if params.create_only:
        raise Conflict(f"a job named {params.name!r} already exists")
    old = await tx.job_lock(JobRef(tenant=params.tenant, name=params.name))
    if old is None:  # deleted between the insert and the lock
        raise Conflict(f"job {params.name!r} changed concurrently; try again")
    return await replace_in(tx, params, old), False


async def replace_in(tx: StoreTx, params: JobUpsertParams, old: Job) -> Job:
    """Rewrite the job ``old`` (locked by ``tx``) from ``params``. An unchanged declaration —
    an equivalent schedule (:func:`equivalent_schedules`), or a one-shot declared with the same
    delay (:func:`same_declaration`) — keeps the stored schedule, next fire instant and status,
    so a one-shot that already fired does not fire again. A changed one, or any with
    ``params.rearm``, replaces them (a completed job is active again), its not-yet-started
    scheduled runs are skipped (``schedule_changed``), and it takes effect from its next
    occurrence (:func:`changed_schedule`); its runs not yet due are withdrawn (deleted), so
    the new schedule may fire at their instants."""
    requested = declared_schedule(params, old)
    replaced = params.rearm or not (
        same_declaration(params, old) or equivalent_schedules(requested, old.schedule)
    )
    if not replaced:
        schedule, next_fire_at, status = old.schedule, old.next_fire_at, old.status
    else:
        status = status_after_schedule_change(old.status)
        await tx.runs_end_pending(
            old.id,
            RunState.SKIPPED,
            "schedule_changed",
            include_manual=False,
            after=params.declared_at,  # the instant the new schedule's first one is after
        )
        schedule, next_fire_at = await changed_schedule(tx, params, old, requested)
    next_fire_at, status = await bounded_state(
        tx, params, old, schedule, next_fire_at, status, replaced=replaced
    )
    return await tx.job_update(
        params, old, schedule=schedule, next_fire_at=next_fire_at, status=status
    )


def anchored_at_start(job: Job) -> bool:
    """Whether ``job`` is an ``every`` counting from its ``start_at`` (its anchor is that
    instant: one declared without an anchor, or with that one), so the anchor follows a
    changed ``start_at`` (docs/api.md "Bounds")."""
    return (
        job.schedule.kind is ScheduleKind.EVERY
        and job.start_at is not None
        and job.schedule.anchor == job.start_at
    )


def declared_schedule(params: JobUpsertParams, old: Job) -> Schedule:
    """The schedule ``params`` declare for the stored job ``old``, with the anchor an
    ``every`` declared without one counts from where the declaration decides it: its
    ``start_at`` when set; the instant of the declaration when ``old`` counted from a
    ``start_at`` that is now removed. Otherwise an ``every``'s anchor stays unset (an
    equivalent one keeps the stored anchor; :func:`changed_schedule`)."""
    requested = params.requested or params.schedule
    if requested.kind is not ScheduleKind.EVERY or requested.anchor is not None:
        return requested
    if params.start_at is not None:
        return replace(requested, anchor=params.start_at)
    if anchored_at_start(old) and params.declared_at is not None:
        return replace(requested, anchor=params.declared_at)
    return requested


async def bounded_state(
    tx: StoreTx,
    params: JobUpsertParams,
    old: Job,
    schedule: Schedule,
    next_fire_at: datetime | None,
    status: JobStatus,
    *,
    replaced: bool,
) -> tuple[datetime | None, JobStatus]:
    """The next fire instant and status of the recurring job ``old`` rewritten with
    ``params``' bounds (docs/decisions/0019-schedule-bounds.md). New ``start_at``/``end_at``
    skip its not-yet-started runs outside them (``out_of_bounds``). An active job with no
    occurrence left within its bounds is ``completed``; a completed one whose bounds (or
    schedule) were changed so that one is left again is active, from its next occurrence
    after now (the ones in between were never due, like a resumed job's). A paused or
    cancelled job keeps its status (resuming applies the bounds). ``replaced``: the schedule
    was replaced (its runs not yet due withdrawn, their count given back)."""
    if schedule.one_shot or status in (JobStatus.PAUSED, JobStatus.CANCELLED):
        return next_fire_at, status
    bounds = (params.start_at, params.end_at, params.max_runs)
    if bounds == (old.start_at, old.end_at, old.max_runs) and not replaced:
        return next_fire_at, status  # declared again unchanged
    runs_left = await _runs_left(tx, params, old, replaced)
    candidate = next_fire_at
    earlier_start = old.start_at is not None and (
        params.start_at is None or params.start_at < old.start_at
    )  # (a later one moves the candidate up by itself)
    if status is JobStatus.COMPLETED or earlier_start:
        candidate = next_fire_after(schedule, params.declared_at or await tx.now())
    candidate = Bounds(params.start_at, params.end_at, runs_left).next_occurrence(
        schedule, candidate
    )
    if candidate is None:
        return None, JobStatus.COMPLETED
    return candidate, JobStatus.ACTIVE


async def _runs_left(
    tx: StoreTx, params: JobUpsertParams, old: Job, schedule_changed: bool
) -> int | None:
    """The runs ``params.max_runs`` leaves ``old`` (None: no limit), once its not-yet-started
    runs outside a new ``start_at``/``end_at`` are withdrawn or skipped (``out_of_bounds``).
    Runs withdrawn so, or by a schedule change, gave their count back: the count is read
    again then."""
    counted = old.runs_created if old.max_runs is not None else 0
    withdrawn = schedule_changed
    if (params.start_at, params.end_at) != (old.start_at, old.end_at):
        ended = await tx.runs_end_outside(
            old.id, params.start_at, params.end_at, after=params.declared_at
        )
        withdrawn = withdrawn or ended > 0
    if withdrawn and counted:
        fresh = await tx.job_lock(JobRef(tenant=old.tenant, id=old.id))
        counted = old.runs_created if fresh is None else fresh.runs_created
    return None if params.max_runs is None else params.max_runs - counted


async def changed_schedule(
    tx: StoreTx, params: JobUpsertParams, old: Job, requested: Schedule | None = None
) -> tuple[Schedule, datetime | None]:
    """The schedule and first instant of ``old`` changed to ``params``' schedule (its
    not-yet-started runs already ended). A one-shot keeps what registration computed (its
    instant, due at once if past). A recurring one never fires at the instant of the change:
    an ``every`` takes the anchor of ``requested`` (:func:`declared_schedule`: the one given,
    else ``start_at``; default ``params``' schedule), else keeps the stored job's anchor when
    that was an ``every`` too (else it counts from the change), and the first instant is the
    first occurrence strictly after the change and after the job's latest fired occurrence
    (:func:`~duetime.schedules.first_fire_after_change`)."""
    schedule = params.schedule
    if schedule.one_shot:
        return schedule, params.next_fire_at
    requested = requested or params.requested or schedule
    now = params.declared_at or await tx.now()
    if schedule.kind is ScheduleKind.EVERY and requested.anchor is not None:
        schedule = replace(schedule, anchor=requested.anchor)
    elif schedule.kind is ScheduleKind.EVERY:
        kept = old.schedule.anchor if old.schedule.kind is ScheduleKind.EVERY else None
        schedule = replace(schedule, anchor=kept or now)
    last_fired = await tx.job_last_occurrence(old.id)
    return schedule, first_fire_after_change(schedule, now, last_fired)


def check_delivery(params: JobUpsertParams, dialect: str) -> None:
    """Refuse ``exactly_once`` delivery on SQLite (ValidationError)."""
    if params.delivery is DeliveryMode.EXACTLY_ONCE and dialect == "sqlite":
        raise ValidationError(
            "delivery",
            "exactly_once needs PostgreSQL; SQLite cannot "
            "commit a handler's writes with the run's completion",
        )


# --- partial updates ----------------------------------------------------------------------------


class RetryChanges(TypedDict, total=False):
    """Part of a retry policy: the fields given replace the job's, the others are kept."""

    max_attempts: int
    backoff_base: float
    backoff_factor: float
    backoff_cap: float
    within: float | timedelta | None
    permanent_on: Sequence[str | type[BaseException]]
    retry_on: Sequence[str | type[BaseException]]
    permanent_on_status: Sequence[int]
    retry_on_status: Sequence[int]


class JobChanges(TypedDict, total=False):
    """A partial update of a job (:meth:`duetime.app.Jobs.update_job`, ``PATCH /jobs/{id}``):
    each key given replaces the job's value, validated as :class:`JobSpec`'s field is; a key
    left out keeps it. The name cannot change.

    Giving any of ``cron``, ``at``, ``every`` or ``now`` replaces the whole schedule (give
    exactly one; ``tz`` and ``anchor`` are kept unless given). ``task`` alone drops a target
    and ``target`` alone drops the task; ``overlap`` alone resets ``max_concurrency`` to the
    policy's default. ``retry``: a :class:`~duetime.RetryPolicy`, a :class:`RetryChanges`
    merged onto the job's policy, or None for the defaults. None for ``timeout``,
    ``misfire_grace``, ``max_concurrency``, ``concurrency_key``, ``sla`` and
    ``expected_duration`` means none (or the default), as in ``schedule``."""

    task: str | None
    target: dict[str, Any] | None
    cron: str | None
    at: datetime | timedelta | None
    every: timedelta | float | str | CalendarInterval | None
    now: bool
    tz: str
    anchor: datetime | None
    payload: Any
    retry: RetryPolicy | RetryChanges | None
    priority: int
    timeout: float | None
    misfire: MisfirePolicy | str
    misfire_grace: float | None
    overlap: OverlapPolicy | str
    delivery: DeliveryMode | str
    queue: str
    tags: Sequence[str]
    metadata: dict[str, Any] | None
    max_concurrency: int | None
    concurrency_key: str | None
    max_backfill: int
    replace_timeout: float | timedelta
    max_waiting: int
    sla: float | timedelta | None
    expected_duration: float | timedelta | None
    jitter: float | timedelta
    start_at: datetime | None
    end_at: datetime | None
    max_runs: int | None
    calendars: Sequence[str]
    calendar_shift: str | None


SCHEDULE_CHANGES = frozenset({"cron", "at", "every", "now"})
"""The :class:`JobChanges` keys that replace a job's schedule."""


def spec_of(job: Job) -> JobSpec:
    """A stored job as the spec that declares it again unchanged (its schedule included, so
    its next fire instant is kept)."""
    s = job.schedule
    # a job copied field by field: the shape of the row mappers in store/ and api/, not their logic
    return JobSpec(
        name=job.name,
        task=job.task,
        target=job.target,
        cron=s.cron if s.kind is ScheduleKind.CRON else None,
        at=s.at if s.kind is ScheduleKind.AT else None,
        every=(s.every_calendar or s.every) if s.kind is ScheduleKind.EVERY else None,
        now=s.kind is ScheduleKind.NOW,
        tz=s.tz,
        anchor=s.anchor if s.kind is ScheduleKind.EVERY else None,
        payload=job.payload,
        retry=job.retry,
        priority=job.priority,
        timeout=job.timeout,
        misfire=job.misfire_policy,
        misfire_grace=job.misfire_grace,
        overlap=job.overlap_policy,
        delivery=job.delivery,
        queue=job.queue,
        tags=job.tags,
        metadata=dict(job.metadata),
        max_concurrency=job.max_concurrency,
        concurrency_key=job.concurrency_key,
        max_backfill=job.max_backfill,
        replace_timeout=job.replace_timeout,
        max_waiting=job.max_waiting,
        sla=job.sla,
        expected_duration=job.expected_duration,
        jitter=job.jitter,
        allow_past=True,  # accepted when it was declared
        start_at=job.start_at,
        end_at=job.end_at,
        max_runs=job.max_runs,
        calendars=job.calendars,
        calendar_shift=job.calendar_shift,
    )


def changed_spec(job: Job, changes: JobChanges) -> JobSpec:
    """``job``'s spec with ``changes`` applied (:class:`JobChanges`), not yet validated.
    An unknown key (the name included) is a ValidationError naming it."""
    values: dict[str, Any] = dict(changes)
    unknown = sorted(values.keys() - JobChanges.__optional_keys__)
    if unknown:
        raise ValidationError(unknown[0], "cannot be changed by an update")
    spec = spec_of(job)
    # an every's anchor other than its start_at was given (or is the one it counted from
    # before it had a start_at): it stays; one equal to start_at follows it
    kept_anchor = spec.anchor if job.start_at is not None and not anchored_at_start(job) else None
    if SCHEDULE_CHANGES & values.keys():
        spec = replace(
            spec, cron=None, at=None, every=None, now=False, anchor=kept_anchor, allow_past=False
        )
    elif "start_at" in values and "anchor" not in values and anchored_at_start(job):
        spec = replace(spec, anchor=None)  # it counted from start_at: it follows it
    if "task" in values and "target" not in values:
        values["target"] = None
    if "target" in values and "task" not in values:
        values["task"] = None
    if "overlap" in values and "max_concurrency" not in values:
        values["max_concurrency"] = None
    if (
        "overlap" in values
        and "max_waiting" not in values
        and not runs_wait(values["overlap"], values.get("max_concurrency"))
    ):
        values["max_waiting"] = 0  # a cap nothing would reach
    if "retry" in values:
        values["retry"] = _merged_retry(job.retry, values["retry"])
    if "tags" in values:
        values["tags"] = tuple(values["tags"])
    if "metadata" in values:
        values["metadata"] = {} if values["metadata"] is None else values["metadata"]
    return replace(spec, **values)


def runs_wait(policy: object, max_concurrency: object) -> bool:
    """Whether runs of a job wait for their key while it is busy, so that a ``max_waiting``
    means something: ``serialize``, or ``allow`` with a ``max_concurrency``."""
    return policy == OverlapPolicy.SERIALIZE or (
        policy == OverlapPolicy.ALLOW and bool(max_concurrency)
    )


def _merged_retry(current: RetryPolicy, change: object) -> object:
    """A :class:`RetryChanges` merged onto ``current``; anything else as it is (a policy,
    None for the defaults, or a wrong value validation refuses)."""
    if not isinstance(change, dict):
        return change
    unknown = sorted(change.keys() - RetryChanges.__optional_keys__)
    if unknown:
        raise ValidationError(f"retry.{unknown[0]}", "is not a retry setting")
    return replace(current, **change)


def changed_task(changes: JobChanges) -> str | None:
    """The task a registered-task check must know, if ``changes`` change it to a named
    function (a target runs under a built-in task; a wrong value is refused by validation)."""
    task = changes.get("task")
    target = changes.get("target")
    if isinstance(target, Mapping) and target.get("type") == "command":  # served by name
        return command_task(validate_command_target(target)["name"])
    if target is None and isinstance(task, str) and task:
        return task
    return None


async def change_job(
    store: Store, ref: JobRef, changes: JobChanges, *, settings: Settings, now: datetime
) -> Job:
    """Apply ``changes`` to the job ``ref`` atomically, in one store transaction: lock it,
    merge the changes onto its current values (a ``\"<redacted>\"`` header value keeps the stored
    one), validate the result as ``schedule`` does (:func:`build_upsert`) and rewrite it
    (:func:`replace_in`: a changed schedule skips its not-yet-started runs; an ``at`` delay
    counts from now, even the one the job was declared with). Concurrent
    updates of different fields all survive. Raises NotFound, ValidationError. A task is not
    checked against the known ones here (on SQLite that read would wait on this
    transaction): the caller checks :func:`changed_task` first."""
    async with store.transaction() as tx:
        old = await tx.job_lock(ref)
        if old is None:
            raise NotFound(f"job {ref.id or ref.name!s} not found")
        spec = changed_spec(old, changes)
        if has_redacted(spec.target):  # written back as read: keep the stored credentials
            spec = replace(spec, target=keep_redacted(spec.target, old.target))
        params = build_upsert(spec, tenant=old.tenant, settings=settings, now=now)
        if SCHEDULE_CHANGES & changes.keys():  # a delay given to an update counts from now
            params = replace(params, rearm=params.declared_delay is not None)
        else:  # the schedule is the stored one: so is the way it was declared
            params = replace(params, declared_delay=old.declared_delay)
        check_delivery(params, store.dialect)
        return await replace_in(tx, params, old)


def _retry(retry: RetryPolicy | None, settings: Settings) -> RetryPolicy:
    """The validated policy with its values as the store keeps them (an int and three
    floats): ``max_attempts`` a whole number 1-1000, the backoffs finite real numbers."""
    policy = retry
    if policy is None:
        policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            backoff_base=settings.backoff_base,
            backoff_factor=settings.backoff_factor,
            backoff_cap=settings.backoff_cap,
        )
    if not isinstance(policy, RetryPolicy):
        raise ValidationError("retry", "must be a duetime.Retry(...)")
    attempts = policy.max_attempts
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        raise ValidationError(
            "retry.max_attempts", f"must be a whole number from 1 to 1000, got {attempts!r}"
        )
    base, factor, cap = (
        _finite(v) for v in (policy.backoff_base, policy.backoff_factor, policy.backoff_cap)
    )
    if base is None or factor is None or cap is None or base < 0 or cap < 0 or factor < 1:
        raise ValidationError(
            "retry.backoff", "base and cap must be finite numbers >= 0 and factor one >= 1"
        )
    return retry_rules.validated(
        replace(
            policy,
            max_attempts=int(attempts),
            backoff_base=base,
            backoff_factor=factor,
            backoff_cap=cap,
        )
    )


def _finite(value: object) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _retry_types(retry: object) -> tuple[type, ...] | None:
    """The types of a retry policy's values (its equality does not tell ``True`` from ``1``)."""
    if not isinstance(retry, RetryPolicy):
        return None
    statuses = (retry.permanent_on_status, retry.retry_on_status)
    codes = [code for listed in statuses if isinstance(listed, tuple) for code in listed]
    values = (
        retry.max_attempts,
        retry.backoff_base,
        retry.backoff_factor,
        retry.backoff_cap,
        retry.within,
        *codes,  # a tuple's equality does not tell True from 1 either
    )
    return tuple(map(type, values))


def workflow_target(target: Mapping[str, Any], task: object) -> dict[str, Any]:
    """A workflow job's target, checked: ``{"type": "workflow", "name": <workflow>}``."""
    if task is not None and task != WORKFLOW_TASK:
        raise ValidationError("target", f"give either task or target, not both (task {task!r})")
    unknown = set(target) - {"type", "name"}
    if unknown:
        raise ValidationError("target", f"unknown field(s): {', '.join(sorted(unknown))}")
    name = target.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError("target.name", "must name a registered workflow")
    return {"type": "workflow", "name": name}


def task_and_target(spec: JobSpec) -> tuple[str, dict[str, Any] | None]:
    """The task a job runs under, and its validated target: a target (``{"type": "http",
    …}``) runs under the built-in task ``duetime.http``, a workflow (``{"type": "workflow",
    "name": …}``) under ``duetime.workflow``, a command (``{"type": "command", "name": …}``)
    under ``duetime.command:<name>`` (the task its serving workers publish); otherwise
    ``task`` names a function."""
    if isinstance(spec.target, Mapping) and spec.target.get("type") == "workflow":
        return WORKFLOW_TASK, workflow_target(spec.target, spec.task)
    if isinstance(spec.target, Mapping) and spec.target.get("type") == "command":
        command = validate_command_target(spec.target)
        task = command_task(command["name"])
        if spec.task is not None and spec.task != task:
            raise ValidationError("target", f"give either task or target, not both ({spec.task!r})")
        return task, command
    if is_broker_target(spec.target):  # redis, rabbitmq, nats: duetime.broker:<connection>
        task, broker = validate_broker_target(spec.target)
        if spec.task is not None and spec.task != task:
            raise ValidationError("target", f"give either task or target, not both ({spec.task!r})")
        return task, broker
    if spec.target is not None:
        if spec.task is not None and spec.task != HTTP_TASK:
            raise ValidationError(
                "target", f"give either task or target, not both (task {spec.task!r})"
            )
        target = validate_target(spec.target)
        refuse_redacted(target)  # AsyncApp.schedule_spec put back the values it could keep
        return HTTP_TASK, target
    if spec.task == HTTP_TASK:
        raise ValidationError(
            "target", f"{HTTP_TASK} needs a target such as {{'type': 'http', 'url': ...}}"
        )
    if not isinstance(spec.task, str) or not spec.task:
        raise ValidationError(
            "task", "must name a task, e.g. 'billing.settle' (or give a target instead)"
        )
    return spec.task, None


CronTimes = dict[tuple[str, str, datetime], tuple[Schedule, datetime | None]]
"""(cron expression as given, zone, now) → its validated schedule and first fire instant,
for cron expressions without ``H`` (see :func:`build_upsert`)."""

CRON_TIMES_MAX = 4096
"""Entries a :data:`CronTimes` cache keeps before it starts over."""


def build_upsert(
    spec: JobSpec,
    *,
    tenant: str,
    settings: Settings,
    now: datetime,
    create_only: bool = False,
    rearm: bool = False,
    cron_times: CronTimes | None = None,
) -> JobUpsertParams:
    """Validate ``spec`` and build the store's upsert params. Raises ValidationError.

    An ``at`` given as a delay is resolved against ``now`` and kept as declared
    (``declared_delay``: the same delay declared again keeps the stored instant); ``rearm``
    makes an existing job's schedule count as changed (:func:`replace_in`).

    ``cron_times``: a cache of validated cron schedules and their first instants, for many
    specs at once (bulk registration repeats a few thousand expressions over millions of
    jobs); a schedule is only cached once it validated, so an invalid one is checked, and
    refused, every time."""
    _check_name(spec.name)
    shared = _shared_fields(spec, settings)
    payload = _json.encode_payload(spec.payload, limit=settings.payload_limit)
    _metadata(spec.metadata, settings)
    requested, resolved, next_fire_at = _job_schedule(spec, tenant, now, cron_times)
    _check_past(spec, requested, now, shared["misfire_grace"])
    resolved, next_fire_at = bounded_first(requested, resolved, next_fire_at, shared, now)
    job_id = new_job_id()
    return JobUpsertParams(
        tenant=tenant,
        name=spec.name,
        payload=payload,
        schedule=resolved,
        next_fire_at=next_fire_at,
        requested=requested,
        metadata=dict(spec.metadata),
        partition=partition_of(job_id),
        job_id=job_id,
        create_only=create_only,
        declared_delay=spec.at if isinstance(spec.at, timedelta) else None,
        rearm=rearm,
        declared_at=now,
        tzdata_version=tzdb.current().version,
        **shared,
    )


SHARED_SPEC_FIELDS = (
    "task", "target", "priority", "retry", "timeout", "misfire", "misfire_grace", "overlap",
    "delivery", "queue", "tags", "max_concurrency", "concurrency_key", "max_backfill", "sla",
    "expected_duration", "jitter", "replace_timeout", "max_waiting", "start_at", "end_at",
    "max_runs", "calendars", "calendar_shift",
)  # fmt: skip
"""The spec fields :func:`_shared_fields` reads: the part of a job many jobs of a bulk
registration have in common (everything but name, schedule, payload and metadata)."""


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise ValidationError("name", f"must be 1-{MAX_NAME} characters")
    if not name.isprintable():
        raise ValidationError("name", "must contain only printable characters")


def _metadata(metadata: object, settings: Settings) -> str:
    """The encoded metadata object."""
    if not isinstance(metadata, dict):
        raise ValidationError("metadata", "must be a JSON object")
    return _json.encode_payload(metadata, limit=settings.payload_limit, field="metadata")


def _shared_fields(spec: JobSpec, settings: Settings) -> dict[str, Any]:
    """The validated :class:`JobUpsertParams` fields that depend only on the spec's
    :data:`SHARED_SPEC_FIELDS` (and the settings)."""
    check_priority(spec.priority)
    timeout = None if spec.timeout is None else _finite(spec.timeout)
    if spec.timeout is not None and not (timeout is not None and 0 < timeout <= MAX_SECONDS):
        raise ValidationError(
            "timeout",
            f"must be a positive number of seconds (at most 10 years), got {spec.timeout!r}",
        )
    grace = _finite(settings.misfire_grace if spec.misfire_grace is None else spec.misfire_grace)
    if grace is None or not 0 <= grace <= MAX_SECONDS:  # bools, NaN and infinities too
        raise ValidationError(
            "misfire_grace",
            f"must be 0 to {MAX_SECONDS:.0f} seconds (10 years), got {spec.misfire_grace!r}",
        )
    if not isinstance(spec.queue, str) or not 0 < len(spec.queue) <= 100:
        raise ValidationError("queue", "must be 1-100 characters")
    if not spec.queue.isprintable():
        raise ValidationError("queue", "must contain only printable characters")
    if not all(_valid_tag(t) for t in spec.tags):
        raise ValidationError(
            "tags", "must be non-empty printable strings of at most 100 characters"
        )
    task, target = task_and_target(spec)
    return {
        "task": task,
        "target": target,
        "priority": spec.priority,
        "retry": _retry(spec.retry, settings),
        "timeout": timeout,
        "misfire_policy": enum_value(MisfirePolicy, spec.misfire, "misfire"),
        "misfire_grace": float(grace),
        "overlap_policy": enum_value(OverlapPolicy, spec.overlap, "overlap"),
        "delivery": enum_value(DeliveryMode, spec.delivery, "delivery"),
        "queue": spec.queue,
        "tags": tuple(spec.tags),
        "sla": _seconds_or_none(spec.sla, "sla"),
        "expected_duration": _seconds_or_none(spec.expected_duration, "expected_duration"),
        "jitter": _jitter(spec.jitter),
        **validated_bounds(spec.start_at, spec.end_at, spec.max_runs),
        **_overlap_fields(spec),
    }


def _job_schedule(
    spec: JobSpec, tenant: str, now: datetime, cron_times: CronTimes | None
) -> tuple[Schedule, Schedule, datetime | None]:
    """The validated schedule as requested, as stored (an ``every`` anchor filled in), and
    its first instant."""
    cron, tz = spec.cron, spec.tz
    # only well-typed cron-only specs are looked up (a bad one must reach validation's error)
    cacheable = (
        cron_times is not None
        and type(cron) is str
        and type(tz) is str
        and spec.at is None
        and spec.every is None
        and not spec.now
    )
    if cron_times is not None and cacheable:
        known = cron_times.get((cast(str, cron), tz, now))
        if known is not None:
            return known[0], known[0], known[1]
    requested = _schedule(spec, now)
    if requested.kind is ScheduleKind.CRON:  # what its H values hash (docs/fairness.md)
        seed = job_hash_seed(tenant, spec.name, requested.cron)
        if seed is not None:
            requested = replace(requested, hash_seed=seed)
    validate_schedule(requested, now)
    resolved = requested
    if requested.kind is ScheduleKind.EVERY and requested.anchor is None:
        resolved = replace(requested, anchor=now)
    next_fire_at = first_fire(resolved, now)
    if cron_times is not None and cacheable and requested.hash_seed is None:
        if len(cron_times) >= CRON_TIMES_MAX:
            cron_times.clear()
        cron_times[(cast(str, cron), tz, now)] = (requested, next_fire_at)
    return requested, resolved, next_fire_at


def _check_past(spec: JobSpec, requested: Schedule, now: datetime, grace: float) -> None:
    """Refuse an ``at`` further in the past than the misfire grace unless ``allow_past``:
    it would fire at once, most likely not what was meant (a typo in the year)."""
    if requested.kind is not ScheduleKind.AT or requested.at is None or spec.allow_past:
        return
    late = (now - requested.at).total_seconds()
    if late > grace:
        ago = f"{late:,.0f} s" if late < 7200 else f"{late / 3600:,.0f} h"
        ago = ago if late < 172800 else f"{late / 86400:,.0f} days"
        raise ValidationError(
            "at",
            f"{requested.at.isoformat()} is {ago} in the past, more than the misfire grace "
            f"({grace:g} s); give allow_past=True (--allow-past) to run it at once",
        )


def new_job_id() -> uuid.UUID:
    """A new job id: a version-7 UUID (RFC 9562: milliseconds since the Unix epoch, then 74
    random bits), so new jobs land at the right edge of the primary key's index instead of on
    a random page of it (docs/decisions/0007)."""
    return _version_7(time.time_ns() // 1_000_000, int.from_bytes(os.urandom(16)))


_RANDOM_BITS = ((1 << 62) - 1) | (((1 << 12) - 1) << 64)
_VERSION_7 = (7 << 76) | (0b10 << 62)


def _version_7(millis: int, random: int) -> uuid.UUID:
    return uuid.UUID(int=(millis & ((1 << 48) - 1)) << 80 | random & _RANDOM_BITS | _VERSION_7)


class _JobIds:
    """Job ids (:func:`new_job_id`) with their partitions, the randomness drawn from
    ``os.urandom`` a block at a time. Not shared across processes."""

    BLOCK = 256

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def next(self) -> tuple[uuid.UUID, int]:
        if self._at >= len(self._pool):
            self._pool, self._at = os.urandom(16 * self.BLOCK), 0
        random = int.from_bytes(self._pool[self._at : self._at + 16])
        self._at += 16
        job_id = _version_7(time.time_ns() // 1_000_000, random)
        return job_id, partition_of(job_id)


def _bulk_bounded(
    requested: Schedule,
    resolved: Schedule,
    first: datetime | None,
    shape: JobUpsertParams,
    now: datetime,
) -> tuple[Schedule, datetime | None]:
    """:func:`~duetime.scheduler.bounds.bounded_first` for a job of a bulk shape. Bulk rows are
    created active: a job with no occurrence left in its bounds keeps its first unbounded
    instant, and the scheduler completes it when that instant comes."""
    bounds = {"start_at": shape.start_at, "end_at": shape.end_at, "max_runs": shape.max_runs}
    schedule, bounded = bounded_first(requested, resolved, first, bounds, now)
    return schedule, bounded if bounded is not None else first_fire(schedule, now)


class BulkValidator:
    """Validates the specs of one bulk registration (:meth:`AsyncApp.schedule_many`) into
    :class:`BulkJob` rows, as :func:`build_upsert` would.

    Specs whose :data:`SHARED_SPEC_FIELDS` are equal — value and type — share one *shape*:
    the first is validated whole and becomes the shape; the rest only have their name,
    schedule, payload and metadata checked. A spec with an unhashable shared field (a target,
    a list of tags) is validated whole on its own. Not thread-safe; one per call."""

    SHAPES_MAX = 1024
    """Shapes kept before the cache starts over."""

    _shared_of = operator.attrgetter(*SHARED_SPEC_FIELDS)

    def __init__(self, *, tenant: str, settings: Settings, now: datetime) -> None:
        self.tenant, self.settings, self.now = tenant, settings, now
        self._shapes: dict[tuple[Any, ...], JobUpsertParams] = {}
        self._cron_times: CronTimes = {}
        self._ids = _JobIds()

    def job(self, spec: JobSpec) -> BulkJob:
        """``spec`` validated; raises ValidationError naming the field."""
        values = self._shared_of(spec)
        key = (values, tuple(map(type, values)), _retry_types(spec.retry))
        try:
            shape = self._shapes.get(key)
        except TypeError:  # an unhashable shared field
            return BulkJob.of(self._whole(spec))
        if shape is None:
            shape = self._whole(spec)
            if len(self._shapes) >= self.SHAPES_MAX:
                self._shapes.clear()
            self._shapes[key] = shape
            return BulkJob.of(shape)
        _check_name(spec.name)
        payload = _json.encode_payload(spec.payload, limit=self.settings.payload_limit)
        metadata = _metadata(spec.metadata, self.settings)
        requested, resolved, next_fire_at = _job_schedule(
            spec, self.tenant, self.now, self._cron_times
        )
        _check_past(spec, requested, self.now, shape.misfire_grace)
        resolved, next_fire_at = _bulk_bounded(requested, resolved, next_fire_at, shape, self.now)
        job_id, partition = self._ids.next()
        name = spec.name
        return BulkJob(shape, job_id, name, payload, metadata, resolved, next_fire_at, partition)

    def _whole(self, spec: JobSpec) -> JobUpsertParams:
        params = build_upsert(
            spec,
            tenant=self.tenant,
            settings=self.settings,
            now=self.now,
            create_only=True,
            cron_times=self._cron_times,
        )
        if params.next_fire_at is None and not params.schedule.one_shot:  # past its bounds
            params = replace(params, next_fire_at=first_fire(params.schedule, self.now))
        return params  # (bulk rows are created active: see _bulk_bounded)


def _seconds_or_none(value: object, field_name: str) -> float | None:
    """An optional positive number of seconds (a timedelta is accepted too)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_SECONDS
    ):
        raise ValidationError(field_name, "must be a positive number of seconds (at most 10 years)")
    return float(value)


def _overlap_fields(spec: JobSpec) -> dict[str, Any]:
    policy = enum_value(OverlapPolicy, spec.overlap, "overlap")
    limit = spec.max_concurrency
    if limit is None:
        limit = 0 if policy is OverlapPolicy.ALLOW else 1
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 10_000:
        raise ValidationError("max_concurrency", "must be a whole number from 0 to 10000")
    if limit != 1 and policy is not OverlapPolicy.ALLOW:
        raise ValidationError(
            "max_concurrency", f"only overlap 'allow' runs several at once (overlap is {policy})"
        )
    key = spec.concurrency_key
    if key is not None and not (isinstance(key, str) and 0 < len(key) <= 200 and key.isprintable()):
        raise ValidationError("concurrency_key", "must be 1-200 printable characters")
    if key is not None and limit == 0:
        raise ValidationError("max_concurrency", "a concurrency key needs a limit of at least 1")
    backfill = spec.max_backfill
    if isinstance(backfill, bool) or not isinstance(backfill, int) or not 1 <= backfill <= 10_000:
        raise ValidationError("max_backfill", "must be a whole number from 1 to 10000")
    return {
        "max_concurrency": limit,
        "concurrency_key": key,
        "max_backfill": backfill,
        **_waiting_fields(spec, policy, limit),
        **calendar_fields(spec.calendars, spec.calendar_shift),
    }


REPLACE_TIMEOUT_MIN = 0.1
"""Seconds: the least ``replace_timeout`` — a replaced run's worker must be able to hear the
request and its handler to see ``ctx.cancelled`` (decision 0016)."""


def _waiting_fields(spec: JobSpec, policy: OverlapPolicy, limit: int) -> dict[str, Any]:
    """``replace_timeout`` (0.1 s to a day) and ``max_waiting`` (0-10000; only where runs wait
    for their key: ``serialize``, or ``allow`` with a limit — ``limit`` is max_concurrency,
    0 for none)."""
    timeout = spec.replace_timeout
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not REPLACE_TIMEOUT_MIN <= timeout <= 86400
    ):
        raise ValidationError(
            "replace_timeout", "must be a number of seconds from 0.1 to 86400 (1 day)"
        )
    waiting = spec.max_waiting
    if isinstance(waiting, bool) or not isinstance(waiting, int) or not 0 <= waiting <= 10_000:
        raise ValidationError("max_waiting", "must be a whole number from 0 (no limit) to 10000")
    if waiting and not runs_wait(policy, limit):
        raise ValidationError(
            "max_waiting",
            "with overlap 'allow', runs wait only at max_concurrency: set max_concurrency too"
            if policy is OverlapPolicy.ALLOW
            else f"only runs of overlap 'serialize' or 'allow' wait for their key (overlap is "
            f"{policy})",
        )
    return {"replace_timeout": float(timeout), "max_waiting": waiting}


def request_hash(payload: Any, priority: int | None) -> str:
    """Fingerprint of a trigger request: the same idempotency key must carry the same request."""
    return hashlib.sha256(
        _json.dumps({"payload": payload, "priority": priority}).encode()
    ).hexdigest()
