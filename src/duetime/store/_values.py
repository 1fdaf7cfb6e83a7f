"""Column values for the rows a store writes, and the job status rules — shared by dialects.

Values are Python objects (datetime, UUID, str); each store encodes them for its driver.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime import _json
from duetime._types import Job, MisfirePolicy, OverlapPolicy, RetryPolicy, RunTrigger, Schedule
from duetime.policies.retry_rules import rules_document
from duetime.store.base import JobUpsertParams, PlannedRun, RunCompletion, RunTriggerParams

_MICROSECOND = timedelta(microseconds=1)


def job_values(
    params: JobUpsertParams, job_id: uuid.UUID, schedule: Schedule, next_fire_at: datetime | None
) -> dict[str, Any]:
    calendar = schedule.every_calendar
    return {
        "id": job_id,
        "tenant": params.tenant,
        "name": params.name,
        "task": params.task,
        "payload": params.payload,
        "schedule_kind": str(schedule.kind),
        "cron": schedule.cron,
        "tz": schedule.tz,
        "at_instant": schedule.at,
        "every_us": schedule.every,
        "every_count": None if calendar is None else calendar.count,
        "every_unit": None if calendar is None else str(calendar.unit),
        "anchor": schedule.anchor,
        "priority": params.priority,
        "max_attempts": params.retry.max_attempts,
        "retry_rules": _rules_text(params.retry),
        "backoff_base": params.retry.backoff_base,
        "backoff_factor": params.retry.backoff_factor,
        "backoff_cap": params.retry.backoff_cap,
        "timeout_s": params.timeout,
        "misfire_policy": str(params.misfire_policy),
        "misfire_grace_s": params.misfire_grace,
        "overlap_policy": str(params.overlap_policy),
        "delivery": str(params.delivery),
        "queue": params.queue,
        "tags": _json.dumps(list(params.tags)),
        "metadata": _json.dumps(params.metadata),
        "partition_key": params.partition,
        "next_fire_at": next_fire_at,
        "target": None if params.target is None else _json.dumps(params.target),
        "max_concurrency": params.max_concurrency,
        "concurrency_key": params.concurrency_key,
        "max_backfill": params.max_backfill,
        "sla_s": params.sla,
        "expected_duration_s": params.expected_duration,
        "jitter_s": params.jitter,
        "declared_delay_us": (
            None if params.declared_delay is None else params.declared_delay // _MICROSECOND
        ),
        "start_at": params.start_at,
        "end_at": params.end_at,
        "max_runs": params.max_runs,
        "replace_timeout_s": params.replace_timeout,
        "max_waiting": params.max_waiting,
        "calendars": _json.dumps(list(params.calendars)) if params.calendars else None,
        "calendar_shift": params.calendar_shift,
        "tzdata_version": params.tzdata_version,
    }


def _rules_text(retry: RetryPolicy) -> str | None:
    """The ``retry_rules`` column as JSON text (NULL without a window or classification)."""
    document = rules_document(retry)
    return None if document is None else _json.dumps(document)


def new_webhook_secret() -> str:
    """A fresh per-tenant webhook signing secret (256 random bits, hex)."""
    return secrets.token_hex(32)


def overlap_key(job: Job) -> str | None:
    """The key whose running runs a claim must count before starting a run of ``job``: its
    concurrency key, or the job itself; None when nothing limits it (``allow``, unlimited)."""
    if job.concurrency_key is not None:
        return f"key:{job.concurrency_key}"
    if job.overlap_policy is OverlapPolicy.ALLOW and job.max_concurrency == 0:
        return None
    return f"job:{job.id}"


def _run_values(
    job: Job, scheduled_for: datetime, available_at: datetime, misfire_from: datetime | None = None
) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "job_id": job.id,
        "partition_key": job.partition,
        "tenant": job.tenant,
        "job_name": job.name,
        "task": job.task,
        "queue": job.queue,
        "payload": _json.dumps(job.payload),
        "scheduled_for": scheduled_for,
        "available_at": available_at,
        "priority": job.priority,
        "max_attempts": job.retry.max_attempts,
        "retry_rules": _rules_text(job.retry),
        "backoff_base": job.retry.backoff_base,
        "backoff_factor": job.retry.backoff_factor,
        "backoff_cap": job.retry.backoff_cap,
        "timeout_s": job.timeout,
        "delivery": str(job.delivery),
        "one_shot": job.schedule.one_shot,
        "trigger": str(RunTrigger.SCHEDULE),
        "idempotency_key": None,
        "request_hash": None,
        "target": None if job.target is None else _json.dumps(job.target),
        "concurrency_key": overlap_key(job),
        "misfire_at": misfire_deadline(job, misfire_from or scheduled_for),
        "origin": None,
    }


def misfire_deadline(job: Job, scheduled_for: datetime) -> datetime | None:
    """When a scheduled run of ``job`` that never started misfires: its instant plus the job's
    grace, for the policies that skip. None when no judge could ever skip it: ``backfill``
    runs every occurrence, and ``fire_once`` skips a run only for a later occurrence that a
    one-shot job never has (a run nobody can act on would sit in the judge's index)."""
    if job.misfire_policy is MisfirePolicy.BACKFILL:
        return None
    if job.misfire_policy is MisfirePolicy.FIRE_ONCE and job.schedule.one_shot:
        return None
    return scheduled_for + timedelta(seconds=job.misfire_grace)


def planned_run_values(job: Job, planned: PlannedRun) -> dict[str, Any]:
    """A planned run's row: a run moved by a calendar shift misfires counting from the instant
    it was moved to; a backfilled one (origin ``backfill``) never misfires."""
    values = _run_values(
        job,
        planned.scheduled_for,
        planned.available_at,
        planned.available_at if planned.shifted else None,
    )
    if planned.origin is not None:
        values["origin"] = planned.origin
        values["misfire_at"] = None
    return values


def trigger_run_values(job: Job, params: RunTriggerParams, now: datetime) -> dict[str, Any]:
    values = _run_values(job, now, now)
    values["trigger"] = str(RunTrigger.MANUAL)
    values["one_shot"] = False
    values["misfire_at"] = None  # a manual run is never judged a misfire
    values["idempotency_key"] = params.idempotency_key or f"auto:{values['id']}"
    values["request_hash"] = params.request_hash
    if params.payload is not None:
        values["payload"] = params.payload
    if params.priority is not None:
        values["priority"] = params.priority
    return values


CompletionKey = tuple[int, int]
"""A completion's (run id's integer, token): ``UUID.int`` because a UUID hashes in Python code,
and each completion is looked up several times per batch."""


def unique_completions(
    completions: Sequence[RunCompletion],
) -> tuple[list[RunCompletion], dict[CompletionKey, int]]:
    """A completion batch as a store writes it: each (run, token) once — a repeat in the same
    batch is refused like a late repeat — in run-id order (PostgreSQL's heartbeats and starts
    lock their rows in that order too: no deadlock). Also returns where each (run, token) came
    first, for :func:`completion_answers`."""
    first: dict[CompletionKey, int] = {}
    for index, c in enumerate(completions):
        first.setdefault((c.run_id.int, c.token), index)
    # by the id's integer: the same order as the UUIDs', without a Python-level comparison
    unique = sorted((completions[i] for i in first.values()), key=lambda c: c.run_id.int)
    return unique, first


def completion_answers(
    completions: Sequence[RunCompletion],
    first: dict[CompletionKey, int],
    applied: Collection[CompletionKey],
) -> list[bool]:
    """``runs_complete``'s answer, one flag per completion in order: True only for the first
    of a (run, token) whose outcome was applied (``applied`` holds :data:`CompletionKey`
    pairs)."""
    answers = []
    for index, c in enumerate(completions):
        key = (c.run_id.int, c.token)
        answers.append(index == first[key] and key in applied)
    return answers
