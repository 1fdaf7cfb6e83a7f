"""docs/testing.md's worked example runs as written: its three files (each block names its file
on its first line) become a project that pytest runs with the plugin, and its tests pass."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.testing.test_plugin import PLUGINS

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
BLOCK = re.compile(r"```python\n# (\w+)\.py\n(.*?)```", re.DOTALL)


def example_files() -> dict[str, str]:
    return {name: f"# {name}.py\n{body}" for name, body in BLOCK.findall(DOC.read_text())}


def test_the_worked_example_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = example_files()
    assert set(files) == {"myapp", "conftest", "test_billing"}
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(**files)
    result = pytester.runpytest_subprocess(*PLUGINS)
    result.assert_outcomes(passed=3)
