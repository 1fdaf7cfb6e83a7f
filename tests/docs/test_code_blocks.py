"""Every code block of README.md and the docs site (docs/**/*.md) runs, page by page, unless
marked; the one runner of the documentation's code (decision 0025).

Each page runs in a fresh temporary directory, which is the current directory, with
``DUETIME_DATABASE_URL`` naming ``duetime.db`` there; its blocks run in order:

- ``python``: in one namespace per page (a later block may use what an earlier one defined);
  a ``postgresql://…`` URL becomes the temporary SQLite database; ``<!-- given: app -->``
  before the fence hands the block an ``app`` on it. Every app a page opened is closed.
- ``bash``/``sh``: every line that is not blank or a comment is a ``duetime …`` command, run
  by the shell with the real executable, and must exit 0. Long-running commands cannot run.
- anything else (``text``, ``json``, ``yaml``, ``mermaid``, output) is shown, not run.

``<!-- not run: <reason> -->`` on the line before a fence skips the block; the reason is
required. Even then, each ``duetime …`` command a shell block names (marked or not, up to its
first option, also after ``&&``, ``;`` or ``|``) must be a real command: its ``--help`` exits
0. docs/writing-docs.md tells authors the same.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import duetime
from duetime.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "decisions" not in p.parts)]
FENCE = re.compile(r"^(```+)\s*([\w-]*)")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
GIVEN = re.compile(r"^<!--\s*given:\s*(\w+(?:\s*,\s*\w+)*)\s*-->$")
POSTGRES_URL = re.compile(r"""postgres(?:ql)?://[^"'\s]*""")
SHELL = {"bash", "sh", "shell", "console"}
RUNNABLE = {"python", "py", *SHELL}
LONG_RUNNING = {"up", "server", "scheduler", "worker"}
COMMAND_TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: str | None
    given: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` (a fence inside a longer fence is content, not a block)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, language, start = opening.group(1), opening.group(2), i
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            i += 1
        previous = lines[start - 1].strip() if start > 0 else ""
        not_run, given = NOT_RUN.match(previous), GIVEN.match(previous)
        found.append(
            Block(
                page=page,
                line=start + 1,
                language=language,
                code="\n".join(lines[start + 1 : i]) + "\n",
                not_run=not_run.group(1) if not_run else None,
                given=tuple(n.strip() for n in given.group(1).split(",")) if given else (),
            )
        )
        i += 1
    return found


def shell_commands(block: Block) -> list[str]:
    """The command lines of a shell block (continuations joined), each checked runnable."""
    commands: list[str] = []
    for raw in block.code.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        assert words[0] == "duetime", (
            f"{block.where}: `{line}` is not a duetime command: make the block runnable or "
            "mark it <!-- not run: reason -->"
        )
        assert len(words) < 2 or words[1] not in LONG_RUNNING, (
            f"{block.where}: `{line}` runs until stopped: mark it <!-- not run: reason -->"
        )
        commands.append(line)
    return commands


def run_python(block: Block, namespace: dict[str, Any], database: str) -> None:
    for name in block.given:
        assert name == "app", f"{block.where}: only `app` can be given, not {name!r}"
        if "app" not in namespace:
            namespace["app"] = duetime.App(database)
    code = POSTGRES_URL.sub(database, block.code)
    try:
        exec(compile(code, block.where, "exec"), namespace)
    except Exception as exc:
        pytest.fail(f"{block.where}: the block fails when pasted: {exc!r}")


def run_shell(block: Block, env: dict[str, str], cwd: Path) -> None:
    for command in shell_commands(block):
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, (
            f"{block.where}: `{command}` exited {result.returncode}:\n{result.stderr}"
        )


def test_the_site_has_runnable_blocks_and_every_marker_says_why() -> None:
    every = [b for page in PAGES for b in blocks(page)]
    assert {b.language for b in every if b.not_run is None} >= {"python", "bash"}
    for block in every:
        if block.not_run is not None:
            assert len(block.not_run) > 10, f"{block.where}: give the reason it is not run"


PAGES_WITH_CODE = [
    p for p in PAGES if any(b.language in RUNNABLE and b.not_run is None for b in blocks(p))
]


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pages_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = str(tmp_path / "duetime.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DUETIME_DATABASE_URL", database)
    for name in ("DUETIME_TENANT", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict[str, Any] = {"__name__": "__doc_snippet__"}
    opened: list[Any] = []
    try:
        for block in blocks(page):
            if block.not_run is not None or block.language not in RUNNABLE:
                continue
            if block.language in SHELL:
                run_shell(block, env, tmp_path)
            else:
                run_python(block, namespace, database)
            _keep(namespace.get("app"), opened)
    finally:
        _keep(namespace.get("app"), opened)  # also the one a failing block opened
        for app in opened:
            close = getattr(app, "close", None)
            if callable(close):
                closing = close()
                if inspect.isawaitable(closing):  # an AsyncApp
                    asyncio.run(closing)  # type: ignore[arg-type]


def _keep(app: Any, opened: list[Any]) -> None:
    """Remember ``app`` to close it after the page (a block may bind ``app`` anew)."""
    if app is not None and all(app is not seen for seen in opened):
        opened.append(app)


def _command_words(line: str) -> list[str] | None:
    """The words of a ``duetime …`` command line up to its first option, or None."""
    line = line.split(" #", 1)[0].strip()  # a trailing comment
    if not line.startswith("duetime "):
        return None
    words = []
    for word in shlex.split(line)[1:]:
        if word.startswith("-"):
            break
        words.append(word)
    return words


SHELL_COMMANDS = sorted(
    {
        (block.where, " ".join(words))
        for page in PAGES
        for block in blocks(page)
        if block.language in SHELL
        for line in block.code.replace("\\\n", " ").splitlines()
        for part in re.split(r"&&|;|\|", line)
        if (words := _command_words(part.strip())) is not None
    }
)


def test_shell_blocks_name_duetime_commands() -> None:
    assert SHELL_COMMANDS, "no `duetime …` lines found in shell blocks"


@pytest.mark.parametrize(("where", "command"), SHELL_COMMANDS)
def test_shell_block_commands_exist(where: str, command: str) -> None:
    """Marked blocks too: a command a reader copies from them must exist."""
    current: Any = typer.main.get_command(cli)
    path: list[str] = []
    for word in command.split():
        if not hasattr(current, "commands"):
            break  # a command, not a group: the rest are its arguments
        sub = current.commands.get(word)
        assert sub is not None, f"{where}: `duetime {' '.join([*path, word])}` is no command"
        path.append(word)
        current = sub
    assert path, f"{where}: `duetime {command}` names no command"
    assert not hasattr(current, "commands"), f"{where}: `duetime {command}` is a group"
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, f"{where}: duetime {' '.join(path)} --help: {result.output}"
