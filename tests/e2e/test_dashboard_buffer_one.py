"""The dashboard's job page shows the overlap options of issue 16 (decision 0016), in headless
Chromium against a real ``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def jobs(db: str) -> dict[str, str]:
    async with AsyncApp(db, tenant="acme") as app:
        queued = await app.schedule(
            "rollup", task="duetime.noop", every=60, overlap="serialize", max_waiting=3
        )
        swapped = await app.schedule(
            "feed", task="duetime.noop", every=60, overlap="replace", replace_timeout=10
        )
    return {"rollup": str(queued.id), "feed": str(swapped.id)}


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, Keys, dict[str, str]]]:
    with served(tmp_path_factory, jobs) as (server, keys, ids):
        yield server, keys, ids


def test_the_job_page_shows_max_waiting_and_replace_timeout(
    site: tuple[ServerProcess, Keys, dict[str, str]], browser: Any
) -> None:
    server, keys, ids = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        for name, text in (
            ("rollup", "overlap serialize (at most 3 waiting)"),
            ("feed", "overlap replace (stop within 10s)"),
        ):
            page.goto(server.url + f"/#/jobs/{ids[name]}")
            page.wait_for_selector(f"h1:has-text('Job {name}')")
            page.wait_for_selector(f"dd:has-text('{text}')")
        assert tab.errors == []
    finally:
        tab.close()
