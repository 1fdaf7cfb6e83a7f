"""The dashboard's job page shows a job's retry window and error classification (issue 16
item 6), in headless Chromium against a real ``duetime server``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.apikit import Keys, ServerProcess, make_keys, ok, start
from tests.e2e.browserkit import Tab

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    db = str(tmp_path_factory.mktemp("dashboard") / "dashboard.db")
    keys = make_keys(db)
    server = start(db, command="server", cwd=tmp_path_factory.mktemp("server"))
    try:
        yield server, keys
    finally:
        server.stop()


def test_the_job_page_shows_the_retry_window_and_classification(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    retry = {
        "max_attempts": 10,
        "within": 3600,
        "permanent_on": ["ValueError"],
        "retry_on": ["myapp.errors.Flaky"],
        "permanent_on_status": [404],
    }
    plain = {"task": "etl.sync", "every": 60, "allow_unregistered": True}
    with server.client(keys.acme_admin) as api:
        job = ok(api.post("/jobs", json={"name": "sync", "retry": retry, **plain}), 201)
        other = ok(api.post("/jobs", json={"name": "plain", **plain}), 201)
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        page.wait_for_selector("h1:has-text('Overview')")
        tab.open(f"#/jobs/{job['id']}")
        page.wait_for_selector("dd:has-text('3600s after the run')")
        page.wait_for_selector("dd:has-text('ValueError, HTTP 404')")
        page.wait_for_selector("dd:has-text('myapp.errors.Flaky')")
        tab.open(f"#/jobs/{other['id']}")
        page.wait_for_selector("h1:has-text('Job plain')")
        assert "retry window" not in page.inner_text("main"), "nothing shown when none is set"
        assert tab.errors == []
    finally:
        tab.close()
