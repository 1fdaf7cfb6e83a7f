"""The REST API's request and response bodies (pydantic), and the conversions from duetime's
value types. Instants are ISO 8601 UTC (``…Z``); durations are seconds.

Every string a client sends is constrained (no NUL, bounded length) so that nothing a client
sends reaches the store in a form it cannot hold: invariant 6, no 5xx from client input.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, Self, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from duetime._durations import MAX_SECONDS, interval_words, iso_duration_seconds
from duetime._redact import REDACTED, redact_target
from duetime._types import (  # an import list like other modules': not logic
    ApiKey,
    ApiRole,
    Attempt,
    AttemptOutcome,
    CalendarInterval,
    DeliveryMode,
    Job,
    JobStatus,
    MisfirePolicy,
    Occurrence,
    OverlapPolicy,
    Page,
    RetryPolicy,
    Run,
    RunState,
    RunTrigger,
    Schedule,
    ScheduleKind,
)
from duetime.errors import NotFound, ValidationError
from duetime.registration import MAX_JITTER, PRIORITY_MAX, PRIORITY_MIN, RetryChanges
from duetime.schedules import parse_every as parse_every_text

T = TypeVar("T")
NO_NUL = r"^[^\x00]*$"
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=PRINTABLE)]
Short = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=NO_NUL)]
Text = Annotated[str, StringConstraints(max_length=4000, pattern=NO_NUL)]
LongText = Annotated[str, StringConstraints(max_length=65536, pattern=NO_NUL)]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=PRINTABLE)]
# Numbers and booleans are strict (invariant 6 again: nothing is silently coerced): true is
# not 1, "5" is not 5, 2.0 is not a whole number; NaN and ±Infinity (which Python's JSON parser
# reads from the tokens NaN, Infinity, -Infinity and from 1e999) are refused as not finite.
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True)]
PositiveSeconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True)]
Priority = Annotated[int, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX, strict=True)]
Flag = Annotated[bool, Field(strict=True)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- parsing ----------------------------------------------------------------------------------


def parse_duration(text: str, field: str) -> timedelta:
    """An ISO 8601 duration (``PT3H``, ``P1DT2H30M``, ``P2W``; no years or months): the REST
    API's documented forms only, not the CLI's short ones (``90s``)."""
    seconds = iso_duration_seconds(text)
    if seconds is None:
        raise ValidationError(field, f"{text!r} is not an ISO 8601 duration such as PT3H")
    if not 0 <= seconds <= MAX_SECONDS:
        raise ValidationError(field, f"must be at most {MAX_SECONDS:.0f} seconds")
    return timedelta(seconds=seconds)


def utc(value: datetime, field: str) -> datetime:
    """An aware instant in UTC; naive or out-of-range ones are a ValidationError."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "needs a time zone offset or Z (e.g. 2026-12-01T10:00:00Z)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(field, "is out of range") from None


def parse_at(text: str, now: datetime) -> datetime | timedelta:
    """``at``: an ISO 8601 instant with an offset, or a duration from now (``PT3H``)."""
    stripped = text.strip()
    if stripped[:1] in ("P", "p"):
        return parse_duration(stripped, "at")
    try:
        value = datetime.fromisoformat(stripped)
    except ValueError:
        raise ValidationError(
            "at",
            f"{text!r} is neither an ISO 8601 instant (2026-12-01T10:00:00Z) nor a duration (PT3H)",
        ) from None
    instant = utc(value, "at")
    if instant - now > timedelta(seconds=MAX_SECONDS) or instant.year < 1971:
        raise ValidationError("at", "is out of range")
    return instant


_EVERY_HINT = (
    "give seconds (90), an ISO 8601 duration (PT15M), or a count of seconds, minutes, hours, "
    "days, weeks or months in words ('90 seconds', '1 day', '2 weeks', '1 month')"
)


