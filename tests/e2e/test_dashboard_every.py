"""The dashboard shows an ``every`` as declared (issue 16, item 7): calendar units with their
zone (``every 1 day (Europe/Paris)``), a fixed duration as before — in headless Chromium
against a real ``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def declare(db: str) -> None:
    async with AsyncApp(db, tenant="acme") as app:
        await app.schedule("digest", task="duetime.noop", every="1 day", tz="Europe/Paris")
        await app.schedule("poll", task="duetime.noop", every="90 seconds", tz="Europe/Paris")


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    with served(tmp_path_factory, declare) as (server, keys, _):
        yield server, keys


def test_the_job_page_shows_the_every_as_declared(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        tab.open("#/jobs")
        row = page.locator("tbody tr", has_text="digest").first
        row.wait_for()
        assert "every 1 day (Europe/Paris)" in row.locator("td").all_inner_texts()
        page.click("a:has-text('digest')")
        page.wait_for_selector("h1:has-text('Job digest')")
        assert "every 1 day (Europe/Paris)" in page.inner_text("main")
        tab.open("#/jobs")
        fixed = page.locator("tbody tr", has_text="poll").first
        fixed.wait_for()
        cells = fixed.locator("td").all_inner_texts()
        assert "every 90.0 s" in cells  # a fixed duration, without a zone
        assert tab.errors == []
    finally:
        tab.close()
