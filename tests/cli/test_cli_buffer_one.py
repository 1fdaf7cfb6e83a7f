"""``jobs add`` / ``jobs update`` / ``jobs show`` with the overlap options of issue 16
(``--overlap buffer_one``, ``--max-waiting``, ``--replace-timeout``; decision 0016)."""

from __future__ import annotations

import json

from clikit import Invoke, assert_usage_error, ok


def test_the_overlap_options_are_set_changed_and_shown(invoke: Invoke) -> None:
    base = ("--task", "duetime.noop", "--every", "60")
    added = json.loads(
        ok(
            invoke(
                "jobs",
                "add",
                "rollup",
                *base,
                "--overlap",
                "serialize",
                "--max-waiting",
                "3",
                "--json",
            )
        ).stdout
    )
    assert (added["overlap_policy"], added["max_waiting"]) == ("serialize", 3)
    shown = ok(invoke("jobs", "show", "rollup")).stdout
    assert "serialize (at most 3 waiting)" in shown
    ok(invoke("jobs", "update", "rollup", "--overlap", "replace", "--replace-timeout", "10"))
    shown = ok(invoke("jobs", "show", "rollup")).stdout
    assert "replace (stop within 10s)" in shown  # the cap went with serialize
    ok(invoke("jobs", "update", "rollup", "--overlap", "buffer_one"))
    job = json.loads(ok(invoke("jobs", "show", "rollup", "--json")).stdout)["job"]
    assert (job["overlap_policy"], job["replace_timeout"]) == ("buffer_one", 10.0)


def test_bad_overlap_options_name_their_field(invoke: Invoke) -> None:
    base = ("--task", "duetime.noop", "--every", "60")
    assert_usage_error(
        invoke("jobs", "add", "a", *base, "--overlap", "serialize", "--max-waiting", "-1"),
        "max_waiting",
    )
    assert_usage_error(
        invoke("jobs", "add", "b", *base, "--overlap", "replace", "--replace-timeout", "-5"),
        "replace_timeout",
    )
    assert_usage_error(invoke("jobs", "add", "c", *base, "--max-waiting", "2"), "max_waiting")
    assert_usage_error(invoke("jobs", "add", "d", *base, "--overlap", "buffer_once"), "overlap")
