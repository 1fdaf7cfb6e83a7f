"""Issue 16 item 6, the pure parts: where the retry window ends a run (worker/retry.py), how a
job's classification decides (policies/retry_rules.py), and registration's field errors for
bad windows, names and statuses (on both stores, through ``app.schedule`` and
``app.update_job``)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from duetime import AsyncApp, Permanent, Retry, RetryLater, UsageError, ValidationError
from duetime._types import AttemptOutcome, DeliveryMode, RunState
from duetime.errors import UnknownTask
from duetime.policies.retry_rules import validated
from duetime.worker.retry import Decision, after_failure

DUE = datetime(2026, 1, 1, 12, tzinfo=UTC)


def decide(exc: BaseException, policy: Retry, *, attempt: int = 1, now: datetime = DUE) -> Decision:
    return after_failure(
        exc=exc,
        outcome=AttemptOutcome.FAILED,
        attempt=attempt,
        max_attempts=policy.max_attempts,
        policy=policy,
        delivery=DeliveryMode.AT_LEAST_ONCE,
        now=now,
        window_from=DUE,
        rng=random.Random(3),
    )


# --- the window ---------------------------------------------------------------------------


def test_a_retry_inside_the_window_is_scheduled() -> None:
    policy = Retry(max_attempts=10, within=timedelta(hours=1))
    decision = decide(RetryLater("x", delay=600), policy, now=DUE + timedelta(minutes=50))
    assert decision.next_state is RunState.SCHEDULED
    assert decision.available_at == DUE + timedelta(hours=1)  # at the very end: still inside


def test_a_retry_landing_past_the_window_ends_the_run() -> None:
    policy = Retry(max_attempts=10, within=3600)
    decision = decide(RetryLater("x", delay=601), policy, now=DUE + timedelta(minutes=50))
    assert (decision.next_state, decision.reason) == (RunState.DEAD, "retry_window_exhausted")
    assert (decision.error_class, decision.error_message) == ("duetime.errors.RetryLater", "x")
    assert decision.traceback is not None


def test_the_window_counts_from_the_instant_the_run_was_due() -> None:
    """A first attempt that started late (a backlog) has less of its window left."""
    policy = Retry(max_attempts=10, within=60)
    late = decide(RetryLater("x", delay=0.5), policy, now=DUE + timedelta(seconds=59.5))
    assert late.available_at == DUE + timedelta(seconds=60)
    too_late = decide(RetryLater("x", delay=0), policy, now=DUE + timedelta(seconds=61))
    assert too_late.reason == "retry_window_exhausted"


def test_exhausted_attempts_are_named_before_the_window() -> None:
    policy = Retry(max_attempts=2, within=1)
    decision = decide(RuntimeError("x"), policy, attempt=2, now=DUE + timedelta(hours=1))
    assert decision.reason == "attempts_exhausted"


# --- classification -------------------------------------------------------------------------


class Outer(Exception):
    class Inner(ValueError):
        pass


@pytest.mark.parametrize(
    ("exc", "policy", "reason"),
    [
        pytest.param(ValueError("v"), Retry(), None, id="default-retried"),
        pytest.param(Permanent("p"), Retry(), "permanent_error", id="default-permanent"),
        pytest.param(UsageError("progress", "bad"), Retry(), "usage_error", id="usage-error"),
        pytest.param(
            ValidationError("cron", "bad"), Retry(), "permanent_error", id="validation-error"
        ),
        pytest.param(
            ValueError("v"), Retry(permanent_on=["ValueError"]), "permanent_error", id="listed"
        ),
        pytest.param(
            Outer.Inner("v"),
            Retry(permanent_on=["ValueError"], retry_on=[Outer.Inner]),
            None,
            id="nested-subclass-retried",
        ),
        pytest.param(
            Outer.Inner("v"),
            Retry(permanent_on=[Outer.Inner], retry_on=["Exception"]),
            "permanent_error",
            id="subclass-permanent-base-retried",
        ),
        pytest.param(
            Permanent("p"), Retry(retry_on=["duetime.Permanent"]), None, id="alias-retried"
        ),
        # duetime's own classes decide at their place in the MRO: a broad base does not
        # override them, naming them (or a subclass) does
        pytest.param(
            Permanent("p"), Retry(retry_on=["Exception"]), "permanent_error", id="broad-permanent"
        ),
        pytest.param(
            UsageError("progress", "bad"),
            Retry(retry_on=["Exception"]),
            "usage_error",
            id="broad-usage-error",
        ),
        pytest.param(
            ValidationError("payload", "bad"),
            Retry(retry_on=["ValueError"]),
            "permanent_error",
            id="broad-validation-error",
        ),
        pytest.param(
            Outer.Inner("v"), Retry(retry_on=["Exception"]), None, id="broad-user-class-retried"
        ),
        pytest.param(
            UsageError("progress", "bad"),
            Retry(permanent_on=["duetime.UsageError"]),
            "usage_error",
            id="usage-error-listed-keeps-its-reason",
        ),
        pytest.param(
            UsageError("progress", "bad"),
            Retry(permanent_on=["Exception"]),
            "usage_error",
            id="usage-error-under-broad-permanent",
        ),
        # an unknown task may be served later (its worker not started yet): retried
        pytest.param(UnknownTask("task", "unknown"), Retry(), None, id="unknown-task-retried"),
        pytest.param(
            UnknownTask("task", "unknown"),
            Retry(permanent_on=["ValueError"]),
            None,
            id="unknown-task-under-broad-permanent",
        ),
        pytest.param(
            UnknownTask("task", "unknown"),
            Retry(permanent_on=["duetime.errors.UnknownTask"]),
            "permanent_error",
            id="unknown-task-listed",
        ),
    ],
)
def test_the_most_specific_listed_class_decides(
    exc: BaseException, policy: Retry, reason: str | None
) -> None:
    decision = decide(exc, validated(policy))  # as registration stores it (aliases resolved)
    assert decision.reason == reason
    assert decision.next_state is (RunState.SCHEDULED if reason is None else RunState.DEAD)


@pytest.mark.parametrize(
    ("error_class", "exc", "policy", "reason"),
    [
        pytest.param("Exception", Permanent("p"), Retry(retry_on=["Exception"]), None, id="named"),
        pytest.param(
            "myapp.Fatal",
            Permanent("p"),
            Retry(retry_on=["Exception"]),
            "permanent_error",
            id="exact-only",
        ),
        pytest.param(
            "duetime.errors.UsageError",
            RuntimeError("r"),
            Retry(permanent_on=["duetime.UsageError"]),
            "usage_error",
            id="usage-error-keeps-its-reason",
        ),
    ],
)
def test_a_remote_report_is_classified_by_its_exact_name(
    error_class: str, exc: BaseException, policy: Retry, reason: str | None
) -> None:
    decision = after_failure(
        exc=exc,
        outcome=AttemptOutcome.FAILED,
        attempt=1,
        max_attempts=3,
        policy=validated(policy),
        delivery=DeliveryMode.AT_LEAST_ONCE,
        now=DUE,
        window_from=DUE,
        error_class=error_class,
    )
    assert decision.reason == reason


def test_statuses_come_before_classes() -> None:
    failure = RuntimeError("503")
    failure.http_status = 503  # type: ignore[attr-defined]
    policy = Retry(permanent_on_status=[503], retry_on=["RuntimeError"])
    assert decide(failure, policy).reason == "permanent_error"


# --- registration -----------------------------------------------------------------------------


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, migrate=True) as opened:
        yield opened


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        pytest.param(Retry(within=-1), "retry.within", id="negative"),
        pytest.param(Retry(within=timedelta(0)), "retry.within", id="zero"),
        pytest.param(Retry(within=float("inf")), "retry.within", id="infinite"),
        pytest.param(Retry(within="1h"), "retry.within", id="text"),  # type: ignore[arg-type]
        pytest.param(Retry(within=timedelta(days=400)), "retry.within", id="over-366-days"),
        pytest.param(Retry(permanent_on=["ValueErorr"]), "retry.permanent_on", id="typo"),
        pytest.param(Retry(retry_on=["my app.Fatal"]), "retry.retry_on", id="not-a-name"),
        pytest.param(Retry(retry_on=[42]), "retry.retry_on", id="not-a-string"),  # type: ignore[list-item]
        pytest.param(Retry(permanent_on="ValueError"), "retry.permanent_on", id="not-a-list"),  # type: ignore[arg-type]
        pytest.param(Retry(retry_on=["duetime.errors.Nope"]), "retry.retry_on", id="no-such"),
        pytest.param(Retry(retry_on=["duetime.Retry"]), "retry.retry_on", id="not-an-exception"),
        pytest.param(
            Retry(permanent_on=[KeyError], retry_on=["builtins.KeyError"]),
            "retry.retry_on",
            id="in-both",
        ),
        pytest.param(Retry(retry_on_status=[99]), "retry.retry_on_status", id="status-99"),
        pytest.param(Retry(retry_on_status=[600]), "retry.retry_on_status", id="status-600"),
        pytest.param(Retry(retry_on_status=[204]), "retry.retry_on_status", id="status-2xx"),
        pytest.param(Retry(retry_on_status=[True]), "retry.retry_on_status", id="status-bool"),
        pytest.param(
            Retry(retry_on_status=[500], permanent_on_status=[500]),
            "retry.retry_on_status",
            id="status-in-both",
        ),
    ],
)
async def test_bad_rules_are_field_errors(app: AsyncApp, retry: Retry, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        await app.schedule("j", task="duetime.noop", every=60, retry=retry)
    assert refused.value.field == field
    await app.schedule("ok", task="duetime.noop", every=60)
    with pytest.raises(ValidationError) as again:
        await app.update_job("ok", retry=retry)
    assert again.value.field == field


async def test_rules_are_stored_in_canonical_form(app: AsyncApp) -> None:
    retry = Retry(
        within=timedelta(minutes=90),
        permanent_on={KeyError, "builtins.ValueError", "duetime.UsageError", "myapp.Fatal"},
        retry_on_status=(503, 404, 503),
    )
    job = await app.schedule("j", task="duetime.noop", every=60, retry=retry)
    assert job.retry.within == 5400.0
    assert job.retry.permanent_on == (
        "KeyError",
        "ValueError",
        "duetime.errors.UsageError",
        "myapp.Fatal",
    )
    assert job.retry.retry_on_status == (404, 503)
    stored = await app.jobs.get("j")
    assert stored.retry == job.retry
    merged = await app.update_job("j", retry={"within": None, "retry_on": ["OSError"]})
    assert (merged.retry.within, merged.retry.retry_on) == (None, ("OSError",))
    assert merged.retry.permanent_on == job.retry.permanent_on


def test_unimported_modules_are_trusted_to_the_worker() -> None:
    """Registration imports nothing: a dotted name whose module is not loaded here is kept."""
    policy = validated(Retry(permanent_on=["some.worker_only.module.Fatal"]))
    assert policy.permanent_on == ("some.worker_only.module.Fatal",)


async def test_bulk_registration_keeps_the_rules(app: AsyncApp) -> None:
    """``schedule_many`` (PostgreSQL: COPY) stores the same rules as ``schedule``; specs
    sharing a shape but for a window's type are validated apart."""
    retry = Retry(within=600, permanent_on=["KeyError"], retry_on_status=[409])
    specs = [
        {"name": f"bulk-{i}", "task": "duetime.noop", "every": 60, "retry": retry} for i in range(3)
    ]
    assert await app.schedule_many(specs) == 3
    for i in range(3):
        assert (await app.jobs.get(f"bulk-{i}")).retry == validated(retry)
    with pytest.raises(ValidationError) as refused:
        await app.schedule_many(
            [
                {"name": "a", "task": "duetime.noop", "every": 60, "retry": Retry(within=1)},
                {"name": "b", "task": "duetime.noop", "every": 60, "retry": Retry(within=True)},
            ]
        )
    assert refused.value.field.endswith("retry.within")
