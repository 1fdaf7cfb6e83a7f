"""The dashboard's workflow pages (issue 21, item 3) in headless Chromium against a real
``duetime server`` and a real worker (in this process, on the same SQLite file): the instance
list, the graph drawn by dag.js with its edge labels and a mapped step's items counter, step
states changing live as gated steps are released (no reload), explain for a step not started,
a step's result and attempts, a failed step's traceback and the retry button; no console
errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from duetime import Retry, RunContext
from duetime._config import Settings
from duetime.app import AsyncApp
from duetime.workflows.definition import WORKFLOW_TASK, Workflow
from tests.api.apikit import Keys, ServerProcess, make_keys, ok, start
from tests.e2e.browserkit import Tab
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GATED = ("extract", "load")


class WorkerThread:
    """tenant acme's worker on its own event loop: the workflows' tasks, the extract and load
    steps each waiting for their gate (a threading.Event this test sets)."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.gates = {name: threading.Event() for name in GATED}
        self.loop = asyncio.new_event_loop()
        self.app: AsyncApp | None = None
        self.stop: asyncio.Event | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.main(),))

    async def main(self) -> None:
        settings = Settings(database_url=self.db, worker_poll_interval=0.05)
        app = await AsyncApp(settings=settings, tenant="acme", migrate=True).open()
        gates = self.gates

        @app.task("wf.extract")
        def extract(ctx: RunContext) -> list[int]:
            assert gates["extract"].wait(60)
            return [1, 2, 3]

        @app.task("wf.transform")
        def transform(ctx: RunContext, item: int) -> int:
            return item * 10

        @app.task("wf.load")
        def load(ctx: RunContext) -> str:
            assert gates["load"].wait(60)
            return "loaded"

        @app.task("wf.quick")
        def quick(ctx: RunContext) -> str:
            return "ok"

        @app.task("wf.boom")
        def boom(ctx: RunContext) -> None:
            raise RuntimeError("kaboom: the warehouse is down")

        self.app, self.stop = app, asyncio.Event()
        self.ready.set()
        try:
            tasks = [WORKFLOW_TASK, "wf.extract", "wf.transform", "wf.load", "wf.quick", "wf.boom"]
            await app.worker(tasks=tasks).run(self.stop)
        finally:
            await app.close()

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def __enter__(self) -> WorkerThread:
        self.thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        for gate in self.gates.values():
            gate.set()
        assert self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


async def start_instance(app: AsyncApp, workflow: Workflow, job: str) -> str:
    await app.workflows.register(workflow)
    target = {"type": "workflow", "name": workflow.name}
    await app.schedule(job, target=target, cron="0 0 1 1 *", retry=Retry(1))
    await app.trigger(job)
    return job


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Keys, str]]:
    db = str(tmp_path_factory.mktemp("dashboard") / "dashboard.db")
    keys = make_keys(db)
    server = start(db, command="server", cwd=tmp_path_factory.mktemp("server"))
    try:
        yield server, keys, db
    finally:
        server.stop()


def instance_of(server: ServerProcess, keys: Keys, job: str, state: str) -> str:
    """The id of ``job``'s instance once it is in ``state`` (its start run is the worker's)."""
    with server.client(keys.acme_viewer) as api:
        job_id = ok(api.get("/jobs", params={"name_prefix": job}))["items"][0]["id"]

        def found() -> str | None:
            listed = ok(api.get("/workflow-instances", params={"job_id": job_id}))
            return str(listed[0]["id"]) if listed and listed[0]["state"] == state else None

        return eventually_sync(found, what=f"the instance of {job} to be {state}")


def etl() -> Workflow:
    wf = Workflow("etl")
    extract = wf.step("extract", task="wf.extract")
    parts = wf.step("transform", task="wf.transform", map_over=extract)
    load = wf.step("load", task="wf.load", after=parts)
    wf.step("page", task="wf.quick", after=[extract.failed, load.failed], rule="any")
    wf.step("cleanup", task="wf.quick", after=load.finished)
    return wf


def node(name: str, state: str) -> str:
    return f"#wf-graph g.dag-node[data-step='{name}'][data-state='{state}']"


