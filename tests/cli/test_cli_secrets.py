"""The CLI never prints a webhook credential: a job's (and a run's) ``target.headers`` values
read ``<redacted>`` in ``jobs show/list`` (text and ``--json``) and ``runs … --json``; an
import line carrying the marker is refused, naming the header."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import Invoke, assert_usage_error, ok

from duetime import App

SECRET = "Bearer s3cret-cli"
TARGET = {
    "type": "http",
    "url": "https://hooks.example.com/cli",
    "headers": {"Authorization": SECRET, "X-Env": "prod-eu"},
}
REDACTED = {"Authorization": "<redacted>", "X-Env": "<redacted>"}


def make_hook(db: str) -> str:
    with App(db, migrate=True) as app:
        app.schedule("hook", target=TARGET, cron="0 3 * * *")
        return str(app.trigger("hook").id)


def test_jobs_show_and_list_redact_header_values(invoke: Invoke, db: str) -> None:
    make_hook(db)
    shown = ok(invoke("jobs", "show", "hook", "--json"))
    listed = ok(invoke("jobs", "list", "--json"))
    text = ok(invoke("jobs", "show", "hook"))
    table = ok(invoke("jobs", "list"))
    paused = ok(invoke("jobs", "pause", "hook", "--json"))
    for result in (shown, listed, text, table, paused):
        assert SECRET not in result.output
        assert "prod-eu" not in result.output
    assert json.loads(shown.stdout)["job"]["target"]["headers"] == REDACTED
    assert json.loads(listed.stdout)["items"][0]["target"]["headers"] == REDACTED
    assert json.loads(paused.stdout)["target"]["headers"] == REDACTED
    assert "Authorization: <redacted>, X-Env: <redacted>" in text.stdout
    assert "https://hooks.example.com/cli" in text.stdout
    with App(db) as app:  # the stored value is untouched
        assert app.get("hook").target["headers"]["Authorization"] == SECRET  # type: ignore[index]


def test_runs_json_redacts_the_run_target(invoke: Invoke, db: str) -> None:
    run_id = make_hook(db)
    shown = ok(invoke("runs", "show", run_id, "--json"))
    listed = ok(invoke("runs", "list", "--json"))
    for result in (shown, listed):
        assert SECRET not in result.output
        assert "prod-eu" not in result.output
    assert '"<redacted>"' in shown.stdout


def test_import_refuses_the_marker_with_nothing_to_keep(
    invoke: Invoke, db: str, tmp_path: Path
) -> None:
    line = {
        "name": "imported",
        "target": {**TARGET, "headers": {"Authorization": "<redacted>"}},
        "cron": "0 3 * * *",
    }
    source = tmp_path / "jobs.jsonl"
    source.write_text(json.dumps(line) + "\n")
    assert_usage_error(invoke("jobs", "import", str(source)), "target.headers.Authorization")
