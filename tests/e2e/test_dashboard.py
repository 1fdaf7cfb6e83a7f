"""The dashboard end to end, in headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) against a real ``duetime server`` process with API keys: every page loads without
console errors, a job is found, paused, triggered and resumed, a dead letter is inspected and
replayed — and each change shows in the REST API; a viewer sees no button that changes things.
Screenshots of each page go to ``artifacts/screenshots/`` (not committed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from duetime.app import AsyncApp
from tests.api.apikit import (
    EXPLODING,
    Keys,
    ServerProcess,
    fail_in_process,
    make_dead_run,
    make_job,
    make_keys,
    ok,
    start,
)
from tests.e2e.browserkit import SHOTS, Tab
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.browser, pytest.mark.slow]

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
    """A run whose task raised (retried later: no second dead letter), for the run page; and
    one whose traceback holds a script element."""
    async with AsyncApp(db, tenant="acme") as app:
        await fail_in_process(app, "exploding-export", retried=True)
        await _fail_with_markup(app)


SCRIPT = "<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"


async def _fail_with_markup(app: AsyncApp) -> None:
    """A run of ``script-export`` whose task raised with :data:`SCRIPT` in its message, failed
    by an in-process worker (its attempt keeps the traceback) and retried an hour later (no
    second dead letter)."""
    from duetime import Retry
    from duetime._types import RunState
    from tests.waiting import eventually

    @app.task("tests.script")
    def script_task(ctx: Any) -> None:
        raise ValueError(SCRIPT)

    retry = Retry(max_attempts=2, backoff_base=3600, backoff_cap=3600)
    await app.schedule("script-export", task="tests.script", cron="0 0 1 1 *", retry=retry)
    run = await app.trigger("script-export")
    stop = asyncio.Event()
    serving = asyncio.create_task(app.worker(tasks=["tests.script"]).run(stop))

    async def failed() -> bool | None:
        now = await app.run(run.id)
        return (now.attempt == 1 and now.state is RunState.SCHEDULED) or None

    try:
        await eventually(failed, what="the script run to fail")
    finally:
        stop.set()
        await serving


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
        summary = page.locator("details.traceback summary:has-text('Attempt 1 traceback')")
        sync_api.expect(summary).to_have_count(1)
        sync_api.expect(pre).to_be_visible()  # the latest attempt's is unfolded
        summary.click()  # folds
        sync_api.expect(pre).to_be_hidden()
        summary.click()
        sync_api.expect(pre).to_be_visible()
        tab.shot("09-run-traceback")
        assert tab.errors == []
    finally:
        tab.close()


def test_a_traceback_is_shown_as_text_never_run_as_markup(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    """Issue 17: a traceback holding <script> and an <img onerror> shows them as text."""
    server, keys = site
    with server.client(keys.acme_operator) as api:
        job = _job_named(api, "script-export")
        (run,) = ok(api.get(f"/jobs/{job['id']}/runs"))["items"]
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_operator, "acme · operator")
        tab.open(f"#/runs/{run['id']}")
        pre = page.locator("details.traceback pre.traceback")
        sync_api.expect(pre).to_have_count(1)
        assert SCRIPT in pre.inner_text()
        assert page.locator("pre.traceback script, pre.traceback img").count() == 0
        assert page.evaluate("window.pwned") is None
        assert tab.errors == []
    finally:
        tab.close()


def _job_named(api: Any, name: str) -> dict[str, Any]:
    (job,) = [
        j for j in ok(api.get("/jobs", params={"name_prefix": name}))["items"] if j["name"] == name
    ]
    return job


def _runs_shown(page: Any) -> list[str]:
    return [page.get_attribute(f"tbody tr >> nth={i}", "data-run") for i in range(_rows(page))]


def _rows(page: Any) -> int:
    return int(page.locator("tbody tr").count())


def test_the_runs_page_filters_by_job_task_state_and_time(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    with server.client(keys.acme_operator) as api:
        made: dict[str, list[str]] = {}
        for name, task in (("filter-a", "filters.alpha"), ("filter-b", "filters.beta")):
            body = {"name": name, "task": task, "cron": "0 0 1 1 *", "allow_unregistered": True}
            job = ok(api.post("/jobs", json=body), 201)
            made[name] = [ok(api.post(f"/jobs/{job['id']}/trigger"), 201)["id"] for _ in range(2)]
        scheduled_for = ok(api.get(f"/runs/{made['filter-a'][0]}"))["scheduled_for"]
        exploding = _job_named(api, "exploding-export")
        (failed,) = ok(api.get(f"/jobs/{exploding['id']}/runs"))["items"]
        (attempt,) = ok(api.get(f"/runs/{failed['id']}"))["attempts"]
    minute = scheduled_for[:16]  # "YYYY-MM-DDTHH:MM", UTC
    tab = Tab(browser, server.url)
    page = tab.page
    try:
        tab.login(keys.acme_operator, "acme · operator")
        tab.open("#/runs")
        for header in ("task", "worker", "duration"):
            sync_api.expect(page.locator(f"th:text-is('{header}')")).to_have_count(1)

        page.fill("#run-task", "filters.alpha")
        page.press("#run-task", "Enter")
        tab.loaded("#/runs?task=filters.alpha")
        assert sorted(_runs_shown(page)) == sorted(made["filter-a"])
        assert set(page.locator("td.task").all_inner_texts()) == {"filters.alpha"}

        tab.open("#/runs")
        page.fill("#run-job", "filter-b")
        page.select_option("#run-state", "scheduled")  # submits the form
        tab.loaded("#/runs?job=filter-b&state=scheduled")
        assert sorted(_runs_shown(page)) == sorted(made["filter-b"])

        page.fill("#run-since", minute)
        page.fill("#run-task", "filters.beta")
        page.click("#run-filters button[type=submit]")
        since = quote(f"{minute}:00Z", safe="")  # as URLSearchParams writes it
        tab.loaded(f"#/runs?job=filter-b&task=filters.beta&state=scheduled&since={since}")
        assert sorted(_runs_shown(page)) == sorted(made["filter-b"])
        page.fill("#run-since", "")
        page.fill("#run-until", minute)  # before the minute they were scheduled in: none
        page.click("#run-filters button[type=submit]")
        page.wait_for_selector("text=no run")
        assert _rows(page) == 0

        page.click("#run-clear")
        tab.loaded("#/runs")
        page.fill("#run-job", "no-such-job")
        page.press("#run-job", "Enter")
        page.wait_for_selector("text=no job named no-such-job")

        # a run that ran: its worker (of its latest attempt) and how long it took
        tab.open("#/runs?job=exploding-export")
        row = page.locator(f"tr[data-run='{failed['id']}']")
        sync_api.expect(row.locator("td.worker")).to_have_text(attempt["worker_id"])
        assert row.locator("td.duration").inner_text() not in ("", "—")
        tab.shot("10-runs-filtered")
        assert tab.errors == []
    finally:
        tab.close()


def test_pages_update_live_without_a_reload(site: tuple[ServerProcess, Keys], browser: Any) -> None:
    """A run made after the page opened appears on it with no navigation or reload."""
    server, keys = site
    with server.client(keys.acme_operator) as api:
        body = {"name": "live-job", "task": "live.task", "cron": "0 0 1 1 *"}
        job = ok(api.post("/jobs", json={**body, "allow_unregistered": True}), 201)
        tab = Tab(browser, server.url)
        page = tab.page
        try:
            tab.login(keys.acme_operator, "acme · operator")
            tab.open("#/runs?task=live.task")
            page.wait_for_selector("text=no run")
            page.evaluate("window.sameDocument = true")
            run = ok(api.post(f"/jobs/{job['id']}/trigger"), 201)
            page.wait_for_selector(f"tr[data-run='{run['id']}']")
            assert page.evaluate("window.sameDocument") is True  # no reload happened
            assert page.url.endswith("#/runs?task=live.task")
            assert int(page.get_attribute("#view", "data-refreshed") or "0") >= 1
            assert tab.errors == []
        finally:
            tab.close()


def test_the_last_timeline_bucket_is_never_drawn_as_a_drop(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    """The bucket holding "now" is partial: left out in its first half, then projected to a
    whole bucket (and drawn dashed) — never its raw, smaller count."""
    server, keys = site
    tab = Tab(browser, server.url)
    try:
        tab.login(keys.acme_viewer, "acme · viewer")
        got = tab.page.evaluate(
            """async () => {
              const c = await import("/dashboard/chart.js");
              const buckets = [0, 60000, 120000].map((t) => ({ t, succeeded: 6 }));
              const pick = (b) => b.succeeded;
              const early = c.splitPartial(buckets, 60, 120000 + 3000);
              const late = c.splitPartial([...buckets.slice(0, 2), { t: 120000, succeeded: 3 }],
                                          60, 120000 + 45000);
              const ended = c.splitPartial(buckets, 60, 180000);
              return {
                early: c.timelineSeries(early, pick),
                late: c.timelineSeries(late, pick),
                ended: c.timelineSeries(ended, pick),
              };
            }"""
        )
        assert got["early"] == {
            "points": [{"t": 0, "v": 6}, {"t": 60000, "v": 6}],
            "partial": None,
        }
        assert got["late"]["points"] == [{"t": 0, "v": 6}, {"t": 60000, "v": 6}]
        assert got["late"]["partial"] == {"t": 120000, "v": 4}  # 3 in 45 s: 4 a minute
        assert len(got["ended"]["points"]) == 3
        assert got["ended"]["partial"] is None
        assert tab.errors == []
    finally:
        tab.close()


def test_no_page_scrolls_sideways_on_a_phone(
    site: tuple[ServerProcess, Keys], browser: Any
) -> None:
    server, keys = site
    with server.client(keys.acme_operator) as api:
        job = _job_named(api, "exploding-export")
        (run,) = ok(api.get(f"/jobs/{job['id']}/runs"))["items"]
    context = browser.new_context(viewport={"width": 375, "height": 740})
    page = context.new_page()
    try:
        page.goto(server.url + "/")
        page.wait_for_selector("#view[data-loaded]")
        page.fill("#key-input", keys.acme_operator)
        page.press("#key-input", "Enter")
        page.wait_for_selector("#whoami:has-text('acme · operator')")
        for hash_ in (
            "#/",
            "#/jobs",
            "#/runs",
            f"#/runs/{run['id']}",
            f"#/jobs/{job['id']}",
            "#/dead-letters",
        ):
            page.goto(f"{server.url}/{hash_}")
            page.wait_for_selector(f"#view[data-loaded='{hash_}']")
            wide = page.evaluate(
                "[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]"
            )
            assert wide[0] <= wide[1], (hash_, wide)
        page.goto(f"{server.url}/#/runs")
        page.wait_for_selector("#view[data-loaded='#/runs']")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "11-phone-runs.png"), full_page=True)
    finally:
        context.close()


@pytest.fixture(scope="module")
def open_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``duetime up``: open on loopback (no keys), with a scheduler that leads."""
    workdir = tmp_path_factory.mktemp("up")
    server = start(str(workdir / "up.db"), command="up", cwd=workdir)
    try:
        yield server
    finally:
        server.stop()


