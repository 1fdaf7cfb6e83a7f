"""The docs site builds with ``mkdocs build --strict`` (warnings are errors), and its generated
reference pages hold what they are made from: every command's ``--help``, every operation of
the OpenAPI document, the Python API's docstrings."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs", reason="the docs site needs the dev extras (mkdocs-material)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("DUETIME_DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_the_cli_reference_shows_each_commands_help(site: Path) -> None:
    import typer

    from duetime.cli import cli

    text = text_of(site / "reference" / "cli" / "index.html")
    root = typer.main.get_command(cli)
    ctx = root.context_class(root)
    for name in root.list_commands(ctx):
        assert f"duetime {name}" in text, name
    assert "Usage: duetime jobs import" in text
    assert "--celery-beat" in text
    assert "Usage: duetime bench" in text


def test_the_rest_reference_lists_every_operation(site: Path) -> None:
    document = json.loads((site / "reference" / "openapi.json").read_text())
    assert document["openapi"].startswith("3.")
    text = text_of(site / "reference" / "rest-api" / "index.html")
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"{method.upper()} {path}" in text, (method, path)


def test_the_python_reference_comes_from_the_docstrings(site: Path) -> None:
    from duetime.app import AsyncApp

    text = " ".join(text_of(site / "reference" / "python" / "index.html").split())
    assert "duetime.AsyncApp" in text
    first_line = (AsyncApp.__doc__ or "").strip().splitlines()[0]
    assert " ".join(first_line.replace("``", "").split()) in text


def test_the_readme_is_short_and_links_to_the_site() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 80
    assert "docs/index.md" in readme
    assert "mkdocs" in readme
