"""The dashboard's job page shows a job's bounds (issue 16, item 5) — its start, end and the
runs left of its ``max_runs`` — and only next fire instants within them, in headless Chromium
against a real ``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]

START = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=2)
END = START + timedelta(hours=10)


async def bounded(db: str) -> None:
    async with AsyncApp(db, tenant="acme") as app:
        await app.schedule(
            "hourly",
            task="duetime.noop",
            every=3600,
            start_at=START,
            end_at=END,
            max_runs=3,
            allow_unregistered=True,
        )


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    with served(tmp_path_factory, bounded) as (server, keys, _):
        yield server, keys


def test_the_job_page_shows_the_bounds_and_the_runs_left(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        fields = tab.job_fields("hourly")
        assert fields["starts"] == shown(START)
        assert fields["ends"] == shown(END)
        assert fields["runs left"] == "3 of 3"
        text = page.inner_text("main")
        assert shown(START + timedelta(hours=2)) in text  # the third and last run
        assert shown(START + timedelta(hours=3)) not in text  # beyond max_runs
        assert tab.errors == []
    finally:
        tab.close()
