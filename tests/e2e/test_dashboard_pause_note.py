"""The dashboard's job page shows a paused job's note (decision 0023) — who paused it, why,
until when it resumes by itself — and its pause on failure, in headless Chromium against a
real ``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]

UNTIL = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=2)


async def paused(db: str) -> None:
    async with AsyncApp(db, tenant="acme") as app:
        await app.schedule("nightly", task="duetime.noop", cron="0 3 * * *")
        await app.pause_on_failure("nightly", 3)
        await app.pause("nightly", note="warehouse migration", by="ana", until=UNTIL)
        await app.schedule("hourly", task="duetime.noop", cron="0 * * * *")


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    with served(tmp_path_factory, paused) as (server, keys, _):
        yield server, keys


def test_the_job_page_shows_who_paused_it_why_and_until_when(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        fields = tab.job_fields("nightly")
        assert fields["paused by"] == "ana"
        assert fields["pause note"] == "warehouse migration"
        assert fields["paused until"] == f"{shown(UNTIL)} (resumes by itself)"
        assert fields["pause on failure"] == "after 3 consecutive dead runs"
        assert tab.errors == []
    finally:
        tab.close()


def test_an_operator_pauses_with_a_note_from_the_job_page(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_operator, "acme · operator")
        tab.open("#/jobs?q=hourly")
        page.locator("a:has-text('hourly')").first.click()
        page.wait_for_selector("h1:has-text('Job hourly')")
        page.fill("#job-pause-note", "disk full on the reports host")
        page.click("#job-pause")
        page.wait_for_selector("#job-resume")
        page.wait_for_selector("dd:has-text('disk full on the reports host')")
        assert page.locator("dt:has-text('paused until')").count() == 1
        assert page.locator("dd:has-text('resumed by hand')").count() == 1
        assert tab.errors == []
    finally:
        tab.close()