def parse_every(value: float | str) -> timedelta | CalendarInterval:
    """``every``: seconds, an ISO 8601 duration (``PT15M``: fixed), or a count of units in
    words — ``"90 seconds"``, ``"2 hours"`` (fixed), ``"1 day"``, ``"2 weeks"``, ``"1 month"``
    (calendar units, in ``tz``)."""
    if not isinstance(value, str):
        return timedelta(seconds=value)
    if interval_words(value) is None:
        if iso_duration_seconds(value) is None:
            raise ValidationError(
                "every", f"{value.strip()[:80]!r} is not an interval: {_EVERY_HINT}"
            )
        return parse_duration(value, "every")
    every = parse_every_text(value, short_forms=False)
    if isinstance(every, timedelta) and every.total_seconds() > MAX_SECONDS:
        raise ValidationError("every", f"must be at most {MAX_SECONDS:.0f} seconds")
    return every


def _check_every(value: object) -> object:
    """``every`` before the number-or-duration union: one clear error for what is neither (a
    union reports one per member), for ``true`` (not a second) and for a number out of range."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number or text: {_EVERY_HINT}")
    if not math.isfinite(value):
        raise ValueError("must be a finite number of seconds (not NaN or Infinity)")
    if not 0 < value <= MAX_SECONDS:
        raise ValueError(f"must be above 0 and at most {MAX_SECONDS:.0f} seconds")
    return value


def parse_id(value: str, what: str) -> uuid.UUID:
    """A path or filter id: malformed ones are simply not found (404), like unknown ones."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"{what} {value[:80]!r} not found (not a {what} id)") from None


# --- requests ---------------------------------------------------------------------------------


class RetryIn(_Body):
    """Retries of one run; omitted fields take the server's defaults."""

    max_attempts: int | None = Field(
        default=None, ge=1, le=1000, strict=True, description="Counts the first try."
    )
    backoff_base: Seconds | None = None
    backoff_factor: float | None = Field(
        default=None, ge=1, le=100, allow_inf_nan=False, strict=True
    )
    backoff_cap: Seconds | None = None
    within: PositiveSeconds | None = Field(
        default=None,
        description="Seconds after the run's scheduled instant (or its last replay) past "
        "which no retry is scheduled: the run goes dead, reason retry_window_exhausted. "
        "Null: no window (in a PATCH, removes it).",
    )
    permanent_on: list[Short] | None = Field(
        default=None,
        max_length=50,
        description="Exception classes (ValueError, myapp.errors.Fatal) whose failures end the "
        "run at once; the most specific class named in permanent_on or retry_on decides.",
    )
    retry_on: list[Short] | None = Field(
        default=None,
        max_length=50,
        description="Exception classes retried even where duetime would not (a subclass of "
        "one in permanent_on, duetime.Permanent, duetime.UsageError).",
    )
    permanent_on_status: list[Annotated[int, Field(strict=True)]] | None = Field(
        default=None,
        max_length=100,
        description="HTTP targets: response statuses (300-599) that end the run at once "
        "(default: 3xx and 4xx other than 408 and 429).",
    )
    retry_on_status: list[Annotated[int, Field(strict=True)]] | None = Field(
        default=None,
        max_length=100,
        description="HTTP targets: response statuses (300-599) that are retried (default: "
        "408, 429 and 5xx).",
    )

    def policy(self, default: RetryPolicy) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts or default.max_attempts,
            backoff_base=default.backoff_base if self.backoff_base is None else self.backoff_base,
            backoff_factor=self.backoff_factor or default.backoff_factor,
            backoff_cap=default.backoff_cap if self.backoff_cap is None else self.backoff_cap,
            within=self.within,
            permanent_on=tuple(self.permanent_on or ()),
            retry_on=tuple(self.retry_on or ()),
            permanent_on_status=tuple(self.permanent_on_status or ()),
            retry_on_status=tuple(self.retry_on_status or ()),
        )

    def changes(self) -> RetryChanges:
        """The fields given (not null, but for ``within``: null removes the window), to merge
        onto a job's policy (PATCH)."""
        changes = self.model_dump(exclude_none=True)
        if "within" in self.model_fields_set and self.within is None:
            changes["within"] = None
        return cast(RetryChanges, changes)


