"""What happens to a run after its attempt ends: pure decisions, no I/O."""

from __future__ import annotations

import random
import traceback as _traceback
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime._types import AttemptOutcome, DeliveryMode, RetryPolicy, RunState
from duetime.errors import MAX_RETRY_DELAY, RetryLater
from duetime.policies.retry_rules import dead_reason, dead_reason_by_name


# The outcome half of store.base.RunCompletion, kept apart on purpose: a pure decision, no fence.
@dataclass(frozen=True, slots=True)
class Decision:
    outcome: AttemptOutcome
    next_state: RunState
    available_at: datetime | None = None
    reason: str | None = None
    error_class: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    """The failure's formatted exception (:func:`traceback_text`); ``None`` for successes."""


TRACEBACK_LIMIT = 16 * 1024
"""Characters of a failure's traceback kept on its attempt: the end (the raise and the
innermost frames) is what tells what went wrong."""


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


def traceback_text(exc: BaseException, limit: int = TRACEBACK_LIMIT) -> str:
    """``exc`` formatted as Python prints it (its chain included), as storable text of at most
    ``limit`` characters: a longer one keeps its end, after a line saying how much was cut."""
    try:
        text = "".join(_traceback.format_exception(exc))
    except Exception as failure:  # a broken __str__ or frame must not lose the outcome
        text = f"<unformattable {type(exc).__name__}: {type(failure).__name__}>\n"
    return bounded_traceback(text, limit)


def bounded_traceback(text: str, limit: int = TRACEBACK_LIMIT) -> str:
    """A traceback's ``text`` as storable text (NUL and lone surrogates escaped) of at most
    ``limit`` characters: a longer one keeps its end, after a line saying how much was cut."""
    text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
    if len(text) > limit:
        tail = text[len(text) - limit + 80 :]  # room for the marker line
        newline = tail.find("\n", 0, 400)
        tail = tail[newline + 1 :]  # from a whole line on, unless the cut is inside a long one
        text = f"[… {len(text) - len(tail)} earlier characters cut …]\n{tail}"
    return text


def after_failure(
    *,
    exc: BaseException,
    outcome: AttemptOutcome,
    attempt: int,
    max_attempts: int,
    policy: RetryPolicy,
    delivery: DeliveryMode,
    now: datetime,
    window_from: datetime,
    rng: random.Random | None = None,
    error_class: str | None = None,
) -> Decision:
    """A failed (or timed-out) attempt: retry with backoff, or dead when the error is permanent
    (policies/retry_rules.py: the most specific class the job lists or duetime classifies —
    ``Permanent``, ``UsageError``, ``ValidationError`` but not ``UnknownTask``), the job is
    at-most-once, the attempts are exhausted, or the retry would start past the job's window
    (``policy.within`` after ``window_from``: the run's ``scheduled_for``, or its last
    replay). ``error_class``, when given, is the name
    the failure is known by (a remote worker's report) and is classified by that name."""
    name, message = error_text(exc)
    tb = traceback_text(exc)
    permanent = _permanent(exc, policy, error_class)
    if permanent is not None:
        return Decision(outcome, RunState.DEAD, None, permanent, name, message, tb)
    if delivery is DeliveryMode.AT_MOST_ONCE:
        return Decision(outcome, RunState.DEAD, None, "at_most_once_failed", name, message, tb)
    if attempt >= max_attempts:
        return Decision(outcome, RunState.DEAD, None, "attempts_exhausted", name, message, tb)
    asked = exc.delay if isinstance(exc, RetryLater) else None
    if isinstance(asked, int | float) and 0 <= asked <= MAX_RETRY_DELAY:  # else checked at raise
        delay = float(asked)
    else:
        delay = backoff_delay(policy, attempt, rng)
    available_at = now + timedelta(seconds=delay)
    if policy.within is not None and available_at > window_from + timedelta(seconds=policy.within):
        return Decision(outcome, RunState.DEAD, None, "retry_window_exhausted", name, message, tb)
    return Decision(outcome, RunState.SCHEDULED, available_at, None, name, message, tb)


def _permanent(exc: BaseException, policy: RetryPolicy, error_class: str | None) -> str | None:
    """The dead reason when ``exc`` is not to be retried (``permanent_error``, or
    ``usage_error`` for a misuse of duetime's API); None when it may be retried."""
    if error_class is not None:
        return dead_reason_by_name(error_class, exc, policy)
    return dead_reason(exc, policy)


_SUCCESS = Decision(AttemptOutcome.SUCCEEDED, RunState.SUCCEEDED)


def after_success() -> Decision:
    """The decision of every successful attempt (one shared frozen instance)."""
    return _SUCCESS
