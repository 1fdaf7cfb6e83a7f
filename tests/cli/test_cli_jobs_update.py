"""``duetime jobs update``: a partial, atomic change of a job (``app.update_job``)."""

from __future__ import annotations

import json

from clikit import Invoke, assert_usage_error, ok


def add(invoke: Invoke, name: str, *args: str) -> dict:
    return json.loads(ok(invoke("jobs", "add", name, *args, "--json")).stdout)


def test_update_changes_only_what_it_is_given(invoke: Invoke) -> None:
    job = add(
        invoke, "nightly", "--task", "duetime.noop", "--cron", "0 2 * * *", "--max-attempts", "4"
    )
    result = ok(
        invoke(
            "jobs",
            "update",
            "nightly",
            "--priority",
            "5",
            "--payload",
            '{"v": 2}',
            "--backoff-base",
            "3",
            "--tag",
            "a",
            "--json",
        )
    )
    changed = json.loads(result.stdout)
    assert (changed["priority"], changed["payload"], changed["tags"]) == (5, {"v": 2}, ["a"])
    assert changed["retry"]["max_attempts"] == 4  # merged onto the job's policy
    assert changed["retry"]["backoff_base"] == 3.0
    assert (changed["schedule"], changed["next_fire_at"]) == (job["schedule"], job["next_fire_at"])
    text = ok(invoke("jobs", "update", job["id"], "--every", "90s", "--queue", "slow"))
    assert text.stdout.startswith("updated job 'nightly'\n")
    shown = json.loads(ok(invoke("jobs", "show", "nightly", "--json")).stdout)["job"]
    assert shown["schedule"]["kind"] == "every"
    assert (shown["queue"], shown["priority"]) == ("slow", 5)


def test_update_refusals_change_nothing(invoke: Invoke) -> None:
    job = add(invoke, "j", "--task", "duetime.noop", "--cron", "0 2 * * *")
    assert_usage_error(
        invoke("jobs", "update", "j", "--priority", "1", "--cron", "61 * * * *"), "cron"
    )
    assert_usage_error(invoke("jobs", "update", "j", "--task", "billing.x"), "--allow-unregistered")
    assert_usage_error(invoke("jobs", "update", "j"), "nothing to change")
    assert_usage_error(invoke("jobs", "update", "ghost", "--priority", "1"), "not found")
    shown = json.loads(ok(invoke("jobs", "show", "j", "--json")).stdout)["job"]
    assert shown == job
    moved = ok(invoke("jobs", "update", "j", "--task", "billing.x", "--allow-unregistered"))
    assert "billing.x" in moved.stdout


def test_update_passes_each_option_it_is_given(invoke: Invoke) -> None:
    add(invoke, "j", "--task", "duetime.noop", "--cron", "0 2 * * *", "--payload", '{"v": 1}')
    args = ["--cron", "0 3 * * *", "--tz", "Europe/Paris", "--timeout", "7", "--misfire", "skip"]
    result = ok(invoke("jobs", "update", "j", *args, "--payload", "null", "--json"))
    changed = json.loads(result.stdout)
    assert (changed["schedule"]["cron"], changed["schedule"]["tz"]) == ("0 3 * * *", "Europe/Paris")
    assert (changed["timeout"], changed["misfire_policy"]) == (7, "skip")
    assert changed["payload"] is None  # `--payload null` sets a null payload
    now = json.loads(ok(invoke("jobs", "update", "j", "--now", "--json")).stdout)
    assert now["schedule"]["kind"] == "now"