class JobFields(_Body):
    """What ``POST /jobs`` and ``PATCH /jobs/{id}`` share (``app.schedule``'s arguments)."""

    task: Short | None = Field(
        default=None, description="A task name some worker serves (or give `target`)."
    )
    target: dict[str, Any] | None = Field(
        default=None,
        description='Instead of a task: `{"type": "http", "url": …, "method": …, "headers": …, '
        '"timeout": …}` — each run is sent as a signed webhook. A header value '
        f'"{REDACTED}" (as jobs are read) keeps the job\'s stored value.',
    )
    cron: Annotated[str, StringConstraints(max_length=200, pattern=PRINTABLE)] | None = Field(
        default=None, description="Cron expression (5 fields, or 6 with seconds), in `tz`."
    )
    at: Annotated[str, StringConstraints(max_length=100, pattern=PRINTABLE)] | None = Field(
        default=None,
        description="One run at an ISO 8601 instant with offset (2026-12-01T10:00:00Z), or "
        "after an ISO 8601 duration from now (PT3H).",
    )
    every: Annotated[
        PositiveSeconds | Annotated[str, StringConstraints(max_length=100)] | None,
        BeforeValidator(_check_every),
    ] = Field(
        default=None,
        description="Interval: seconds, an ISO 8601 duration (PT15M), or a count of units in "
        'words: "90 seconds", "5 minutes", "2 hours" are fixed durations; "1 day", "2 weeks", '
        '"1 month" are calendar units that keep the wall time in `tz` across DST changes '
        "(a month keeps the anchor's day, clamped to the month's last day).",
    )
    now: Flag | None = Field(default=None, description="One run, due at once.")
    tz: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=PRINTABLE)] = Field(
        default="UTC",
        description="IANA time zone of `cron` and of an `every` in days, weeks or months (and "
        "of local times).",
    )
    anchor: datetime | None = Field(
        default=None,
        description="With `every`: the instant the intervals count from (default: when the "
        "job is created; a changed schedule keeps the job's anchor).",
    )
    payload: Any = Field(default=None, description="JSON handed to each run.")
    retry: RetryIn | None = None
    priority: Priority = Field(
        default=0,
        description=f"{PRIORITY_MIN} to {PRIORITY_MAX}, higher runs first; a run that waits "
        "rises by aging (docs/fairness.md).",
    )
    jitter: Annotated[float, Field(ge=0, le=MAX_JITTER, allow_inf_nan=False, strict=True)] = Field(
        default=0.0,
        description="Seconds: each run becomes available up to this much after its scheduled "
        "instant (deterministic per job and occurrence; `scheduled_for` does not move).",
    )
    timeout: PositiveSeconds | None = Field(default=None, description="Seconds per attempt.")
    misfire: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    misfire_grace: Seconds | None = Field(
        default=None, description="Older occurrences count as missed (default: server's)."
    )
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    delivery: DeliveryMode = DeliveryMode.AT_LEAST_ONCE
    queue: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=PRINTABLE)] = (
        "default"
    )
    tags: list[Tag] = Field(default_factory=list, max_length=100)
    metadata: dict[Annotated[str, StringConstraints(max_length=200)], Any] = Field(
        default_factory=dict
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=0,
        le=10_000,
        strict=True,
        description="With overlap `allow`: runs at once (0: any).",
    )
    concurrency_key: Name | None = Field(
        default=None, description="Jobs sharing a key share one `max_concurrency` limit."
    )
    max_backfill: int = Field(default=100, ge=1, le=10_000, strict=True)
    replace_timeout: Annotated[
        float, Field(ge=0.1, le=86_400, allow_inf_nan=False, strict=True)
    ] = Field(
        default=30.0,
        description="With overlap `replace`: seconds (0.1 to 86400) a replaced run gets to stop "
        "before its successor starts anyway.",
    )
    calendars: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="Names of the tenant's exclusion calendars (`/calendars`): an occurrence "
        "one of them excludes is skipped (`calendar:<name>`) or moved by `calendar_shift`.",
    )
    calendar_shift: Literal["next_business_day", "previous_business_day"] | None = Field(
        default=None,
        description="Move an excluded occurrence to the same wall time of the next (previous) "
        "day no calendar excludes; its run keeps the occurrence as `scheduled_for`.",
    )
    max_waiting: int = Field(
        default=0,
        ge=0,
        le=10_000,
        strict=True,
        description="With overlap `serialize` (or `allow` with a max_concurrency, at that "
        "limit): runs that may wait for the busy key (0: any); a newer run due at the cap is "
        "skipped `queue_full` when a worker claims.",
    )
    sla: PositiveSeconds | None = Field(
        default=None,
        description="Seconds after each scheduled instant within which a run must succeed; "
        "otherwise the leader raises a `sla_missed` alert.",
    )
    expected_duration: PositiveSeconds | None = Field(
        default=None,
        description="Seconds a run normally takes (stuck-run alerts); default: the p95 of "
        "the job's last 20 successful runs.",
    )
    start_at: datetime | None = Field(
        default=None,
        description="With `cron` or `every`: no occurrence before this instant fires (an "
        "`every` without `anchor` counts from it).",
    )
    end_at: datetime | None = Field(
        default=None,
        description="With `cron` or `every`: no occurrence after this instant fires; then the "
        "job is `completed`. Must be after `start_at`.",
    )
    max_runs: int | None = Field(
        default=None,
        ge=1,
        le=2**31 - 1,
        strict=True,
        description="With `cron` or `every`: at most this many scheduled runs (manual "
        "triggers do not count); then the job is `completed`. Raise it to allow more.",
    )
    allow_unregistered: Flag = Field(
        default=False, description="Accept a task no worker has registered yet."
    )


