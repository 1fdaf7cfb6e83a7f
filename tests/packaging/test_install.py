"""The built wheel, installed the ways users install it — into a fresh ``python -m venv`` with
pip, with ``uv tool install`` and with ``pipx install`` — works from that isolated install, away
from this checkout. Dependencies come from the package index (PyPI in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from duetime import __version__
from duetime.store.base import SCHEMA_VERSION
from tests.packaging.conftest import ROOT, Dists, require_tool

pytestmark = pytest.mark.slow

# Settings of this checkout's shell that must not leak into an isolated install.
_LEAKY = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "DUETIME_DATABASE_URL", "DUETIME_TENANT")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the dev venv: its bin is dropped from PATH."""
    dev_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != dev_bin)
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


def run(
    *args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def assert_the_command_works(executable: Path, cwd: Path, env: dict[str, str]) -> None:
    """``duetime --version`` and ``duetime up --help`` from an installed script."""
    assert executable.is_file(), executable
    assert ok(run(executable, "--version", cwd=cwd, env=env)).strip() == f"duetime {__version__}"
    assert "Usage: duetime up" in ok(run(executable, "up", "--help", cwd=cwd, env=env))


def test_pip_install_into_a_fresh_venv(dists: Dists, tmp_path: Path) -> None:
    venv, work, env = tmp_path / "venv", tmp_path / "work", clean_env()
    work.mkdir()
    ok(run(sys.executable, "-m", "venv", venv, cwd=work, env=env))
    ok(run(venv / "bin" / "python", "-m", "pip", "install", dists.wheel, cwd=work, env=env))

    where = ok(
        run(venv / "bin/python", "-c", "import duetime; print(duetime.__file__)", cwd=work, env=env)
    )
    assert Path(where.strip()).is_relative_to(venv)
    assert not Path(where.strip()).is_relative_to(ROOT)

    duetime = venv / "bin" / "duetime"
    assert_the_command_works(duetime, work, env)

    # The SQL shipped in the wheel: every migration applies, and doctor reads them back.
    db = work / "packaged.db"
    ok(run(duetime, "migrate", "--db", db, cwd=work, env=env))
    doctor = run(duetime, "doctor", "--db", db, "--json", cwd=work, env=env)
    # No scheduler runs, so doctor fails those checks (exit 1); the database ones pass.
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["database"]["status"] == "ok"
    assert checks["schema"]["status"] == "ok"
    assert checks["schema"]["detail"].startswith(f"v{SCHEMA_VERSION},")
    assert checks["schedulers"]["status"] == "fail"


def test_uv_tool_install(dists: Dists, tmp_path: Path) -> None:
    require_tool("uv")
    from uv import find_uv_bin

    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(
        UV_TOOL_DIR=str(tmp_path / "tools"),
        UV_TOOL_BIN_DIR=str(tmp_path / "bin"),
        UV_PYTHON_DOWNLOADS="never",
    )
    ok(
        run(
            find_uv_bin(),
            "tool",
            "install",
            "--python",
            sys.executable,
            dists.wheel,
            cwd=work,
            env=env,
        )
    )
    assert_the_command_works(tmp_path / "bin" / "duetime", work, env)


def test_pipx_install(dists: Dists, tmp_path: Path) -> None:
    require_tool("pipx")
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(
        PIPX_HOME=str(tmp_path / "pipx"),
        PIPX_BIN_DIR=str(tmp_path / "bin"),
        PIPX_MAN_DIR=str(tmp_path / "man"),
    )
    ok(
        run(
            sys.executable,
            "-m",
            "pipx",
            "install",
            "--python",
            sys.executable,
            dists.wheel,
            cwd=work,
            env=env,
        )
    )
    assert_the_command_works(tmp_path / "bin" / "duetime", work, env)
