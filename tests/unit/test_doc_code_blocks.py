"""Every code block of README.md and docs/*.md works when pasted.

``python`` blocks run, in order, one namespace per document (a later block may use what an
earlier one defined, as a reader pasting them would), against a temporary SQLite database:
each ``postgresql://…`` URL in a snippet becomes that file's path. A block that cannot run on
its own says so, with the reason, in an HTML comment on the line just before its fence:
``<!-- not run: needs a running API server -->``. ``<!-- given: app -->`` there hands the block
an ``app`` (a :class:`duetime.App` on the temporary database) — for a snippet that continues
one shown elsewhere.

``bash``/``sh`` blocks: every ``duetime …`` command line names an existing command (its
``--help`` exits 0).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import duetime
from duetime.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->$")
GIVEN = re.compile(r"^<!--\s*given:\s*(\w+(?:\s*,\s*\w+)*)\s*-->$")
POSTGRES_URL = re.compile(r"""postgres(?:ql)?://[^"'\s]*""")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: str | None  # the reason, if marked
    given: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks(document: Path) -> list[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start, language = i, opening.group(1)
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        previous = lines[start - 1].strip() if start > 0 else ""
        not_run, given = NOT_RUN.match(previous), GIVEN.match(previous)
        found.append(
            Block(
                document=document,
                line=start + 1,
                language=language,
                code="\n".join(lines[start + 1 : i]) + "\n",
                not_run=not_run.group(1) if not_run else None,
                given=tuple(n.strip() for n in given.group(1).split(",")) if given else (),
            )
        )
        i += 1
    return found


ALL_BLOCKS = [block for document in DOCUMENTS for block in blocks(document)]
PYTHON_DOCUMENTS = [
    d for d in DOCUMENTS if any(b.language == "python" for b in ALL_BLOCKS if b.document == d)
]


def test_the_documents_have_python_and_shell_blocks() -> None:
    languages = {b.language for b in ALL_BLOCKS}
    assert {"python", "bash"} <= languages
    for block in ALL_BLOCKS:  # a marker must say why
        if block.not_run is not None:
            assert len(block.not_run) > 10, f"{block.where}: give the reason it is not run"


@pytest.mark.parametrize("document", PYTHON_DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_python_blocks_run(document: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = str(tmp_path / "docs.db")
    monkeypatch.chdir(tmp_path)  # a snippet's relative paths (`App("duetime.db")`) land here
    namespace: dict[str, Any] = {"__name__": "__doc_snippet__"}
    opened: list[Any] = []
    try:
        for block in blocks(document):
            if block.language != "python" or block.not_run is not None:
                continue
            for name in block.given:
                assert name == "app", f"{block.where}: only `app` can be given, not {name!r}"
                if "app" not in namespace:
                    namespace["app"] = duetime.App(database)
            code = POSTGRES_URL.sub(database, block.code)
            try:
                exec(compile(code, block.where, "exec"), namespace)
            except Exception as exc:
                pytest.fail(f"{block.where}: the block fails when pasted: {exc!r}")
            app = namespace.get("app")
            if app is not None and app not in opened:
                opened.append(app)
    finally:
        for app in opened:
            close = getattr(app, "close", None)
            if callable(close):
                close()


def _command_words(line: str) -> list[str] | None:
    """The words of a ``duetime …`` command line up to its first option, or None."""
    line = line.split(" #", 1)[0].strip()  # a trailing comment
    if not line.startswith("duetime "):
        return None
    words = shlex.split(line)[1:]
    out = []
    for word in words:
        if word.startswith("-"):
            break
        out.append(word)
    return out


SHELL_COMMANDS = sorted(
    {
        (block.where, " ".join(words))
        for block in ALL_BLOCKS
        if block.language in ("bash", "sh")
        for line in block.code.splitlines()
        for part in re.split(r"&&|;|\|", line)
        if (words := _command_words(part.strip())) is not None
    }
)


def test_shell_blocks_name_duetime_commands() -> None:
    assert SHELL_COMMANDS, "no `duetime …` lines found in shell blocks"


@pytest.mark.parametrize(("where", "command"), SHELL_COMMANDS)
def test_shell_block_commands_exist(where: str, command: str) -> None:
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
