"""Help as a new user reads it: flags show no metavar, command summaries are whole lines that
only the terminal's width wraps, option help is printed whole, the JSONL import format is
explained; and shell completion (issue 17)."""

from __future__ import annotations

import inspect
import itertools
import re
import subprocess
from pathlib import Path

import pytest
import typer
from realcli import EXECUTABLE, duetime, environment, needs_executable
from typer.core import TyperGroup as Group
from typer.testing import CliRunner

from duetime.cli import cli


def command_paths() -> list[list[str]]:
    """Every command and group of the CLI, as the words that name it (the root is [])."""
    paths: list[list[str]] = []

    def walk(command: object, path: list[str]) -> None:
        paths.append(path)
        if isinstance(command, Group):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(cli), [])
    return paths


def test_no_flag_shows_a_metavar_in_any_help() -> None:
    runner = CliRunner()
    paths = command_paths()
    assert ["jobs", "import"] in paths
    assert len(paths) > 30
    for path in paths:
        result = runner.invoke(cli, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, (path, result.output)
        assert re.search(r"--help\s+Show this message and exit", result.output), path
    # options that take a value still show its type
    listed = runner.invoke(cli, ["jobs", "list", "--help"], env={"COLUMNS": "200"}).output
    assert re.search(r"--limit\s+<int>", listed)
    assert re.search(r"--json\s+Print JSON instead of a table", listed)


@needs_executable
def test_the_executable_shows_flags_without_a_metavar() -> None:
    for args in (["--help"], ["jobs", "list", "--help"], ["jobs", "delete", "--help"]):
        result = duetime(*args, env={"COLUMNS": "200"})
        assert result.returncode == 0, result.stderr
        assert "<bool>" not in result.stdout, result.stdout
    root = duetime("--help", env={"COLUMNS": "200"}).stdout
    assert re.search(r"--version\s+Print the version and exit", root)


def summaries(help_text: str) -> dict[str, list[str]]:
    """The Commands panel of a group's help: each command's summary, as printed lines."""
    panel = help_text[help_text.index("─ Commands ─") :]
    rows: dict[str, list[str]] = {}
    name = ""
    for line in panel.splitlines()[1:]:
        if not line.startswith("│"):
            break
        match = re.match(r"│ (\S*)\s+(.*?)\s*│$", line)
        assert match is not None, line
        if match[1]:
            name = match[1]
            rows[name] = []
        rows[name].append(match[2])
    return rows


def first_paragraph(path: list[str]) -> str:
    command = typer.main.get_command(cli)
    for word in path:
        assert isinstance(command, Group)
        command = command.commands[word]
    return " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())


@needs_executable
def test_each_summary_is_one_line_at_a_wide_terminal() -> None:
    for group in ([], ["jobs"], ["runs"], ["dlq"]):
        shown = summaries(duetime(*group, "--help", env={"COLUMNS": "200"}).stdout)
        assert shown, group
        for name, lines in shown.items():
            assert len(lines) == 1, (group, name, lines)
            assert lines[0] == first_paragraph([*group, name]), (group, name)
    assert summaries(duetime("--help", env={"COLUMNS": "200"}).stdout)["explain"] == [
        "Why JOB did or didn't fire, and when it fires next."
    ]


@needs_executable
def test_summaries_wrap_only_where_the_terminal_is_full() -> None:
    result = duetime("--help", env={"COLUMNS": "80"})
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ ")]
    panel = result.stdout[result.stdout.index("─ Commands ─") :]
    first = next(line for line in panel.splitlines() if re.match(r"│ \S", line))
    column = re.match(r"│ \S+\s+", first)
    assert column is not None
    width = len(first) - 2 - column.end()  # the text column, up to its padding and border
    wrapped = 0
    for name, lines in summaries(result.stdout).items():
        for before, after in itertools.pairwise(lines):
            wrapped += 1
            assert len(before) + 1 + len(after.split()[0]) > width, (name, lines)
        assert " ".join(lines) == first_paragraph([name]), name
    assert rows
    assert wrapped > 0


@needs_executable
def test_option_help_is_printed_whole() -> None:
    shown = duetime("jobs", "list", "--help", env={"COLUMNS": "200"}).stdout
    assert "SQLite path (default ./duetime.db) or postgresql:// URL." in shown
    preview = duetime("preview", "--help", env={"COLUMNS": "200"}).stdout
    assert "with offset or Z (default: now)." in preview


@needs_executable
def test_import_help_names_the_jsonl_format() -> None:
    shown = duetime("jobs", "import", "--help", env={"COLUMNS": "200"}).stdout
    assert "one JSON object per line" in shown
    assert "exactly one of cron, at, every or now" in shown
    example = '{"name": "nightly-report", "task": "reports.build", "cron": "0 3 * * *"'
    assert any(line.strip(" │").startswith(example) for line in shown.splitlines()), shown


DOCS = Path(__file__).parents[2] / "docs" / "cli.md"


@needs_executable
def test_the_example_files_of_the_help_and_the_docs_import(tmp_path: Path) -> None:
    shown = duetime("jobs", "import", "--help", env={"COLUMNS": "200"}).stdout
    from_help = [s for line in shown.splitlines() if (s := line.strip(" │")).startswith("{")]
    docs = DOCS.read_text()
    block = docs[docs.index("```json\n") + len("```json\n") :]
    from_docs = block[: block.index("```")].splitlines()
    for name, lines in (("help", from_help), ("docs", from_docs)):
        assert len(lines) >= 3, name
        file = tmp_path / f"{name}.jsonl"
        file.write_text("\n".join(lines) + "\n")
        db = str(tmp_path / f"{name}.db")
        result = duetime("jobs", "import", str(file), "--allow-unregistered", "--db", db)
        assert result.returncode == 0, (name, result.stderr)
        assert result.stdout.startswith(f"imported {len(lines)} jobs (0 existed already)"), name


# --- completion -------------------------------------------------------------------------------


@needs_executable
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "powershell"])
def test_completion_prints_the_script_of_a_shell(shell: str) -> None:
    result = duetime("completion", shell)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "duetime" in result.stdout
    assert "_DUETIME_COMPLETE" in result.stdout
    assert f"complete_{shell}" in result.stdout


@needs_executable
def test_completion_refuses_an_unknown_shell_in_one_line() -> None:
    result = duetime("completion", "tcsh")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == "error: SHELL: 'tcsh' is not one of: bash, zsh, fish, powershell\n"


@needs_executable
def test_the_bash_script_completes_commands_in_bash(tmp_path: Path) -> None:
    """Load the printed script in a real bash and complete `duetime jo` and `duetime jobs li`."""
    assert EXECUTABLE is not None
    bash = "/bin/bash"
    if not Path(bash).exists():
        pytest.skip("no bash")
    script = duetime("completion", "bash").stdout
    (tmp_path / "duetime.bash").write_text(script)
    program = f"""
source {tmp_path / "duetime.bash"}
complete -p duetime
COMP_WORDS=(duetime jo); COMP_CWORD=1; _duetime_completion duetime
echo "words: ${{COMPREPLY[*]}}"
COMP_WORDS=(duetime jobs li); COMP_CWORD=2; _duetime_completion duetime
echo "words: ${{COMPREPLY[*]}}"
"""
    env = environment({"PATH": f"{Path(EXECUTABLE).parent}:{environment()['PATH']}"})
    result = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", program],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "_duetime_completion" in lines[0]
    assert lines[1:] == ["words: jobs", "words: list"]
