"""Progress bars of the commands that work through many items (issue 17): drawn on stderr
when it is a terminal (a pseudo-terminal here), absent otherwise — output unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path

from clikit import DeadRuns
from realcli import duetime, duetime_on_tty, needs_executable

pytestmark = needs_executable


def jobs_file(path: Path, count: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"name": f"job-{i:04d}", "task": "duetime.noop", "cron": "0 3 * * *"}) + "\n"
            for i in range(count)
        )
    )
    return path


def test_import_without_a_terminal_prints_only_its_summary(tmp_path: Path, db: str) -> None:
    file = jobs_file(tmp_path / "jobs.jsonl", 2500)
    result = duetime("jobs", "import", str(file), "--allow-unregistered", "--db", db)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("imported 2500 jobs (0 existed already) from 2500 lines in ")
    assert result.stdout.count("\n") == 1


def test_import_on_a_terminal_draws_a_progress_bar(tmp_path: Path, db: str) -> None:
    file = jobs_file(tmp_path / "jobs.jsonl", 2500)
    result = duetime_on_tty("jobs", "import", str(file), "--allow-unregistered", "--db", db)
    assert result.returncode == 0, result.terminal
    assert "importing jobs" in result.terminal
    assert "100%" in result.terminal
    assert "2,500 lines" in result.terminal
    assert result.stdout.startswith("imported 2500 jobs (0 existed already) from 2500 lines in ")
    assert result.stdout.count("\n") == 1  # the bar never reaches stdout


def test_replay_of_every_dead_run_draws_a_progress_bar(db: str, dead_runs: DeadRuns) -> None:
    dead_runs.make("doomed", 3)
    result = duetime_on_tty("dlq", "replay", "--all", "--db", db)
    assert result.returncode == 0, result.terminal
    assert "replaying dead runs" in result.terminal
    assert "3 replayed" in result.terminal
    assert result.stdout == "replayed 3 runs\n"
    dead_runs.make("doomed-again", 2)
    plain = duetime("dlq", "replay", "--all", "--json", "--db", db)
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr == ""
    assert json.loads(plain.stdout)["replayed"] == 2


def test_listing_every_page_draws_a_progress_bar_but_json_stays_clean(
    tmp_path: Path, db: str
) -> None:
    file = jobs_file(tmp_path / "jobs.jsonl", 5)
    assert duetime("jobs", "import", str(file), "--allow-unregistered", "--db", db).returncode == 0
    result = duetime_on_tty("jobs", "list", "--all", "--limit", "2", "--json", "--db", db)
    assert result.returncode == 0, result.terminal
    assert "listing jobs" in result.terminal
    assert "5 jobs" in result.terminal
    assert len(json.loads(result.stdout)["items"]) == 5
    plain = duetime("jobs", "list", "--all", "--limit", "2", "--json", "--db", db)
    assert plain.stderr == ""
    assert plain.stdout == result.stdout


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_an_error_prints_on_its_own_line_above_the_bar(tmp_path: Path, db: str) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text(
        '{"name": "ok", "task": "duetime.noop", "cron": "0 3 * * *"}\n'
        '{"name": "bad", "task": "duetime.noop", "cron": "61 * * * *"}\n'
    )
    result = duetime_on_tty("jobs", "import", str(file), "--allow-unregistered", "--db", db)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = re.split(r"[\r\n]+", ANSI.sub("", result.terminal))
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, lines
    assert errors[0].startswith("error: line 2: cron: minute field '61'"), errors
    assert errors[0].endswith("out of range 0-59"), errors
