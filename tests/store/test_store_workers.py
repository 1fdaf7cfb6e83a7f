"""Workers: register, heartbeat, unregister, list; the task names ever declared; remote
workers keyed by (tenant, id), their task names, heartbeats and completions their tenant's."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from storekit import completion, get_run, running_run, s

from duetime._types import AttemptOutcome, RunState, WorkerInfo
from duetime.store import Store
from duetime.store.base import RunsCompleteParams, RunsHeartbeatParams


def worker(t0: datetime, wid: str = "w-1", tasks=("a", "b"), queues=("default",), **kw):
    return WorkerInfo(
        id=wid,
        host=kw.get("host", "host-1"),
        pid=kw.get("pid", 4242),
        tasks=tuple(tasks),
        queues=tuple(queues),
        started_at=kw.get("started_at", t0),
        heartbeat_at=kw.get("heartbeat_at", t0),
    )


async def test_register_and_list(store: Store, t0: datetime) -> None:
    assert await store.workers_list() == []
    w1 = worker(t0, "w-1", tasks=("reports.build", "mail.send"), queues=("default", "bulk"))
    w2 = worker(t0 + s(1), "w-2", tasks=(), queues=(), started_at=t0 + s(1), pid=7)
    await store.worker_register(w1)
    await store.worker_register(w2)
    listed = {w.id: w for w in await store.workers_list()}
    assert listed == {"w-1": w1, "w-2": w2}
    for w in listed.values():
        assert w.started_at.utcoffset() is not None
        assert w.heartbeat_at.utcoffset() is not None


async def test_register_again_refreshes_the_worker(store: Store, t0: datetime) -> None:
    await store.worker_register(worker(t0, tasks=("a",)))
    await store.worker_register(
        worker(t0, tasks=("a", "c"), queues=("q2",), heartbeat_at=t0 + s(5))
    )
    (w,) = await store.workers_list()
    assert w.tasks == ("a", "c")
    assert w.queues == ("q2",)
    assert w.heartbeat_at == t0 + s(5)


async def test_heartbeat_moves_heartbeat_at(store: Store, t0: datetime) -> None:
    await store.worker_register(worker(t0, "w-1"))
    await store.worker_register(worker(t0, "w-2"))
    await store.worker_heartbeat("w-1", now=t0 + s(10))
    listed = {w.id: w for w in await store.workers_list()}
    assert listed["w-1"].heartbeat_at == t0 + s(10)
    assert listed["w-1"].started_at == t0
    assert listed["w-2"].heartbeat_at == t0


async def test_unregister(store: Store, t0: datetime) -> None:
    await store.worker_register(worker(t0, "w-1"))
    await store.worker_register(worker(t0, "w-2"))
    await store.worker_unregister("w-1")
    assert [w.id for w in await store.workers_list()] == ["w-2"]
    await store.worker_unregister("w-1")  # again: nothing to do
    await store.worker_unregister("never-registered")
    assert [w.id for w in await store.workers_list()] == ["w-2"]


async def test_tasks_known_is_every_task_ever_declared(store: Store, t0: datetime) -> None:
    assert await store.tasks_known(["a", "b"]) == set()
    await store.worker_register(worker(t0, "w-1", tasks=("a", "b")))
    await store.worker_register(worker(t0, "w-2", tasks=("c",)))
    assert await store.tasks_known(["a", "c", "d"]) == {"a", "c"}
    assert await store.tasks_known([]) == set()
    # re-registering without a task, or leaving, does not forget it
    await store.worker_register(worker(t0, "w-1", tasks=("b",)))
    await store.worker_unregister("w-2")
    assert await store.tasks_known(["a", "b", "c", "d"]) == {"a", "b", "c"}


async def test_task_names_are_matched_exactly(store: Store, t0: datetime) -> None:
    await store.worker_register(worker(t0, tasks=("reports.build", "a_b")))
    assert await store.tasks_known(["reports", "reports.build.x", "REPORTS.BUILD", "a%"]) == set()
    assert await store.tasks_known(["a_b", "axb"]) == {"a_b"}


# --- remote workers belong to their tenant (issue 13) ------------------------------------------
# Tenant "a"'s worker "x/y" and tenant "a/x"'s worker "y" both have the lease owner "a/x/y": the
# store tells them apart by tenant, in its SQL, never by that string alone.

AMBIGUOUS = "a/x/y"


async def test_workers_are_keyed_by_tenant_and_id(store: Store, t0: datetime) -> None:
    own = worker(t0, AMBIGUOUS, tasks=("own",))
    a = replace(worker(t0, AMBIGUOUS, tasks=("a.task",), host="remote"), tenant="a")
    ax = replace(worker(t0, AMBIGUOUS, tasks=("ax.task",), host="remote"), tenant="a/x")
    for w in (own, a, ax):
        await store.worker_register(w)
    listed = {w.tenant: w for w in await store.workers_list()}
    assert listed == {None: own, "a": a, "a/x": ax}

    # a refresh, a heartbeat: the one of that tenant only
    await store.worker_register(replace(a, tasks=("a.other",), heartbeat_at=t0 + s(5)))
    await store.worker_heartbeat(AMBIGUOUS, now=t0 + s(20), tenant="a/x")
    seen = {w.tenant: (w.heartbeat_at, w.tasks) for w in await store.workers_list()}
    assert seen == {
        None: (t0, ("own",)),
        "a": (t0 + s(5), ("a.other",)),
        "a/x": (t0 + s(20), ("ax.task",)),
    }
    await store.worker_heartbeat(AMBIGUOUS, now=t0 + s(30))  # the installation's worker
    seen = {w.tenant: (w.heartbeat_at, w.tasks) for w in await store.workers_list()}
    assert seen[None] == (t0 + s(30), ("own",))
    assert seen["a"] == (t0 + s(5), ("a.other",))

    await store.worker_unregister(AMBIGUOUS, tenant="a")
    assert {w.tenant for w in await store.workers_list()} == {None, "a/x"}
    await store.worker_unregister(AMBIGUOUS)
    assert {w.tenant for w in await store.workers_list()} == {"a/x"}


async def test_a_tenants_task_names_are_known_to_that_tenant_only(
    store: Store, t0: datetime
) -> None:
    await store.worker_register(worker(t0, "own", tasks=("shared",)))
    await store.worker_register(replace(worker(t0, "g/w", tasks=("g.only", "shared")), tenant="g"))
    await store.worker_register(replace(worker(t0, "h/w", tasks=("h.only",)), tenant="h"))
    names = ["shared", "g.only", "h.only", "nobody"]
    assert await store.tasks_known(names) == {"shared"}  # the installation's
    assert await store.tasks_known(names, tenant="g") == {"shared", "g.only"}
    assert await store.tasks_known(names, tenant="h") == {"shared", "h.only"}
    assert await store.tasks_known(names, tenant="acme") == {"shared"}


async def test_a_remote_heartbeat_extends_only_its_own_tenants_leases(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0, tenant="a/x", worker=AMBIGUOUS)
    held = [(claimed.run.id, claimed.run.token)]
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(worker_id=AMBIGUOUS, runs=held, lease_ttl=3600, now=t0, tenant="a")
    )
    assert kept == set()
    run = await get_run(store, claimed.run.id, tenant="a/x")
    assert run.lease_expires_at == claimed.run.lease_expires_at
    kept = await store.runs_heartbeat(
        RunsHeartbeatParams(worker_id=AMBIGUOUS, runs=held, lease_ttl=60, now=t0, tenant="a/x")
    )
    assert kept == {claimed.run.id}
    assert (await get_run(store, claimed.run.id, tenant="a/x")).lease_expires_at == t0 + s(60)


async def test_a_remote_completion_of_another_tenants_run_is_neither_applied_nor_recorded(
    store: Store, t0: datetime
) -> None:
    claimed = await running_run(store, t0, tenant="a/x", worker=AMBIGUOUS)
    done = completion(claimed, outcome=AttemptOutcome.FAILED, next_state=RunState.DEAD)
    assert await store.runs_complete(RunsCompleteParams([done], now=t0, tenant="a")) == [False]
    run = await get_run(store, claimed.run.id, tenant="a/x")
    assert run.state is RunState.RUNNING
    assert run.token == claimed.run.token
    assert await store.attempts_list("a/x", claimed.run.id) == []
    assert await store.runs_complete(RunsCompleteParams([done], now=t0, tenant="a/x")) == [True]
    assert (await get_run(store, claimed.run.id, tenant="a/x")).state is RunState.DEAD