class JobCreate(JobFields):
    """A new job: `name` plus exactly one of `cron`, `at`, `every` or `now`."""

    name: Name = Field(description="Unique within the tenant.")
    allow_past: Flag = Field(
        default=False,
        description="Accept an `at` further in the past than the misfire grace (it runs at "
        "once); otherwise such a job is refused (422).",
    )


class JobPatch(JobFields):
    """Changes to a job; omitted fields keep their values. Giving any of `cron`, `at`, `every`
    or `now` replaces the schedule."""


class TriggerIn(_Body):
    payload: Any = Field(default=None, description="Overrides the job's payload for this run.")
    priority: Priority | None = None


class PreviewIn(_Body):
    """Either a cron expression (`cron`, `tz`, `after`), an interval (`every`, `anchor`, `tz`,
    `after`) or an existing job (`job_id`)."""

    cron: Annotated[str, StringConstraints(max_length=200, pattern=PRINTABLE)] | None = None
    every: Annotated[
        PositiveSeconds | Annotated[str, StringConstraints(max_length=100)] | None,
        BeforeValidator(_check_every),
    ] = Field(default=None, description='An interval as a job\'s `every` ("1 day", PT15M, 90).')
    anchor: datetime | None = Field(
        default=None, description="With `every`: the instant it counts from (default: `after`)."
    )
    tz: Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=PRINTABLE)] = "UTC"
    after: datetime | None = Field(default=None, description="Instants strictly after this.")
    job_id: Annotated[str, StringConstraints(max_length=100)] | None = None
    count: int = Field(default=10, ge=1, le=1000, strict=True)


class ReplayIn(_Body):
    """Replay dead runs in bulk: those of `job_id`, or (with `all`) every one of the tenant."""

    job_id: Annotated[str, StringConstraints(max_length=100)] | None = None
    all: Flag = Field(default=False, description="Required to replay without a job_id.")
    limit: int = Field(default=100, ge=1, le=1000, strict=True)


class KeyCreate(_Body):
    role: ApiRole
    name: Annotated[str, StringConstraints(max_length=200, pattern=PRINTABLE)] = ""