def test_the_key_box_shows_only_where_keys_are_asked_for(
    site: tuple[ServerProcess, Keys], open_site: ServerProcess, browser: Any
) -> None:
    server, _ = site
    with_keys = Tab(browser, server.url)
    try:
        with_keys.page.goto(server.url + "/")
        with_keys.page.wait_for_selector("#view[data-loaded='login']")
        sync_api.expect(with_keys.page.locator("#key-input")).to_be_visible()
        sync_api.expect(with_keys.page.locator("#key-use")).to_be_visible()
    finally:
        with_keys.close()
    tab = Tab(browser, open_site.url)
    page = tab.page
    try:
        tab.open("#/")
        page.wait_for_selector("h1:has-text('Overview')")
        sync_api.expect(page.locator("#key-input")).to_be_hidden()
        sync_api.expect(page.locator("label[for=key-input]")).to_be_hidden()
        sync_api.expect(page.locator("#key-forget")).to_be_hidden()
        tab.shot("12-open-mode")
        assert tab.errors == []
    finally:
        tab.close()


def test_the_leader_keeps_the_depth_history_with_no_page_open(open_site: ServerProcess) -> None:
    """No browser at all: `duetime up`'s leader records queue depth on its own."""
    with open_site.client(None) as api:
        job = make_job(api, name="depth-job", task="depth.task", cron="0 0 1 1 *")
        ok(api.post(f"/jobs/{job['id']}/trigger"), 201)  # nobody serves depth.task: stays due

        def due_sampled() -> bool | None:
            depth = ok(api.get("/stats/overview"))["depth"]
            return any(d["due"] >= 1 for d in depth) or None

        eventually_sync(due_sampled, what="a depth sample with the due run")


def test_only_a_superadmin_picks_a_tenant(site: tuple[ServerProcess, Keys], browser: Any) -> None:
    server, keys = site
    admin = Tab(browser, server.url)
    try:  # a tenant's admin works on its own tenant: no tenant box
        admin.login(keys.acme_admin, "acme · admin")
        sync_api.expect(admin.page.locator("#tenant-input")).to_be_hidden()
        admin.open("#/jobs?q=nightly")
        admin.page.wait_for_selector("a:has-text('nightly-report')")
        assert admin.errors == []
    finally:
        admin.close()
    root = Tab(browser, server.url)
    try:  # the installation's admin picks the tenant it acts on
        root.login(keys.superadmin, "default · superadmin")
        root.open("#/jobs?q=nightly")
        root.page.wait_for_selector("text=no job matches")
        root.page.fill("#tenant-input", "acme")
        root.page.press("#tenant-input", "Enter")
        root.open("#/jobs?q=nightly")
        root.page.wait_for_selector("a:has-text('nightly-report')")
        assert root.errors == []
    finally:
        root.close()
