"""The dashboard's job page shows the job's history (pauses with their notes, resumes) and
its backfilled runs, and lets an operator backfill a past range — a dry run first — and set
its pause on failure, in headless Chromium against a real ``duetime server`` (no scheduler:
nothing else moves)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


async def with_history(db: str) -> None:
    async with AsyncApp(db, tenant="acme") as app:
        await app.schedule("hourly", task="duetime.noop", cron="0 * * * *")
        await app.pause("hourly", note="vendor outage", by="ana")
        await app.resume("hourly")


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    with served(tmp_path_factory, with_history) as (server, keys, _):
        yield server, keys


def local(at: datetime) -> str:
    """``at`` as a datetime-local input takes it (the dashboard reads it as UTC)."""
    return at.strftime("%Y-%m-%dT%H:%M")


def test_history_and_a_backfill_from_the_job_page(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_operator, "acme · operator")
        tab.job_fields("hourly")
        kinds = page.locator("tr[data-event]").evaluate_all(
            "rows => rows.map(r => r.dataset.event)"
        )
        assert kinds == ["resumed", "paused"]
        assert page.locator("tr[data-event='paused'] td:has-text('vendor outage')").count() == 1
        assert page.locator("#backfill-progress").inner_text() == "no backfilled run"

        page.fill("#backfill-from", local(HOUR - timedelta(hours=5)))
        page.fill("#backfill-to", local(HOUR - timedelta(hours=2)))
        page.click("#backfill-go")  # a dry run: the box is ticked
        page.wait_for_selector("#status:has-text('4 would be created')")
        assert page.locator("#backfill-progress").inner_text() == "no backfilled run"

        page.uncheck("#backfill-dry")
        page.click("#backfill-go")
        page.wait_for_selector("#backfill-progress:has-text('4 backfilled runs: 4 scheduled')")

        page.fill("#job-pause-after", "3")
        page.click("#job-pause-after-set")
        page.wait_for_selector("dd:has-text('after 3 consecutive dead runs')")
        assert tab.errors == []
    finally:
        tab.close()
