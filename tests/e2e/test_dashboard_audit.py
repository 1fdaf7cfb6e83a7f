"""The dashboard's audit page (issue 22, item 3): a tenant admin sees its tenant's trail —
who, what, on what, the change — filters it by action, and a viewer gets no audit link; in
headless Chromium against a real ``duetime server``."""

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


def test_an_admin_reads_and_filters_the_trail(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    plain = {"task": "etl.sync", "every": 60, "allow_unregistered": True}
    with server.client(keys.acme_operator) as api:
        ok(api.post("/jobs", json={"name": "sync", **plain}), 201)
        ok(api.patch("/jobs/sync", json={"priority": 7}))
        ok(api.post("/jobs/sync/pause"))
    with server.client(keys.globex_admin) as api:
        ok(api.post("/jobs", json={"name": "theirs", **plain}), 201)
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_admin, "acme · admin")
        page.wait_for_selector("nav a[data-page='audit']:visible")
        tab.open("#/audit")
        # the overview the login showed may finish rendering late: wait for the trail itself
        page.wait_for_selector("main:has-text('priority: 0 → 7')")
        main = page.inner_text("main")
        assert "priority: 0 → 7" in main
        assert 'status: "active" → "paused"' in main
        assert "job sync" in main
        assert "theirs" not in main
        assert "/operator" in main  # the operator key that made the changes
        page.select_option("#audit-action", "paused")
        tab.loaded("#/audit?action=paused")
        rows = page.locator("main tbody tr")
        assert rows.count() == 1
        assert "paused" in rows.first.inner_text()
        assert tab.errors == []
    finally:
        tab.close()


def test_a_viewer_has_no_audit_page(site: tuple[ServerProcess, Keys], browser: Any) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        assert not tab.page.locator("nav a[data-page='audit']").is_visible()
    finally:
        tab.close()
