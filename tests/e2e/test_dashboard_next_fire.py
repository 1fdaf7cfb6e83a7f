"""The dashboard's "next fire" (issue 17, item 7), in headless Chromium against a real
``duetime server``: the jobs list and the job page show the earliest occurrence not fired yet,
not the scheduler's ``next_fire_at`` past the runs it wrote ahead."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime.app import AsyncApp
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from tests.api.apikit import Keys, ServerProcess, make_keys, start
from tests.conftest import in_ci

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

pytestmark = [pytest.mark.browser, pytest.mark.slow]

if not os.path.exists(CHROMIUM):
    if in_ci():
        pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


def shown(at: datetime) -> str:
    """An instant as the dashboard shows it (fmtInstant: to the second, ``Z``)."""
    return at.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


async def written_ahead(db: str) -> tuple[datetime, datetime]:
    """A job every minute, its next five occurrences written ahead by a scheduler: the earliest
    not fired yet and ``next_fire_at``."""
    async with AsyncApp(db, tenant="acme") as app:
        job = await app.schedule("ticker", task="duetime.noop", every=60)
        assert job.next_fire_at is not None
        await materialize(app.store, plan_job, horizon=299.0, now=job.next_fire_at)
    return job.next_fire_at, job.next_fire_at + timedelta(minutes=5)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[ServerProcess, Keys, datetime, datetime]]:
    """A server on a database with the job written ahead (set up before Playwright's loop)."""
    db = str(tmp_path / "dashboard.db")
    keys = make_keys(db)
    first, cursor = asyncio.run(written_ahead(db))
    server = start(db, command="server", cwd=tmp_path)  # no scheduler: nothing moves
    try:
        yield server, keys, first, cursor
    finally:
        server.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def test_the_jobs_list_and_job_page_show_the_earliest_occurrence(
    site: tuple[ServerProcess, Keys, datetime, datetime], browser: Any
) -> None:
    server, keys, first, cursor = site
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url + "/")
        page.wait_for_selector("#view[data-loaded]")
        page.fill("#key-input", keys.acme_viewer)
        page.press("#key-input", "Enter")
        page.wait_for_selector("#whoami:has-text('acme')")
        page.goto(server.url + "/#/jobs?q=ticker")
        page.wait_for_selector("#view[data-loaded='#/jobs?q=ticker']")
        # the job's own row (the overview's tables may still be on the page a moment)
        row = page.locator("tbody tr", has_text="ticker").first
        row.wait_for()
        cells = row.locator("td").all_inner_texts()
        assert shown(first) in cells
        assert shown(cursor) not in cells
        page.click("a:has-text('ticker')")
        page.wait_for_selector("h1:has-text('Job ticker')")
        fields = page.inner_text("main")
        assert f"next fire\t{shown(first)}" in fields or f"next fire\n{shown(first)}" in fields
        assert errors == []
    finally:
        context.close()
