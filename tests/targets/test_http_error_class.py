"""Issue 16 item 6 for HTTP targets: a job classifies response statuses itself
(``permanent_on_status`` / ``retry_on_status``) on top of the default (408, 429 and 5xx
retried, 3xx and other 4xx permanent). A real worker sends to a real local receiver, on both
stores."""

from __future__ import annotations

import pytest

from duetime import Retry
from duetime._types import AttemptOutcome, RunState
from tests.targets import test_http_target as http_kit
from tests.targets.receiver import Receiver, Reply
from tests.targets.test_http_target import Harness

harness = http_kit.harness  # the fixture: a real app and worker on each store

QUICK = {"backoff_base": 0.01, "backoff_factor": 1.0, "backoff_cap": 0.01}


async def _outcomes(harness: Harness, run_id: object) -> list[AttemptOutcome]:
    return [a.outcome for a in await harness.app.attempts(run_id)]  # type: ignore[arg-type]


async def test_a_5xx_listed_permanent_is_dead_at_once(harness: Harness, receiver: Receiver) -> None:
    url = receiver.plan("/down", Reply(503, body="maintenance"))
    run = await harness.fire(
        "hook", url, retry=Retry(max_attempts=5, permanent_on_status=[503], **QUICK)
    )
    done = await harness.settled(run.id)
    assert (done.state, done.reason, done.attempt) == (RunState.DEAD, "permanent_error", 1)
    assert "returned 503" in (done.last_error_message or "")
    assert len(receiver.hits_of("/down")) == 1


async def test_a_4xx_listed_retryable_is_retried(harness: Harness, receiver: Receiver) -> None:
    url = receiver.plan("/late", Reply(404), Reply(404), Reply(200))
    run = await harness.fire(
        "hook", url, retry=Retry(max_attempts=5, retry_on_status=[404], **QUICK)
    )
    done = await harness.settled(run.id)
    assert (done.state, done.attempt) == (RunState.SUCCEEDED, 3)
    assert await _outcomes(harness, run.id) == [
        AttemptOutcome.FAILED,
        AttemptOutcome.FAILED,
        AttemptOutcome.SUCCEEDED,
    ]


async def test_unlisted_statuses_keep_the_default(harness: Harness, receiver: Receiver) -> None:
    gone = receiver.plan("/gone", Reply(410))
    run = await harness.fire(
        "gone",
        gone,
        retry=Retry(max_attempts=5, retry_on_status=[404], permanent_on_status=[503], **QUICK),
    )
    done = await harness.settled(run.id)
    assert (done.reason, done.attempt) == ("permanent_error", 1)
    busy = receiver.plan("/busy", Reply(502), Reply(200))
    run = await harness.fire(
        "busy",
        busy,
        retry=Retry(max_attempts=5, retry_on_status=[404], permanent_on_status=[503], **QUICK),
    )
    done = await harness.settled(run.id)
    assert (done.state, done.attempt) == (RunState.SUCCEEDED, 2)


@pytest.mark.parametrize("status", [300, 599])
async def test_status_bounds_are_accepted(harness: Harness, status: int) -> None:
    job = await harness.job(
        "bounds", "http://127.0.0.1:9/x", retry=Retry(permanent_on_status=[status])
    )
    assert job.retry.permanent_on_status == (status,)
