"""Workers: register, heartbeat, unregister, list; the task names ever declared."""

from __future__ import annotations

from datetime import datetime

from storekit import s

from duetime._types import WorkerInfo
from duetime.store import Store


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
