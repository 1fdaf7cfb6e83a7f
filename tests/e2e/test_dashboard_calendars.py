"""The dashboard's job page shows the calendars a job names, the occurrences they skipped
(with the calendar named) and the calendar notes of its next fire instants (issue 24), in
headless Chromium against a real ``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from duetime.app import AsyncApp
from duetime.scheduler.materializer import materialize
from duetime.scheduler.planner import plan_job
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EVERY_DAY = [{"weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}]


async def excluded(db: str) -> None:
    """A minutely job whose calendar excludes every day, and its next two minutes planned."""
    async with AsyncApp(db, tenant="acme") as app:
        await app.calendars.set("closed", EVERY_DAY, description="always closed")
        await app.schedule(
            "minutely",
            task="duetime.noop",
            cron="* * * * *",
            calendars=["closed"],
            allow_unregistered=True,
        )
        await materialize(app.store, plan_job, horizon=150)


# module-scoped, listed before the browser: set up before Playwright runs its event loop
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    with served(tmp_path_factory, excluded) as (server, keys, _):
        yield server, keys


def test_the_job_page_shows_calendars_and_their_skips(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        fields = tab.job_fields("minutely")
        assert fields["calendars"] == "closed (excluded occurrences skipped)"
        text = page.inner_text("main")
        assert "excluded by the job's calendar 'closed'" in text  # the skip record
        assert "skipped: calendar 'closed'" in text  # a next fire instant's note
        assert tab.errors == []
    finally:
        tab.close()
