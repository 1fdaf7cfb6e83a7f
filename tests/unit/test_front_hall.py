"""The front hall: ``AsyncApp`` hands out typed services and keeps its flat names as those
services' own methods; the sync ``App`` mirrors every one of them with the same parameters;
no name hides a builtin (but the deprecated ``list``, which warns); ``schedule`` tells created
from updated."""

from __future__ import annotations

import builtins
import inspect
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import App, AsyncApp, ValidationError
from duetime.app import Bulk, Jobs, Keys, Lifecycle, Monitoring, Runs, Tenants
from duetime.app._flat import FlatOperations
from duetime.app._forward import Forward, Operation
from duetime.app._service import Service

ASYNC_ONLY = {
    # the store and its opening: App opens on first use and owns its event loop
    "store",
    "open",
    # the service loops run in the caller's event loop
    "worker",
    "materializer",
    "reaper",
    "remote_workers",
    "node_loops",
    "run_scheduler",
    # the API guard's outage test reads the async store's transient errors
    "unreachable",
}
SYNC_ONLY = {"aio"}
SERVICES = {
    "jobs": Jobs,
    "runs": Runs,
    "bulk": Bulk,
    "tenants": Tenants,
    "keys": Keys,
    "monitoring": Monitoring,
    "lifecycle": Lifecycle,
}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with App(str(tmp_path / "app.db")) as opened:
        yield opened


def public(obj: object) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # `list`, read by dir()
        return {n for n in dir(obj) if not n.startswith("_")}


def methods(service: object) -> dict[str, Any]:
    kind = type(service)
    names = {n for n in public(kind) if not isinstance(inspect.getattr_static(kind, n), property)}
    found = {name: getattr(service, name) for name in names}
    if callable(service):
        found["__call__"] = service.__call__
    return found


def test_the_sync_app_has_every_async_name_with_the_same_parameters(tmp_path: Path) -> None:
    aio = AsyncApp(str(tmp_path / "a.db"))
    app = App(str(tmp_path / "b.db"))
    assert public(aio) - ASYNC_ONLY == public(app) - SYNC_ONLY
    assert inspect.signature(AsyncApp).parameters == inspect.signature(App).parameters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in public(aio) - ASYNC_ONLY - set(SERVICES):
            ours, theirs = getattr(aio, name), getattr(app, name)
            if callable(ours) and not isinstance(ours, type):  # for_tenant returns its kind
                assert inspect.signature(ours).parameters == inspect.signature(theirs).parameters
    for name, kind in SERVICES.items():
        service, mirror = getattr(aio, name), getattr(app, name)
        assert isinstance(service, kind)
        ours, theirs = methods(service), methods(mirror)
        assert set(ours) == set(theirs), name
        for method, func in ours.items():
            assert inspect.signature(func) == inspect.signature(theirs[method]), (name, method)
            if method != "preview":  # Jobs.preview does no I/O: the same function, sync
                assert inspect.iscoroutinefunction(func), (name, method)


def test_flat_names_are_the_services_own_methods(tmp_path: Path) -> None:
    aio = AsyncApp(str(tmp_path / "a.db"))
    assert aio.schedule == aio.jobs.schedule
    assert aio.run == aio.runs.get
    assert aio.cancel_run == aio.runs.cancel
    assert aio.create_key == aio.keys.create
    assert aio.tenant_stats == aio.tenants.stats
    assert aio.explain == aio.monitoring.explain
    assert aio.schedule_many == aio.bulk.schedule_many
    listed = vars(FlatOperations).items()
    flat = {n for n, v in listed if isinstance(v, Forward | Operation)} - {"list"}
    assert {"schedule", "trigger", "get", "dead_letters", "timeline"} <= flat
    served = {getattr(aio, n).__func__ for n in flat}
    every = {getattr(kind, m) for kind in SERVICES.values() for m in public(kind)}
    assert served <= every


