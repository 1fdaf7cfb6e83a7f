"""What the dashboard's browser tests share: Debian's Chromium driven by Playwright (a missing
browser fails the run in CI and skips it elsewhere), a tab that collects console errors, a
server on a database a test filled, and instants as the dashboard prints them."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.api.apikit import Keys, ServerProcess, make_keys, start
from tests.conftest import in_ci

T = TypeVar("T")

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


def playwright_sync_api() -> Any:
    """Playwright's sync API, once Chromium is known to be there (else fail in CI, skip here)."""
    if not os.path.exists(CHROMIUM):
        if in_ci():
            pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)", pytrace=False)
        pytest.skip(f"{CHROMIUM} is not installed")
    return pytest.importorskip("playwright.sync_api")


def shown(at: datetime) -> str:
    """An instant as the dashboard shows it (fmtInstant: to the second, ``Z``)."""
    return at.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@contextlib.contextmanager
def served(
    tmp_path_factory: pytest.TempPathFactory, fill: Callable[[str], Awaitable[T]]
) -> Iterator[tuple[ServerProcess, Keys, T]]:
    """A ``duetime server`` (no scheduler, no worker: nothing moves) on a fresh SQLite database
    that ``fill`` filled, with the test keys and what ``fill`` returned. Use it from a
    module-scoped fixture listed before ``browser``: it runs ``fill`` before Playwright's loop."""
    tmp_path = tmp_path_factory.mktemp("dashboard")
    db = str(tmp_path / "dashboard.db")
    keys = make_keys(db)
    filled = asyncio.run(fill(db))
    server = start(db, command="server", cwd=tmp_path)
    try:
        yield server, keys, filled
    finally:
        server.stop()


class Tab:
    """One page with its console errors collected."""

    def __init__(self, browser: Any, url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.url = url

    def login(self, key: str, expect: str) -> None:
        self.page.goto(self.url + "/")
        self.page.wait_for_selector("#view[data-loaded]")
        self.page.fill("#key-input", key)
        self.page.press("#key-input", "Enter")
        self.page.wait_for_selector(f"#whoami:has-text('{expect}')")

    def open(self, hash_: str) -> None:
        self.page.goto(f"{self.url}/{hash_}")
        self.loaded(hash_)

    def loaded(self, hash_: str) -> None:
        self.page.wait_for_selector(f"#view[data-loaded='{hash_}']")

    def job_fields(self, name: str) -> dict[str, str]:
        """Open the job ``name`` from the jobs list; its page's fields (label → text)."""
        self.open(f"#/jobs?q={name}")
        self.page.locator(f"a:has-text('{name}')").first.click()
        self.page.wait_for_selector(f"h1:has-text('Job {name}')")
        return dict(
            zip(
                self.page.locator("dl.fields dt").all_inner_texts(),
                self.page.locator("dl.fields dd").all_inner_texts(),
                strict=True,
            )
        )

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()