class ClaimIn(_Body):
    worker_id: Name = Field(description="Stable id of the worker process (unique per tenant).")
    tasks: list[Short] = Field(min_length=1, max_length=100, description="Task names it runs.")
    max_runs: int = Field(default=10, ge=1, le=1000, strict=True)
    lease_seconds: float = Field(
        default=30.0,
        ge=1,
        le=3600,
        allow_inf_nan=False,
        strict=True,
        description="Heartbeat within this.",
    )


class HeldRun(_Body):
    run_id: uuid.UUID
    token: int = Field(ge=0, le=2**63 - 1, strict=True)


class HeartbeatIn(_Body):
    worker_id: Name
    runs: list[HeldRun] = Field(max_length=1000)
    lease_seconds: float = Field(default=30.0, ge=1, le=3600, allow_inf_nan=False, strict=True)


class CompleteIn(_Body):
    worker_id: Name
    run_id: uuid.UUID
    token: int = Field(ge=0, le=2**63 - 1, strict=True, description="The token the claim returned.")
    outcome: Literal["succeeded", "failed"]
    error_class: Name | None = None
    error_message: Text | None = None
    retryable: Flag = Field(
        default=True, description="False: fail permanently (the run goes dead, no retry)."
    )
    retry_after: Seconds | None = Field(
        default=None, description="Retry after this many seconds instead of the backoff."
    )
    traceback: LongText | None = Field(
        default=None,
        description="A failure's traceback, shown with the attempt (its last 16 KiB are kept).",
    )
    result: Any = Field(
        default=None,
        description="A success's return value (JSON), kept with the run and handed to a "
        "workflow step's children (at most DUETIME_RESULT_MAX_BYTES; more is 422).",
    )


# --- responses --------------------------------------------------------------------------------


def fields_from(model: type[BaseModel], source: object, /, **given: Any) -> dict[str, Any]:
    """Keyword arguments for ``model``: each field is ``source``'s attribute of the same name,
    but for those ``given`` (computed or converted). The response models mirror duetime's
    dataclasses field for field (a pydantic model per dataclass, for the OpenAPI document)."""
    return {
        name: given[name] if name in given else getattr(source, name) for name in model.model_fields
    }


class ScheduleOut(BaseModel):
    kind: ScheduleKind
    cron: str | None
    tz: str
    at: datetime | None
    every_seconds: float | None = Field(description="A fixed `every` interval; else null.")
    every_calendar: str | None = Field(
        description='An `every` in calendar units as declared ("1 day", "2 weeks", "1 month"), '
        "stepped in `tz`; else null."
    )
    anchor: datetime | None

    @classmethod
    def of(cls, s: Schedule) -> ScheduleOut:
        every_seconds = None if s.every is None else s.every.total_seconds()
        calendar = None if s.every_calendar is None else str(s.every_calendar)
        return cls(**fields_from(cls, s, every_seconds=every_seconds, every_calendar=calendar))


class RetryOut(BaseModel):
    max_attempts: int
    backoff_base: float
    backoff_factor: float
    backoff_cap: float
    within: float | None = Field(description="Retry window in seconds; null: none.")
    permanent_on: list[str]
    retry_on: list[str]
    permanent_on_status: list[int]
    retry_on_status: list[int]


