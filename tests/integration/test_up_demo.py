"""`duetime up --demo` as a newcomer runs it: within 20 s at least five successes, a retry and a
dead letter are printed; running it again on the same database is safe, and its one-shots that
ran do not run again (no second dead letter)."""

from __future__ import annotations

import itertools
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def everything_shown(text: str) -> bool:
    return text.count("✓") >= 5 and "↻" in text and "✗" in text


def watch_demo(
    db: Path, seconds: float, enough: Callable[[str], bool] = everything_shown
) -> tuple[str, int]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("DUETIME_DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "duetime", "up", "--demo", "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    output = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if selector.select(timeout=max(0.0, deadline - time.monotonic())):
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                output += chunk
                if enough(output.decode()):
                    break
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=40)
    return (output + rest).decode(), proc.returncode


def unexpected_tracebacks(output: str) -> list[str]:
    """Tracebacks in ``output`` other than the worker's reports of the demo's own failures
    (``duetime.fail`` raising ``DemoFailure``, logged at WARNING with their traceback)."""
    blocks = output.split("Traceback (most recent call last):")
    return [
        block
        for before, block in itertools.pairwise(blocks)
        if "raised unexpected: duetime.targets.python.DemoFailure"
        not in (before.splitlines() or [""])[-1]
    ]


def test_demo_shows_successes_a_retry_and_a_dead_letter_within_20_seconds(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    first, code = watch_demo(db, 20)
    assert code == 0, first
    head = first.split("demo jobs:")[1]
    assert head.count("✓") >= 5, first
    assert "↻" in head, first
    assert "✗" in head, first
    assert "dead-letter queue" in head, first

    again, code = watch_demo(db, 20, lambda text: text.count("✓") >= 5)
    assert code == 0, again
    assert unexpected_tracebacks(again) == [], again
    assert again.count("✓") >= 5, again
    assert "✗" not in again, again  # the one-shots keep their first instant: no new dead letter
    assert "▶ demo.doomed" not in again, again
    assert "▶ demo.one-shot" not in again, again
