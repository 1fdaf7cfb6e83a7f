"""The dashboard's "next fire" (issue 17, item 7), in headless Chromium against a real
``duetime server``: the jobs list and the job page show the earliest occurrence not fired yet,
not the scheduler's ``next_fire_at`` past the runs it wrote ahead."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.app import AsyncApp
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def written_ahead(db: str) -> tuple[datetime, datetime]:
    """A job every minute, its next five occurrences written ahead by a scheduler: the earliest
    not fired yet and ``next_fire_at``."""
    async with AsyncApp(db, tenant="acme") as app:
        job = await app.schedule("ticker", task="duetime.noop", every=60)
        assert job.next_fire_at is not None
        await materialize(app.store, plan_job, horizon=299.0, now=job.next_fire_at)
    return job.next_fire_at, job.next_fire_at + timedelta(minutes=5)


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, Keys, datetime, datetime]]:
    """A server on a database with the job written ahead (set up before Playwright's loop)."""
    with served(tmp_path_factory, written_ahead) as (server, keys, (first, cursor)):
        yield server, keys, first, cursor


def test_the_jobs_list_and_job_page_show_the_earliest_occurrence(
    site: tuple[ServerProcess, Keys, datetime, datetime], browser: Any
) -> None:
    server, keys, first, cursor = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        tab.open("#/jobs?q=ticker")
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
        assert tab.errors == []
    finally:
        tab.close()