class JobOut(BaseModel):
    id: uuid.UUID
    tenant: str
    name: str
    status: JobStatus
    next_fire_at: datetime | None = Field(
        description="Where the scheduler goes on writing runs: it writes them ahead of their "
        "instant, so earlier occurrences may still be waiting (see `next_occurrence_at`)."
    )
    next_occurrence_at: datetime | None = Field(
        description="The earliest occurrence not fired yet — the earliest of the runs written "
        'ahead that have not started, else `next_fire_at`: what "next fire" shows.'
    )
    task: str
    target: dict[str, Any] | None = Field(
        description=f"The http target; each header value reads {REDACTED!r} (the stored one "
        "is kept when written back as read)."
    )
    schedule: ScheduleOut
    payload: Any
    retry: RetryOut
    priority: int
    jitter: float = 0.0
    timeout: float | None
    misfire: MisfirePolicy
    misfire_grace: float
    overlap: OverlapPolicy
    delivery: DeliveryMode
    queue: str
    tags: list[str]
    metadata: dict[str, Any]
    max_concurrency: int
    concurrency_key: str | None
    max_backfill: int
    replace_timeout: float = Field(
        default=30.0, description="Seconds a replaced run gets to stop (overlap `replace`)."
    )
    max_waiting: int = Field(default=0, description="Runs that may wait for the busy key (0: any).")
    calendars: list[str] = Field(default_factory=list, description="Exclusion calendars named.")
    calendar_shift: str | None = Field(
        default=None, description="`next_business_day` / `previous_business_day` (null: skip)."
    )
    sla: float | None = None
    expected_duration: float | None = None
    start_at: datetime | None = Field(
        default=None, description="No occurrence before it fires (null: unbounded)."
    )
    end_at: datetime | None = Field(
        default=None, description="No occurrence after it fires (null: unbounded)."
    )
    max_runs: int | None = Field(
        default=None, description="Scheduled runs allowed over the job's life (null: any)."
    )
    runs_created: int = Field(
        default=0, description="Scheduled runs counted against `max_runs` so far."
    )
    runs_left: int | None = Field(
        default=None, description="`max_runs` minus `runs_created` (null: no limit)."
    )
    pause: PauseOut | None = Field(
        default=None, description="While paused: who, why, until when (null otherwise)."
    )
    pause_after_dead: int | None = Field(
        default=None, description="Consecutive dead runs that pause the job (null: never)."
    )
    declared_source: str | None = Field(
        default=None, description="The `sync` source that declared the job (null: none)."
    )
    tzdata_version: str | None = Field(
        default=None, description="The tzdata release `next_fire_at` was computed with."
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, job: Job) -> JobOut:
        return cls(
            **fields_from(
                cls,
                job,
                target=redact_target(job.target),
                schedule=ScheduleOut.of(job.schedule),
                retry=RetryOut(**fields_from(RetryOut, job.retry)),
                misfire=job.misfire_policy,
                overlap=job.overlap_policy,
                tags=list(job.tags),
                pause=None if job.pause is None else PauseOut(**fields_from(PauseOut, job.pause)),
            )
        )


class PauseOut(BaseModel):
    """A pause's note (decision 0023)."""

    by: str | None = Field(description="Who paused the job (`duetime`: pause on failure).")
    note: str | None = Field(description="Why.")
    until: datetime | None = Field(description="When it resumes by itself (null: never).")


class PageOut(BaseModel):
    """A page of a list; a subclass narrows ``items`` to ``list[<Item>Out]`` (the fields keep
    this order in the JSON and the OpenAPI document)."""

    items: list[Any]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null: last.")

    @classmethod
    def of(cls, page: Page[T], item: Callable[[T], BaseModel]) -> Self:
        """The page with ``item(value)`` for each of ``page``'s items."""
        return cls(items=[item(value) for value in page.items], next_cursor=page.next_cursor)


class JobPage(PageOut):
    items: list[JobOut]


# Each *Out declares its dataclass's fields again: a pydantic model per dataclass, for the
# OpenAPI document (fields_from fills them by name).
class AttemptOut(BaseModel):
    number: int
    token: int
    worker_id: str
    outcome: AttemptOutcome
    claimed_at: datetime
    started_at: datetime | None
    finished_at: datetime
    duration_seconds: float | None
    error_class: str | None
    error_message: str | None
    traceback: str | None = Field(
        description="A failed attempt's traceback (at most 16 KiB, its end kept); null otherwise."
    )

    @classmethod
    def of(cls, a: Attempt) -> AttemptOut:
        duration = a.duration
        seconds = None if duration is None else duration.total_seconds()
        return cls(**fields_from(cls, a, duration_seconds=seconds))


