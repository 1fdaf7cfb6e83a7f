"""``duetime jobs import``'s errors name the line, then the field, in the CLI's words."""

from __future__ import annotations

from pathlib import Path

from realcli import duetime, needs_executable

pytestmark = needs_executable


def test_a_bad_line_names_its_line_and_field_once(tmp_path: Path, db: str) -> None:
    file = tmp_path / "jobs.jsonl"
    file.write_text('{"name": "hook", "target": {"url": "https://example.com"}, "now": true}\n')
    result = duetime("jobs", "import", str(file), "--db", db)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: line 1: target.type: "), result.stderr
    assert "specs[" not in result.stderr


def test_an_unknown_task_names_the_option_that_accepts_it(tmp_path: Path, db: str) -> None:
    file = tmp_path / "jobs.jsonl"
    file.write_text('{"name": "report", "task": "reports.build", "cron": "0 3 * * *"}\n')
    result = duetime("jobs", "import", str(file), "--db", db)
    assert result.returncode == 2
    assert result.stderr.startswith("error: line 1: task: unknown task 'reports.build'")
    assert result.stderr.endswith("or pass --allow-unregistered)\n"), result.stderr
