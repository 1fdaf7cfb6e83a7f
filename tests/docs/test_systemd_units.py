"""The systemd units shipped in deploy/: well-formed, running commands that exist, and — where
``systemd-analyze`` is installed — accepted by ``systemd-analyze verify`` with no warning."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from duetime.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNITS = sorted(DEPLOY.glob("*.service"))
SECTIONS = {"Unit", "Service", "Install"}
REQUIRED = {
    "Unit": {"Description", "After"},
    "Service": {"ExecStart", "User", "EnvironmentFile", "Restart", "TimeoutStopSec"},
    "Install": {"WantedBy"},
}


def parse_unit(path: Path) -> dict[str, dict[str, str]]:
    """``[Section]`` → ``Key=value`` (one value per key, as in these units). Raises on a line
    that is neither a comment, a section header nor an assignment."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1]
            assert name in SECTIONS, f"{path.name}:{number}: unknown section [{name}]"
            assert name not in sections, f"{path.name}:{number}: [{name}] twice"
            current = sections[name] = {}
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}:{number}: not Key=value"
        assert key, f"{path.name}:{number}: no key"
        assert key == key.strip(), f"{path.name}:{number}: space before '='"
        assert current is not None, f"{path.name}:{number}: assignment before any section"
        assert key not in current, f"{path.name}:{number}: {key} twice"
        current[key] = value
    return sections


def test_the_three_units_are_shipped() -> None:
    assert {u.name for u in UNITS} == {
        "duetime-scheduler.service",
        "duetime-worker.service",
        "duetime-api.service",
    }


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_a_unit_parses_and_runs_a_real_duetime_command(unit: Path) -> None:
    sections = parse_unit(unit)
    for section, keys in REQUIRED.items():
        assert keys <= set(sections.get(section, {})), (unit.name, section)
    assert sections["Service"]["EnvironmentFile"] == "/etc/duetime/duetime.env"
    binary, *args = shlex.split(sections["Service"]["ExecStart"])
    assert binary == "/opt/duetime/bin/duetime"
    # every option given exists: click parses them before the eager --help
    result = CliRunner().invoke(cli, [*args, "--help"])
    assert result.exit_code == 0, (unit.name, result.output)


def test_the_environment_file_names_the_database() -> None:
    lines = (DEPLOY / "duetime.env").read_text().splitlines()
    settings = dict(
        line.split("=", 1) for line in lines if line.strip() and not line.startswith("#")
    )
    assert settings["DUETIME_DATABASE_URL"].startswith("postgresql://")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path) -> None:
    """The units as shipped, with their paths pointed at this machine's (verify requires the
    binary, the working directory and the environment file to exist)."""
    duetime = Path(sys.executable).with_name("duetime")
    assert duetime.exists(), duetime
    env = tmp_path / "duetime.env"
    env.write_text((DEPLOY / "duetime.env").read_text())
    for unit in UNITS:
        text = (
            unit.read_text()
            .replace("/opt/duetime/bin/duetime", str(duetime))
            .replace("/etc/duetime/duetime.env", str(env))
            .replace("/srv/myproject", str(tmp_path))
        )
        (tmp_path / unit.name).write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(tmp_path / u.name) for u in UNITS)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr  # warnings too ("Unknown key …, ignoring")
