"""The wheel and sdist of this checkout, built once per test session with ``python -m build``.

Building takes a few seconds; every packaging test shares the one build. Without the
``build`` package (it comes with the dev extras) the tests are skipped, except under
``CI=true`` where they fail.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import in_ci

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Dists:
    """The two files ``python -m build`` wrote, and its combined output."""

    wheel: Path
    sdist: Path
    log: str


def require_tool(module: str) -> None:
    """Skip the test when ``module`` is missing — fail instead under ``CI=true``."""
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed (pip install -e '.[dev]')"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    require_tool("build")
    outdir = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(outdir), str(ROOT)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    (wheel,) = outdir.glob("*.whl")
    (sdist,) = outdir.glob("*.tar.gz")
    return Dists(wheel=wheel, sdist=sdist, log=log)
