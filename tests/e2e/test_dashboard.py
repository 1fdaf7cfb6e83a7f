"""The dashboard end to end, in headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) against a real ``duetime server`` process with API keys: every page loads without
console errors, a job is found, paused, triggered and resumed, a dead letter is inspected and
replayed — and each change shows in the REST API; a viewer sees no button that changes things.
Screenshots of each page go to ``artifacts/screenshots/`` (not committed)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import (
    EXPLODING,
    Keys,
    ServerProcess,
    fail_in_process,
    make_dead_run,
    make_keys,
    ok,
    start,
)
from tests.conftest import in_ci

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

pytestmark = [pytest.mark.browser, pytest.mark.slow]

if not os.path.exists(CHROMIUM):
    if in_ci():
        pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys]]:
    db = str(tmp_path_factory.mktemp("dashboard") / "dashboard.db")
    keys = make_keys(db)
    server = start(db, command="server", cwd=tmp_path_factory.mktemp("server"))
    try:
        with server.client(keys.acme_admin) as api:
            for i in range(60):
                body = {"name": f"batch-{i:03d}", "task": "etl.batch", "every": 3600}
                ok(api.post("/jobs", json={**body, "allow_unregistered": True}), 201)
            nightly = {
                "name": "nightly-report",
                "task": "reports.nightly",
                "cron": "30 2 * * *",
                "tz": "Europe/Paris",
                "allow_unregistered": True,
                "sla": 3600,
            }
            ok(api.post("/jobs", json=nightly), 201)
            doomed = {
                "name": "doomed-export",
                "task": "exports.doomed",
                "cron": "0 4 * * *",
                "payload": {"bucket": "s3://exports", "day": "2026-11-21"},
                "allow_unregistered": True,
            }
            job = ok(api.post("/jobs", json=doomed), 201)
            make_dead_run(api, job)
        asyncio.run(_fail_one(db))
        yield server, keys
    finally:
        server.stop()


async def _fail_one(db: str) -> None:
    """A run whose task raised (retried later: no second dead letter), for the run page."""
    async with AsyncApp(db, tenant="acme") as app:
        await fail_in_process(app, "exploding-export", retried=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Tab:
    """One page with its console errors collected."""

    def __init__(self, browser: Any, url: str) -> None:
        self.context = browser.new_context(viewport={"width": 1300, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.url = url

    def login(self, key: str, expect: str) -> None:
        self.page.goto(self.url + "/")
        self.page.wait_for_selector("#view[data-loaded]")
        self.page.fill("#key-input", key)
        self.page.press("#key-input", "Enter")
        self.page.wait_for_selector(f"#whoami:has-text('{expect}')")

    def open(self, hash_: str) -> None:
        self.page.goto(f"{self.url}/{hash_}")
        self.loaded(hash_)

    def loaded(self, hash_: str) -> None:
        self.page.wait_for_selector(f"#view[data-loaded='{hash_}']")

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


def test_operator_finds_pauses_triggers_and_replays(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    api = server.client(keys.acme_admin)
    try:
        page.goto(server.url + "/")
        page.wait_for_selector("#view[data-loaded]")
        page.wait_for_selector("text=Enter an API key")
        tab.shot("00-enter-key")
        tab.login(keys.acme_operator, "acme · operator")

        # overview: cards, charts, nodes
        page.wait_for_selector("h1:has-text('Overview')")
        page.wait_for_selector(".chart svg")
        assert page.locator(".chart").count() == 4
        tab.shot("01-overview")

        # jobs: keyboard to the page, search, paginate
        page.keyboard.press("g")
        page.keyboard.press("j")
        tab.loaded("#/jobs")
        assert page.locator("tbody tr").count() == 50
        page.click("#jobs-next")
        page.wait_for_selector("text=batch-059")
        page.click("#jobs-prev")
        page.wait_for_selector("text=batch-000")
        page.keyboard.press("/")
        sync_api.expect(page.locator("#job-search")).to_be_focused()
        page.keyboard.type("nightly")
        page.wait_for_selector("a:has-text('nightly-report')")
        assert page.locator("tbody tr").count() == 1
        tab.shot("02-jobs-search")

        # job detail: pause, trigger, resume — each shows in the API
        page.click("a:has-text('nightly-report')")
        page.wait_for_selector("h1:has-text('Job nightly-report')")
        page.wait_for_selector("#explain-summary")
        assert page.locator("text=Next fire instants").count() == 1
        assert "+01:00" in page.inner_text("main") or "+02:00" in page.inner_text("main")
        tab.shot("03-job-detail")
        job_id = page.url.rsplit("/", 1)[-1]
        page.click("#job-pause")
        page.wait_for_selector("#job-resume")
        assert ok(api.get(f"/jobs/{job_id}"))["status"] == "paused"
        page.click("#job-trigger")
        page.wait_for_selector("text=Trigger: done")
        runs = ok(api.get(f"/jobs/{job_id}/runs"))["items"]
        assert [r["trigger"] for r in runs] == ["manual"]
        page.wait_for_selector("td >> text=scheduled")
        tab.shot("04-job-paused-triggered")
        page.click("#job-resume")
        page.wait_for_selector("#job-pause")
        assert ok(api.get(f"/jobs/{job_id}"))["status"] == "active"

        # runs: filter by state, open one
        tab.open("#/runs")
        page.select_option("#run-state", "scheduled")
        tab.loaded("#/runs?state=scheduled")
        page.click(f"a:has-text('{runs[0]['id'][:8]}')")
        page.wait_for_selector("h1:has-text('Run')")
        page.wait_for_selector("text=Attempts")
        tab.shot("05-run-detail")
        tab.open("#/runs")
        tab.shot("06-runs")

        # dead letters: inspect, replay — the run leaves the dead-letter queue
        page.keyboard.press("g")
        page.keyboard.press("d")
        tab.loaded("#/dead-letters")
        dead = ok(api.get("/dead-letters"))["items"]
        assert len(dead) == 1
        page.click(".inspect-btn")
        page.wait_for_selector("text=s3://exports")
        page.wait_for_selector("text=BoomError")
        tab.shot("07-dead-letters")
        page.click(f"button.replay-one[data-run='{dead[0]['id']}']")
        page.wait_for_selector("text=Replay: done")
        page.wait_for_selector("text=the dead-letter queue is empty")
        assert ok(api.get(f"/runs/{dead[0]['id']}"))["state"] == "scheduled"
        assert ok(api.get("/dead-letters"))["items"] == []

        assert tab.errors == []
    finally:
        api.close()
        tab.close()


def test_a_viewer_sees_no_buttons_that_change_things(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        page.wait_for_selector("h1:has-text('Overview')")
        tab.open("#/jobs?q=nightly")
        page.click("a:has-text('nightly-report')")
        page.wait_for_selector("#explain-summary")
        for button in ("#job-pause", "#job-resume", "#job-trigger", "#job-cancel"):
            assert page.locator(button).count() == 0, button
        tab.shot("08-viewer-job")
        tab.open("#/dead-letters")
        assert page.locator("#dlq-replay-all").count() == 0
        assert page.locator("button.replay-one").count() == 0
        assert tab.errors == []
    finally:
        tab.close()
    other = Tab(browser, server.url)
    try:  # another tenant sees none of acme's jobs
        other.login(keys.globex_operator, "globex · operator")
        other.open("#/jobs?q=nightly")
        other.page.wait_for_selector("text=no job matches")
        assert other.errors == []
    finally:
        other.close()


def test_a_webhook_job_shows_header_names_never_their_values(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    secret = "Bearer dashboard-s3cret"
    target = {
        "type": "http",
        "url": "https://hooks.example.com/settle",
        "headers": {"Authorization": secret, "X-Team": "billing-ops"},
    }
    with server.client(keys.acme_admin) as api:
        body = {"name": "webhook-settle", "target": target, "cron": "0 5 * * *"}
        job = ok(api.post("/jobs", json=body), 201)
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        page.wait_for_selector("h1:has-text('Overview')")
        tab.open(f"#/jobs/{job['id']}")
        page.wait_for_selector("h1:has-text('Job webhook-settle')")
        page.wait_for_selector("dd:has-text('Authorization: <redacted>, X-Team: <redacted>')")
        assert "https://hooks.example.com/settle" in page.inner_text("main")
        html = page.content()
        assert secret not in html
        assert "billing-ops" not in html
        tab.shot("09-webhook-job")
        assert tab.errors == []
    finally:
        tab.close()


def test_the_run_page_shows_a_failed_attempts_traceback(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    """Issue 17: each failed attempt's traceback in a <pre>, as text (markup escaped)."""
    server, keys = site
    with server.client(keys.acme_operator) as api:
        (job,) = [
            j
            for j in ok(api.get("/jobs", params={"name_prefix": "exploding"}))["items"]
            if j["name"] == "exploding-export"
        ]
        (run,) = ok(api.get(f"/jobs/{job['id']}/runs"))["items"]
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_operator, "acme · operator")
        tab.open(f"#/runs/{run['id']}")
        pre = page.locator("pre.traceback")
        sync_api.expect(pre).to_have_count(1)
        text = pre.inner_text()
        assert text.startswith("Traceback (most recent call last):")
        assert "in explode_task" in text
        assert text.rstrip().endswith(f"RuntimeError: {EXPLODING}")
        assert page.locator("pre.traceback b").count() == 0  # shown as text, never as markup
        assert page.locator("h3:has-text('Attempt 1 traceback')").count() == 1
        tab.shot("09-run-traceback")
        assert tab.errors == []
    finally:
        tab.close()
