"""Retry decisions: backoff with full jitter and a cap, permanent errors, exhausted attempts."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from duetime._types import AttemptOutcome, DeliveryMode, RetryPolicy, RunState
from duetime.errors import Permanent, RetryLater
from duetime.worker.retry import after_failure, backoff_delay

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@given(
    base=st.floats(0.01, 100),
    factor=st.floats(1, 10),
    cap=st.floats(0, 10_000),
    attempt=st.integers(1, 60),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_full_jitter_under_the_capped_exponential(
    base: float, factor: float, cap: float, attempt: int, seed: int
) -> None:
    policy = RetryPolicy(
        max_attempts=100, backoff_base=base, backoff_factor=factor, backoff_cap=cap
    )
    delay = backoff_delay(policy, attempt, random.Random(seed))
    assert 0 <= delay <= min(cap, base * factor ** (attempt - 1))


def test_backoff_spreads_over_the_whole_window() -> None:
    policy = RetryPolicy(backoff_base=1, backoff_factor=2, backoff_cap=600)
    rng = random.Random(7)
    delays = [backoff_delay(policy, 4, rng) for _ in range(2000)]
    assert max(delays) <= 8
    assert min(delays) < 0.5
    assert max(delays) > 7.5


def decide(exc: BaseException, attempt: int, delivery: DeliveryMode = DeliveryMode.AT_LEAST_ONCE):  # type: ignore[no-untyped-def]
    return after_failure(
        exc=exc,
        outcome=AttemptOutcome.FAILED,
        attempt=attempt,
        max_attempts=3,
        policy=RetryPolicy(),
        delivery=delivery,
        now=NOW,
        window_from=NOW,
        rng=random.Random(1),
    )


def test_retryable_failure_is_rescheduled_after_backoff() -> None:
    decision = decide(ValueError("boom"), 1)
    assert decision.next_state is RunState.SCHEDULED
    assert decision.available_at is not None
    assert NOW <= decision.available_at <= NOW + timedelta(seconds=1)
    assert decision.error_class == "ValueError"
    assert decision.error_message == "boom"


def test_exhausted_attempts_go_dead() -> None:
    decision = decide(ValueError("boom"), 3)
    assert (decision.next_state, decision.reason) == (RunState.DEAD, "attempts_exhausted")


def test_permanent_errors_skip_retries() -> None:
    decision = decide(Permanent("bad input"), 1)
    assert (decision.next_state, decision.reason) == (RunState.DEAD, "permanent_error")
    assert decision.error_class == "duetime.errors.Permanent"


def test_retry_later_sets_its_own_delay() -> None:
    decision = decide(RetryLater("rate limited", delay=42), 1)
    assert decision.available_at == NOW + timedelta(seconds=42)


def test_at_most_once_never_retries() -> None:
    decision = decide(ValueError("boom"), 1, DeliveryMode.AT_MOST_ONCE)
    assert (decision.next_state, decision.reason) == (RunState.DEAD, "at_most_once_failed")
