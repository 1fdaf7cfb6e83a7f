"""The dashboard's overview lists the circuit breakers workers report open (issue 19) to an
admin, and shows no such table to a viewer, in headless Chromium against a real
``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from duetime._types import BreakerState, WorkerInfo
from duetime.app import AsyncApp
from tests.api.apikit import Keys, ServerProcess
from tests.e2e.browserkit import Tab, served

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def reported(db: str) -> None:
    async with AsyncApp(db) as app:
        now = await app.store.db_now()
        await app.store.worker_register(
            WorkerInfo("w-1", "h", 1, ("t",), ("*",), started_at=now, heartbeat_at=now)
        )
        await app.store.breakers_report(
            "w-1",
            [BreakerState("w-1", "http:crm.example:443", "open", 6, now, now + timedelta(30))],
        )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    with served(tmp_path_factory, reported) as (server, keys, _):
        yield server, keys


def test_an_admin_sees_the_open_breakers_and_a_viewer_does_not(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_admin, "acme · admin")
        tab.open("#/")
        page.wait_for_selector("h2:has-text('Circuit breakers')")
        row = page.locator("tr:has-text('http:crm.example:443')")
        assert row.count() == 1
        cells = row.locator("td").all_inner_texts()
        assert cells[1:3] == ["open", "6"]
        assert cells[5] == "w-1"
        tab.login(keys.acme_viewer, "acme · viewer")
        tab.open("#/")
        assert page.locator("h2:has-text('Circuit breakers')").count() == 0
    finally:
        tab.close()
