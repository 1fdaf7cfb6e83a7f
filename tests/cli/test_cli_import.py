"""``duetime jobs import FILE.jsonl``: bulk registration from JSON Lines, in-process."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import Invoke, assert_usage_error


def write(path: Path, *lines: object) -> str:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return str(path)


def test_imports_jobs_and_leaves_existing_names(invoke: Invoke, tmp_path: Path) -> None:
    file = write(
        tmp_path / "jobs.jsonl",
        {"name": "daily", "task": "duetime.noop", "cron": "0 3 * * *", "tz": "Europe/Paris"},
        "",
        {"name": "once", "task": "duetime.noop", "at": "2030-01-01T10:00:00Z"},
        {"name": "soon", "task": "duetime.noop", "at": "PT3H", "retry": {"max_attempts": 5}},
        {"name": "tick", "task": "duetime.noop", "every": "90s", "tags": ["a", "b"]},
    )
    result = invoke("jobs", "import", file)
    assert result.exit_code == 0, result.output
    assert "imported 4 jobs (0 existed already) from 4 lines" in result.stdout
    shown = json.loads(invoke("jobs", "show", "once", "--json").stdout)
    assert shown["job"]["next_fire_at"].startswith("2030-01-01T10:00:00")
    again = invoke("jobs", "import", file)
    assert "imported 0 jobs (4 existed already)" in again.stdout


def test_a_bad_line_is_named_by_its_line_number(invoke: Invoke, tmp_path: Path) -> None:
    file = write(
        tmp_path / "bad.jsonl",
        {"name": "ok", "task": "duetime.noop", "cron": "0 3 * * *"},
        "",
        {"name": "bad", "task": "duetime.noop", "cron": "61 * * * *"},
    )
    assert_usage_error(invoke("jobs", "import", file), "line 3", "cron", "minute")


def test_invalid_json_and_missing_file(invoke: Invoke, tmp_path: Path) -> None:
    file = write(tmp_path / "broken.jsonl", "{not json")
    assert_usage_error(invoke("jobs", "import", file), "line 1", "not valid JSON")
    assert_usage_error(invoke("jobs", "import", str(tmp_path / "nope.jsonl")), "no such file")