def test_one_flat_list_serves_both_fronts(tmp_path: Path) -> None:
    """``app/_flat.py`` lists each flat name once: on AsyncApp it is the async service's
    method, on App the sync service's blocking mirror of it."""
    aio = AsyncApp(str(tmp_path / "a.db"))
    app = App(str(tmp_path / "b.db"))
    operations = {n: v for n, v in vars(FlatOperations).items() if isinstance(v, Operation)}
    assert {"schedule", "run", "cancel_run", "explain"} <= set(operations)
    for name, op in operations.items():
        if name == "list":
            continue
        assert getattr(aio, name) == getattr(getattr(aio, op.service), op.name), name
        assert getattr(app, name) == getattr(getattr(app, op.service), op.name), name
        assert inspect.iscoroutinefunction(getattr(aio, name)), name
        assert not inspect.iscoroutinefunction(getattr(app, name)), name


def test_no_name_hides_a_builtin_type() -> None:
    """A class attribute named like a builtin type hides that type in the class body, where
    annotations are read (``list[Job]`` naming the method). ``open`` is no type: it stays."""
    shadowing = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
    for kind in (*SERVICES.values(), Service):
        assert not set(vars(kind)) & shadowing, kind
    for kind in (AsyncApp, App):
        assert not set(vars(kind)) & shadowing, kind
        assert issubclass(kind, FlatOperations)
    assert set(vars(FlatOperations)) & shadowing == {"list"}  # deprecated, last in the class


def test_list_is_deprecated_and_still_works(app: App) -> None:
    app.schedule("a", task="duetime.noop", every=60)
    with pytest.warns(DeprecationWarning, match=r"app\.jobs\.find"):
        page = app.list(limit=5)
    assert [j.name for j in page.items] == ["a"]


def test_schedule_says_whether_it_created_the_job(app: App) -> None:
    made = app.jobs.schedule("nightly", task="duetime.noop", cron="0 2 * * *")
    again = app.jobs.schedule("nightly", task="duetime.noop", cron="0 3 * * *")
    assert made.created
    assert not again.created
    assert again.id == made.id
    assert again == app.jobs.get("nightly")  # the flag is not part of the job


def test_the_sync_services_act_for_real(app: App) -> None:
    job = app.jobs.schedule("once", task="duetime.noop", at=timedelta(days=1))
    run, created = app.jobs.trigger_run(job.id, idempotency_key="k")
    assert created
    assert app.jobs.trigger_run("once", idempotency_key="k") == (run, False)
    assert [r.id for r in app.runs(job.id).items] == [run.id]
    assert app.runs.find("once", state="scheduled").items[0].id == run.id
    assert app.runs.get(str(run.id)).id == run.id
    assert app.runs.attempts(run.id) == []
    assert app.runs.dead_letters().items == []
    assert app.runs.cancel(run.id).state == "cancelled"
    assert [j.name for j in app.jobs.find(name_prefix="on").items] == ["once"]
    assert app.jobs.pause("once").status == "paused"
    with pytest.raises(ValidationError):
        app.jobs.find(limit=0)

    key, secret = app.keys.create("viewer", name="ci")
    assert app.keys.authenticate(secret) == key
    assert [k.id for k in app.keys.find()] == [key.id]
    assert app.keys() == app.keys.find()  # the flat name: the service, called
    assert app.keys.revoke(key.id).revoked_at is not None

    limits = app.tenants.limits_set(max_in_flight=3)
    assert app.tenants.limits_get().max_in_flight == limits.max_in_flight == 3
    assert app.tenants.webhook_secret() == app.webhook_secret()

    assert app.monitoring.timeline(window=600, step=60).step == 60
    assert app.monitoring.explain("once").name == "once"
    assert app.monitoring.incidents() == []
    assert len(app.jobs.preview("0 2 * * *", count=2)) == 2


def test_a_tenant_view_of_the_sync_app_shares_its_store(app: App) -> None:
    app.schedule("mine", task="duetime.noop", every=60)
    acme = app.for_tenant("acme")
    assert acme.tenant == "acme"
    assert acme.jobs.find().items == []
    acme.schedule("theirs", task="duetime.noop", every=60)
    acme.close()  # a view closes nothing
    assert [j.name for j in app.jobs.find().items] == ["mine"]
    assert [j.name for j in acme.jobs.find().items] == ["theirs"]
