"""What happens to a run after its attempt ends: pure decisions, no I/O."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime._types import AttemptOutcome, DeliveryMode, RetryPolicy, RunState
from duetime.errors import Permanent, RetryLater


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: AttemptOutcome
    next_state: RunState
    available_at: datetime | None = None
    reason: str | None = None
    error_class: str | None = None
    error_message: str | None = None


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before the retry that follows attempt number ``attempt`` (1-based): full jitter,
    ``uniform(0, min(cap, base * factor ** (attempt - 1)))``."""
    ceiling = min(policy.backoff_cap, policy.backoff_base * policy.backoff_factor ** (attempt - 1))
    return (rng or random).uniform(0, ceiling)


def error_text(exc: BaseException, limit: int = 2000) -> tuple[str, str]:
    """The exception's class and message as storable text: at most ``limit`` characters, NUL
    and lone surrogates (which no database text column takes) escaped, so a task's odd message
    can never make its outcome unwritable."""
    cls = type(exc)
    name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    try:
        message = str(exc)[:limit]
    except Exception as failure:  # a broken __str__ must not lose the outcome
        message = f"<unprintable {name}: {type(failure).__name__}>"
    message = message.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
    return name, message


def after_failure(
    *,
    exc: BaseException,
    outcome: AttemptOutcome,
    attempt: int,
    max_attempts: int,
    policy: RetryPolicy,
    delivery: DeliveryMode,
    now: datetime,
    rng: random.Random | None = None,
) -> Decision:
    """A failed (or timed-out) attempt: retry with backoff, or dead when the error is permanent,
    the attempts are exhausted, or the job is at-most-once."""
    error_class, message = error_text(exc)
    if isinstance(exc, Permanent):
        return Decision(outcome, RunState.DEAD, None, "permanent_error", error_class, message)
    if delivery is DeliveryMode.AT_MOST_ONCE:
        return Decision(outcome, RunState.DEAD, None, "at_most_once_failed", error_class, message)
    if attempt >= max_attempts:
        return Decision(outcome, RunState.DEAD, None, "attempts_exhausted", error_class, message)
    if isinstance(exc, RetryLater) and exc.delay is not None:
        delay = max(0.0, exc.delay)
    else:
        delay = backoff_delay(policy, attempt, rng)
    return Decision(
        outcome, RunState.SCHEDULED, now + timedelta(seconds=delay), None, error_class, message
    )


def after_success() -> Decision:
    return Decision(AttemptOutcome.SUCCEEDED, RunState.SUCCEEDED)
