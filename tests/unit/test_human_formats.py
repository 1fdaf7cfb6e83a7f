"""What people read (issue 17): no ``2.52e+03 days``, no ``attempt=?``, misfire warnings that
name the jobs."""

from __future__ import annotations

import logging

import pytest

from duetime._logs import TextFormatter
from duetime.explain import _seconds


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.25, "250 ms"),
        (90, "90 s"),
        (3 * 86400, "3 days"),
        (250 * 86400, "250 days"),
        (2520 * 86400, "6.9 years"),
        (40_000 * 86400, "109.5 years"),
    ],
)
def test_durations_are_never_in_exponent_notation(seconds: float, shown: str) -> None:
    assert _seconds(seconds) == shown
    assert "e+" not in _seconds(seconds)


def _line(**fields: object) -> str:
    record = logging.LogRecord("duetime.alerts", logging.WARNING, __file__, 1, "ALERT x", (), None)
    for name, value in fields.items():
        setattr(record, name, value)
    return TextFormatter().format(record)


def test_a_line_about_a_run_without_an_attempt_leaves_the_attempt_out() -> None:
    alert = _line(run_id="r1", job="nightly")
    assert alert.endswith("[run=r1 job=nightly]")
    assert "?" not in alert
    attempt = _line(run_id="r1", job="nightly", attempt=2)
    assert attempt.endswith("[run=r1 job=nightly attempt=2]")
    assert _line().endswith("ALERT x")


def test_the_misfire_warning_names_the_jobs() -> None:
    from duetime.worker.worker import misfired_jobs

    assert misfired_jobs(["nightly", "reports", "nightly", "nightly"]) == (
        "nightly (3 runs), reports"
    )
    many = misfired_jobs([f"job-{i}" for i in range(8)], shown=5)
    assert many.endswith("job-4 and 3 more jobs")