class RunOut(BaseModel):
    id: uuid.UUID
    job_id: uuid.UUID
    tenant: str
    job_name: str
    task: str
    queue: str
    state: RunState
    scheduled_for: datetime
    available_at: datetime
    priority: int
    attempt: int = Field(description="Attempts started so far.")
    max_attempts: int
    trigger: RunTrigger
    idempotency_key: str | None
    reason: str | None
    last_error_class: str | None
    last_error_message: str | None
    payload: Any
    lease_owner: str | None
    lease_expires_at: datetime | None
    claimed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    replays: int
    progress: float | None
    progress_message: str | None
    cancel_requested: bool
    origin: str | None = Field(
        default=None, description="`backfill` for a run a backfill created (never misfired)."
    )
    result: Any = Field(
        default=None, description="What the handler returned (JSON), once the run succeeded."
    )
    created_at: datetime

    @classmethod
    def fields_of(cls, run: Run) -> dict[str, Any]:
        """RunOut's own fields (not a subclass's), for :class:`RunDetail`."""
        return fields_from(RunOut, run)

    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls(**cls.fields_of(run))


class RunDetail(RunOut):
    attempts: list[AttemptOut]

    @classmethod
    def with_attempts(cls, run: Run, attempts: list[Attempt]) -> RunDetail:
        return cls(**cls.fields_of(run), attempts=[AttemptOut.of(a) for a in attempts])


class RunPage(PageOut):
    items: list[RunOut]


class ReplayOut(BaseModel):
    replayed: list[uuid.UUID]
    count: int


class OccurrenceOut(BaseModel):
    utc: datetime
    local: str = Field(description="The same instant in the schedule's zone, with its offset.")
    dst_note: str | None = Field(description="Set when a DST change moved or doubled it.")
    calendar_note: str | None = Field(
        default=None, description="Set when the job's calendars skip it or move it."
    )

    @classmethod
    def of(cls, o: Occurrence) -> OccurrenceOut:
        return cls(
            utc=o.instant,
            local=o.local.isoformat(),
            dst_note=o.dst_note,
            calendar_note=o.calendar_note,
        )


class PreviewOut(BaseModel):
    tz: str
    items: list[OccurrenceOut]


# ApiKey's fields as a pydantic model, for the OpenAPI document.
class KeyOut(BaseModel):
    id: uuid.UUID
    tenant: str
    role: ApiRole
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    @classmethod
    def fields_of(cls, key: ApiKey) -> dict[str, Any]:
        """KeyOut's own fields (not a subclass's), for :class:`KeyCreated`."""
        return fields_from(KeyOut, key)

    @classmethod
    def of(cls, key: ApiKey) -> KeyOut:
        return cls(**cls.fields_of(key))


class KeyCreated(KeyOut):
    key: str = Field(description="The secret: shown this once, never again.")


class KeyList(BaseModel):
    items: list[KeyOut]


class ClaimedRunOut(BaseModel):
    run_id: uuid.UUID
    token: int = Field(description="Fencing token: send it with every heartbeat and completion.")
    attempt: int
    max_attempts: int
    job_id: uuid.UUID
    job_name: str
    task: str
    payload: Any
    scheduled_for: datetime
    lease_expires_at: datetime | None
    timeout: float | None = Field(description="Seconds the attempt may take, if the job sets one.")


class ClaimOut(BaseModel):
    runs: list[ClaimedRunOut]


class HeartbeatOut(BaseModel):
    kept: list[uuid.UUID] = Field(description="Leases extended.")
    lost: list[uuid.UUID] = Field(description="Leases gone (expired or taken over): stop work.")
    cancel_requested: list[uuid.UUID] = Field(
        description="Stop work: cancelled by an operator (a completion would be refused), "
        "or replaced by a newer run (overlap `replace`; also in `kept`: report the attempt "
        "once stopped)."
    )


class CompleteOut(BaseModel):
    run_id: uuid.UUID
    state: RunState = Field(description="The run's state after this outcome.")
    attempt: int
    available_at: datetime = Field(description="For a retry: when it is due again.")


class Health(BaseModel):
    status: Literal["ok"]


class Ready(BaseModel):
    status: Literal["ready"]
    store: str
    schema_version: int