def test_the_graph_follows_the_instance_live(
    site: tuple[ServerProcess, Keys, str], browser: Any
) -> None:
    server, keys, db = site
    tab = Tab(browser, server.url)
    page = tab.page
    with WorkerThread(db) as worker:
        assert worker.app is not None
        job = worker.call(start_instance(worker.app, etl(), "etl-now"))
        instance = instance_of(server, keys, job, "running")
        try:
            tab.login(keys.acme_operator, "acme · operator")
            tab.open("#/workflows")
            row = page.locator(f"main tr[data-instance='{instance}']")
            assert "etl v1" in row.inner_text()
            row.locator("a").click()
            tab.loaded(f"#/workflows/{instance}")

            # the graph: five nodes, extract running (gated), the others waiting
            page.wait_for_selector(node("extract", "running"))
            assert page.locator("#wf-graph g.dag-node").count() == 5
            assert page.locator(node("load", "pending")).count() == 1
            labels = page.locator("#wf-graph .dag-edge text").all_text_contents()
            assert sorted(labels) == ["on_failure", "on_failure", "on_finished"]
            # layers left to right: extract, transform, load, then page and cleanup
            x = {
                name: page.locator(f"#wf-graph g.dag-node[data-step='{name}']").bounding_box()
                for name in ("extract", "transform", "load", "page", "cleanup")
            }
            assert x["extract"]["x"] < x["transform"]["x"] < x["load"]["x"]  # type: ignore[index]
            assert x["page"]["x"] == x["cleanup"]["x"] > x["load"]["x"]  # type: ignore[index]
            assert page.locator("#wf-cancel").is_visible()  # an operator may cancel

            # a step not started says why
            page.click("#wf-graph g.dag-node[data-step='load']")
            page.wait_for_selector("#wf-why")
            assert "transform" in page.inner_text("#wf-why")
            assert "load" in page.inner_text("#wf-explain")

            # live: released steps change state without a reload
            loads = page.evaluate("performance.getEntriesByType('navigation').length")
            worker.gates["extract"].set()
            page.wait_for_selector(node("transform", "succeeded"))
            caption = page.text_content("#wf-graph g.dag-node[data-step='transform'] .dag-caption")
            assert caption == "3/3 done"
            page.wait_for_selector(node("load", "running"))
            worker.gates["load"].set()
            page.wait_for_selector("#wf-graph[data-state='succeeded']")
            page.wait_for_selector(node("cleanup", "succeeded"))
            assert page.locator(node("page", "skipped")).count() == 1
            assert page.evaluate("performance.getEntriesByType('navigation').length") == loads
            assert int(page.get_attribute("#wf-graph", "data-polls") or "0") >= 1
            assert not page.locator("#wf-cancel").is_visible()

            # a step's result and attempts; a mapped step's items
            page.click("#wf-graph g.dag-node[data-step='extract']")
            page.wait_for_selector("#wf-step[data-step='extract'] #wf-result")
            assert page.inner_text("#wf-result").split() == ["[", "1,", "2,", "3", "]"]
            assert "succeeded" in page.inner_text("#wf-step table")
            page.click("#wf-graph g.dag-node[data-step='transform']")
            page.wait_for_selector("#wf-step[data-step='transform'] table.wf-items")
            assert page.locator("#wf-step table.wf-items tbody tr").count() == 3
            page.locator("#wf-step table.wf-items tbody tr[data-index='2'] button").click()
            page.wait_for_selector("#wf-result:has-text('30')")
            tab.shot("workflow-instance")
            assert tab.errors == []
        finally:
            tab.close()


def test_a_failed_step_shows_its_traceback_and_may_be_retried(
    site: tuple[ServerProcess, Keys, str], browser: Any
) -> None:
    server, keys, db = site
    fragile = Workflow("fragile")
    fragile.step("boom", task="wf.boom")
    tab = Tab(browser, server.url)
    page = tab.page
    with WorkerThread(db) as worker:
        assert worker.app is not None
        job = worker.call(start_instance(worker.app, fragile, "fragile-now"))
        instance = instance_of(server, keys, job, "failed")
        try:
            tab.login(keys.acme_operator, "acme · operator")
            tab.open("#/workflows?workflow=fragile&state=failed")
            page.locator(f"main tr[data-instance='{instance}'] a").click()
            page.wait_for_selector(node("boom", "failed"))
            page.click("#wf-graph g.dag-node[data-step='boom']")
            page.wait_for_selector("#wf-step pre.traceback")
            assert "kaboom: the warehouse is down" in page.inner_text("#wf-step pre.traceback")
            page.click("#wf-retry")
            page.wait_for_selector("#status:has-text('Retry from failure: done')")
            # the step's run is replayed and fails again: its second traceback shows
            page.wait_for_selector("#wf-step pre.traceback[data-attempt='2']")
            page.wait_for_selector("#wf-head[data-state='failed']")
            assert tab.errors == []
        finally:
            tab.close()


LAYOUT = """async () => {
  const { layout, countCrossings } = await import("/dashboard/dag.js");
  // two chains drawn crossed in definition order (a→d, b→c) and an edge skipping a layer
  const nodes = ["a", "b", "c", "d", "x", "y"];
  const edges = [
    { from: "a", to: "d" }, { from: "b", to: "c" }, { from: "c", to: "x" },
    { from: "d", to: "y" }, { from: "a", to: "y", on: "on_failure" },
  ];
  const shape = layout(nodes, edges);
  const twisted = [{ from: "a", to: "d" }, { from: "b", to: "c" }];
  const crossed = countCrossings([["a", "b"], ["c", "d"]], twisted);
  const skip = shape.edges.find((e) => e.from === "a" && e.to === "y");
  return {
    layers: shape.layers, crossings: shape.crossings, crossed,
    skipPoints: skip.points.length, on: skip.on,
  };
}"""


def test_the_layout_layers_by_longest_path_and_uncrosses(
    site: tuple[ServerProcess, Keys, str], browser: Any
) -> None:
    server, _, _ = site
    tab = Tab(browser, server.url)
    try:
        tab.page.goto(server.url + "/")
        tab.page.wait_for_selector("#view[data-loaded]")
        shape = tab.page.evaluate(LAYOUT)
        assert shape["crossed"] == 1
        assert shape["crossings"] == 0
        assert [sorted(layer) for layer in shape["layers"]] == [["a", "b"], ["c", "d"], ["x", "y"]]
        assert shape["layers"][1] == ["d", "c"] or shape["layers"][0] == ["b", "a"]  # reordered
        assert shape["skipPoints"] == 3  # a → (a virtual point in layer 1) → y
        assert shape["on"] == "on_failure"
        assert tab.errors == []
    finally:
        tab.close()
