"""Issue 16 item 6 in the CLI: ``jobs add`` / ``jobs update`` take the retry window and the
error classification, ``jobs show`` prints them, and bad values are usage errors naming the
field (no traceback)."""

from __future__ import annotations

import json

import pytest
from clikit import Invoke, assert_usage_error, ok


def add(invoke: Invoke, name: str, *args: str) -> dict:
    return json.loads(ok(invoke("jobs", "add", name, "--task", "duetime.noop", *args)).stdout)


def test_add_update_and_show_the_rules(invoke: Invoke) -> None:
    job = add(
        invoke,
        "sync",
        "--every",
        "60",
        "--max-attempts",
        "10",
        "--retry-within",
        "1h",
        "--permanent-on",
        "ValueError",
        "--permanent-on",
        "myapp.errors.Fatal",
        "--retry-on",
        "myapp.errors.Flaky",
        "--permanent-on-status",
        "404",
        "--retry-on-status",
        "409",
        "--json",
    )
    retry = job["retry"]
    assert (retry["max_attempts"], retry["within"]) == (10, 3600.0)
    assert retry["permanent_on"] == ["ValueError", "myapp.errors.Fatal"]
    assert retry["retry_on"] == ["myapp.errors.Flaky"]
    assert (retry["permanent_on_status"], retry["retry_on_status"]) == ([404], [409])

    shown = ok(invoke("jobs", "show", "sync")).stdout
    assert "within 1h00m00s of the run's instant" in shown
    assert "permanent on ValueError, myapp.errors.Fatal" in shown
    assert "retried on status 409" in shown

    changed = json.loads(
        ok(
            invoke(
                "jobs",
                "update",
                "sync",
                "--retry-within",
                "none",
                "--permanent-on",
                "none",
                "--retry-on-status",
                "429",
                "--json",
            )
        ).stdout
    )["retry"]
    assert (changed["within"], changed["permanent_on"]) == (None, [])
    assert changed["retry_on_status"] == [429]
    assert changed["retry_on"] == ["myapp.errors.Flaky"], "what was not given is kept"
    assert changed["max_attempts"] == 10


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(("--retry-within", "-5"), "--retry-within: ", id="negative-window"),
        pytest.param(("--retry-within", "soon"), "--retry-within", id="not-a-duration"),
        pytest.param(("--permanent-on", "ValueErorr"), "--permanent-on: ", id="typo"),
        pytest.param(("--retry-on-status", "600"), "--retry-on-status: ", id="status-600"),
        pytest.param(("--retry-on-status", "abc"), "--retry-on-status", id="status-text"),
        pytest.param(
            ("--permanent-on", "KeyError", "--retry-on", "KeyError"),
            "--retry-on: ",
            id="in-both",
        ),
    ],
)
def test_bad_rules_are_usage_errors(invoke: Invoke, args: tuple[str, ...], needle: str) -> None:
    result = invoke("jobs", "add", "j", "--task", "duetime.noop", "--every", "60", *args)
    assert_usage_error(result, needle)


def test_update_errors_name_the_flag(invoke: Invoke) -> None:
    """Registration names the Python field (``retry.within``); the CLI names its flag."""
    ok(invoke("jobs", "add", "j", "--task", "duetime.noop", "--every", "60"))
    assert_usage_error(invoke("jobs", "update", "j", "--retry-within", "0s"), "--retry-within: ")
    assert_usage_error(invoke("jobs", "update", "j", "--max-attempts", "0"), "--max-attempts: ")
