"""End to end, on both stores, in real processes: `duetime scheduler` and `duetime worker`
started from the CLI, sharing one database; the test observes only through the database
(and a file the test tasks append to)."""

from __future__ import annotations

import signal
import textwrap
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from duetime import AsyncApp, Retry
from duetime._types import AttemptOutcome, RunState
from tests.integration.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.slow

TASKS_MODULE = textwrap.dedent(
    """
    import asyncio, os
    from duetime import App

    app = App()

    def _record(ctx):
        with open(os.environ["E2E_LOG"], "a") as f:
            f.write(f"{ctx.run_id} {ctx.attempt} {ctx.token} {ctx.scheduled_for.isoformat()}\\n")

    @app.task("e2e.record")
    def record(ctx, payload):
        _record(ctx)

    @app.task("e2e.slow_first")
    async def slow_first(ctx, payload):
        _record(ctx)
        if ctx.attempt == 1:
            await asyncio.sleep(payload["seconds"])
    """
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "e2e.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(db_url, migrate=True) as opened:
        yield opened


@pytest.fixture
def cluster(db_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    (tmp_path / "e2e_tasks.py").write_text(TASKS_MODULE)
    log = tmp_path / "executions.log"
    log.touch()
    c = Cluster(url=db_url, workdir=tmp_path, app_module="e2e_tasks:app", env={"E2E_LOG": str(log)})
    try:
        yield c  # type: ignore[misc]
    finally:
        c.stop_all()


def executions(cluster: Cluster) -> list[tuple[str, int, int]]:
    lines = (cluster.workdir / "executions.log").read_text().split()
    return [(lines[i], int(lines[i + 1]), int(lines[i + 2])) for i in range(0, len(lines), 4)]


@pytest.mark.parametrize(("schedulers", "workers"), [(1, 1), (2, 2)])
async def test_every_second_cron_runs_exactly_once_per_second(
    app: AsyncApp, cluster: Cluster, schedulers: int, workers: int
) -> None:
    # overlap "allow": this test is about one run per occurrence, not about overlap (on a loaded
    # machine a slow run would otherwise make the next occurrence skip, as designed)
    job = await app.schedule(
        "tick", task="e2e.record", cron="* * * * * *", overlap="allow", allow_unregistered=True
    )
    for _ in range(schedulers):
        cluster.start("scheduler")
    for _ in range(workers):
        cluster.start("worker")

    async def enough() -> list | None:  # type: ignore[type-arg]
        page = await app.runs(job.id, state=RunState.SUCCEEDED, limit=1000)
        return page.items if len(page.items) >= 12 else None

    await eventually(enough, timeout=40, what="12 succeeded runs", details=cluster.logs)
    await app.pause(job.id)
    cluster.stop_all()

    runs = (await app.runs(job.id, limit=1000)).items
    instants = [r.scheduled_for for r in runs]
    assert len(instants) == len(set(instants)), "a second got two runs"
    succeeded = sorted(r.scheduled_for for r in runs if r.state is RunState.SUCCEEDED)
    first, last = succeeded[0], succeeded[-1]
    window = [first + timedelta(seconds=i) for i in range(int((last - first).total_seconds()) + 1)]
    assert len(window) >= 10
    detail = [(r.scheduled_for.time().isoformat(), r.state.value, r.reason) for r in runs]
    assert succeeded == window, f"a second of the window has no succeeded run: {detail}"
    assert all(r.attempt == 1 for r in runs if r.state is RunState.SUCCEEDED)
    done = executions(cluster)
    assert len({run_id for run_id, _, _ in done}) == len(done), "no run executed twice"


async def _running(app: AsyncApp, run_id: object) -> object | None:
    run = await app.run(run_id)  # type: ignore[arg-type]
    return run if run.state is RunState.RUNNING and run.started_at is not None else None


async def test_sigkilled_worker_run_is_reexecuted_after_lease_expiry(
    app: AsyncApp, cluster: Cluster
) -> None:
    await app.schedule(
        "slow",
        task="e2e.slow_first",
        at=timedelta(days=1),
        payload={"seconds": 120},
        allow_unregistered=True,
    )
    cluster.start("scheduler")
    first_worker = cluster.start("worker")
    run = await app.trigger("slow")
    running = await eventually(lambda: _running(app, run.id), timeout=20, what="run started")

    async def first_attempt_in_body() -> bool | None:
        # RUNNING is written before the task body starts: kill only once the body has run
        return (cluster.workdir / "executions.log").read_text().endswith("\n") or None

    await eventually(first_attempt_in_body, timeout=20, what="first attempt's body started")
    cluster.kill(first_worker)
    cluster.start("worker")

    async def succeeded() -> object | None:
        current = await app.run(run.id)
        return current if current.state is RunState.SUCCEEDED else None

    done = await eventually(succeeded, timeout=30, what="run re-executed", details=cluster.logs)
    attempts = await app.attempts(run.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.LOST, AttemptOutcome.SUCCEEDED]
    assert attempts[0].worker_id == running.lease_owner  # type: ignore[attr-defined]
    assert attempts[1].worker_id != attempts[0].worker_id
    assert done.attempt == 2  # type: ignore[attr-defined]
    assert [attempt for _, attempt, _ in executions(cluster)] == [1, 2]


async def test_stale_worker_late_completion_changes_nothing(
    app: AsyncApp, cluster: Cluster
) -> None:
    await app.schedule(
        "slow",
        task="e2e.slow_first",
        at=timedelta(days=1),
        payload={"seconds": 2},
        allow_unregistered=True,
    )
    cluster.start("scheduler")
    stale_worker = cluster.start("worker")
    run = await app.trigger("slow")
    await eventually(lambda: _running(app, run.id), timeout=20, what="run started")
    stale_worker.send_signal(signal.SIGSTOP)  # frozen: no heartbeat, lease lapses
    cluster.start("worker")

    async def succeeded() -> object | None:
        current = await app.run(run.id)
        return current if current.state is RunState.SUCCEEDED else None

    done = await eventually(succeeded, timeout=30, what="run taken over", details=cluster.logs)
    stale_worker.send_signal(signal.SIGCONT)

    async def stale_recorded() -> list | None:  # type: ignore[type-arg]
        attempts = await app.attempts(run.id)
        return attempts if attempts and attempts[0].outcome is AttemptOutcome.STALE else None

    attempts = await eventually(
        stale_recorded, timeout=20, what="stale attempt recorded", details=cluster.logs
    )
    after = await app.run(run.id)
    assert after.state is RunState.SUCCEEDED
    assert after.finished_at == done.finished_at  # type: ignore[attr-defined]
    assert after.token == done.token  # type: ignore[attr-defined]
    assert [a.outcome for a in attempts] == [AttemptOutcome.STALE, AttemptOutcome.SUCCEEDED]


async def test_retries_follow_backoff_then_succeed(app: AsyncApp, cluster: Cluster) -> None:
    policy = Retry(max_attempts=3, backoff_base=1.0, backoff_factor=2.0, backoff_cap=60)
    job = await app.schedule(
        "flaky", task="duetime.fail", now=True, payload={"times": 2}, retry=policy
    )
    cluster.start("scheduler")
    cluster.start("worker")

    async def succeeded() -> object | None:
        runs = (await app.runs(job.id)).items
        return runs[0] if runs and runs[0].state is RunState.SUCCEEDED else None

    run = await eventually(succeeded, timeout=30, what="flaky run to succeed", details=cluster.logs)
    attempts = await app.attempts(run.id)  # type: ignore[attr-defined]
    assert [a.outcome for a in attempts] == [
        AttemptOutcome.FAILED,
        AttemptOutcome.FAILED,
        AttemptOutcome.SUCCEEDED,
    ]
    assert [a.number for a in attempts] == [1, 2, 3]
    assert attempts[0].error_class == "duetime.targets.python.DemoFailure"
    for previous, following, ceiling in (
        (attempts[0], attempts[1], 1.0),
        (attempts[1], attempts[2], 2.0),
    ):
        assert following.started_at is not None
        gap = (following.started_at - previous.finished_at).total_seconds()
        # full jitter: uniform(0, ceiling); the small slack covers write batching and polling
        assert -0.25 <= gap <= ceiling + 1.0, gap
    assert (await app.get(job.id)).status == "completed"


async def test_dead_letter_queue_fills_and_replays(app: AsyncApp, cluster: Cluster) -> None:
    job = await app.schedule(
        "doomed",
        task="duetime.fail",
        now=True,
        payload={"always": True},
        retry=Retry(max_attempts=2, backoff_base=0.1, backoff_cap=0.2),
    )
    cluster.start("scheduler")
    cluster.start("worker")

    async def dead_letters() -> list | None:  # type: ignore[type-arg]
        items = (await app.dead_letters()).items
        return items if items and items[0].attempt >= 2 else None

    (dead,) = await eventually(dead_letters, timeout=30, what="a dead letter", details=cluster.logs)
    assert dead.job_id == job.id
    assert dead.reason == "attempts_exhausted"
    assert dead.last_error_class == "duetime.targets.python.DemoFailure"

    assert await app.replay([dead.id]) == [dead.id]

    async def dead_again() -> object | None:
        run = await app.run(dead.id)
        return run if run.state is RunState.DEAD and run.attempt == 4 else None

    again = await eventually(
        dead_again, timeout=30, what="replayed run to die again", details=cluster.logs
    )
    assert again.replays == 1  # type: ignore[attr-defined]
    assert again.max_attempts == 4  # type: ignore[attr-defined]
    outcomes = [a.outcome for a in await app.attempts(dead.id)]
    assert outcomes == [AttemptOutcome.FAILED] * 4
