"""The real ``duetime`` executable for the CLI tests: run it in a subprocess, without a terminal
(:func:`duetime`) or with its stderr on a pseudo-terminal (:func:`duetime_on_tty`)."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

EXECUTABLE = shutil.which("duetime", path=str(Path(sys.executable).parent)) or shutil.which(
    "duetime"
)

needs_executable = pytest.mark.skipif(
    EXECUTABLE is None, reason="the duetime script is not installed"
)

_OWN_ENV = ("DUETIME_DATABASE_URL", "DUETIME_TENANT", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")
_TERMINAL_ENV = ("TTY_INTERACTIVE", "CI", "COLUMNS", "LINES")


def environment(env: dict[str, str] | None = None, *, terminal: bool = False) -> dict[str, str]:
    """This process's environment without what would change the CLI's output, plus ``env``."""
    dropped = _OWN_ENV + (_TERMINAL_ENV if terminal else ())
    environ = {k: v for k, v in os.environ.items() if k not in dropped}
    if terminal:
        environ["TERM"] = "xterm-256color"
    environ.update(env or {})
    return environ


def duetime(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``duetime *args`` with no terminal: stdin empty, stdout and stderr captured."""
    assert EXECUTABLE is not None
    return subprocess.run(
        [EXECUTABLE, *args],
        cwd=cwd,
        env=environment(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@dataclass
class TtyResult:
    returncode: int
    stdout: str
    terminal: str
    """Everything written to stderr, which was a pseudo-terminal (escape sequences included)."""


def duetime_on_tty(*args: str, cwd: Path | None = None) -> TtyResult:
    """Run ``duetime *args`` with stderr on a pseudo-terminal (stdout to a file, stdin empty);
    read the terminal until the process has closed it."""
    assert EXECUTABLE is not None
    leader, follower = pty.openpty()
    with tempfile.TemporaryFile() as out:
        try:
            process = subprocess.Popen(
                [EXECUTABLE, *args],
                cwd=cwd,
                env=environment({"COLUMNS": "120"}, terminal=True),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=follower,
            )
        finally:
            os.close(follower)
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: the process closed its end of the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            returncode = process.wait(timeout=120)
        finally:
            os.close(leader)
        out.seek(0)
        stdout = out.read().decode()
    return TtyResult(returncode, stdout, b"".join(chunks).decode(errors="replace"))
