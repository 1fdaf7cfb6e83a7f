"""The fan-out's fast paths (docs/decisions/0034) on both stores: a mapped step's items are
made from the source's list (on PostgreSQL in one statement) with each element as its run's
payload, exactly, keyed by its place; an item whose only parent is its source gets its
inputs from the store's memory of its instance — its own tenant's only — and they are the
ones a read gives."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from duetime import RunContext
from duetime.testing import FrozenApp, drain
from duetime.workflows.definition import Workflow, step_key
from duetime.workflows.engine import InstanceState
from duetime.workflows.types import StepInputs

ELEMENTS: list[Any] = [
    0,
    -1.5,
    1e300,
    'é \u2028 "quoted" a:b',
    {"k": [1, None], "z": {"deep": True}},
    None,
    True,
    [],
    "",
]


async def test_each_item_runs_its_element_keyed_by_its_place(app: FrozenApp) -> None:
    seen: dict[int, StepInputs | None] = {}

    @app.task("fp.source")
    async def source(ctx: RunContext) -> list[Any]:
        return ELEMENTS

    @app.task("fp.item")
    async def item(ctx: RunContext, payload: Any) -> Any:
        assert ctx.workflow is not None
        assert ctx.workflow.map_index is not None
        seen[ctx.workflow.map_index] = ctx.workflow
        return payload

    @app.task("fp.join")
    async def join(ctx: RunContext) -> Any:
        assert ctx.workflow is not None
        return ctx.workflow.parents["item"]

    flow = Workflow("fp-elements")
    src = flow.step("source", task="fp.source")
    mapped = flow.step("item", task="fp.item", map_over=src)
    flow.step("join", task="fp.join", after=mapped)
    await app.workflows.register(flow)
    job = await app.schedule(
        "fp", target={"type": "workflow", "name": "fp-elements"}, now=True, payload={"in": 1}
    )
    await drain(app)
    [instance] = await app.workflows.instances(job=job.id)
    assert instance.state is InstanceState.SUCCEEDED, instance.reason

    rows = await app.store.workflow_step_runs("default", instance.id)
    items = sorted(
        (r for r in rows if r.step == "item" and r.map_index >= 0), key=lambda r: r.map_index
    )
    assert [r.map_index for r in items] == list(range(len(ELEMENTS)))
    for index, row in enumerate(items):
        assert row.run_id is not None
        run = await app.runs.get(row.run_id)
        assert run.payload == ELEMENTS[index]
        assert run.idempotency_key == step_key(instance.id, "item", index)
        assert run.task == "fp.item"
        assert row.result == ELEMENTS[index]
    [joined] = [r for r in rows if r.step == "join"]
    assert joined.result == ELEMENTS  # every item's result, in item order
    assert sorted(seen) == list(range(len(ELEMENTS)))
    for index, inputs in seen.items():
        assert inputs == StepInputs(
            instance_id=instance.id,
            workflow="fp-elements",
            step="item",
            map_index=index,
            input={"in": 1},
            parents={},
        )


async def test_an_items_inputs_come_from_memory_for_its_own_tenant_only(app: FrozenApp) -> None:
    @app.task("fp.pair")
    async def pair(ctx: RunContext) -> list[str]:
        return ["a", "b"]

    @app.task("fp.echo")
    async def echo(ctx: RunContext, payload: str) -> str:
        return payload

    @app.task("fp.both")
    async def both(ctx: RunContext, payload: Any) -> str:
        return "both"

    flow = Workflow("fp-memory")
    src = flow.step("source", task="fp.pair")
    other = flow.step("other", task="fp.pair")
    flow.step("each", task="fp.echo", map_over=src)
    flow.step("wide", task="fp.both", map_over=src, after=[src, other])
    await app.workflows.register(flow)
    job = await app.schedule("fpm", target={"type": "workflow", "name": "fp-memory"}, now=True)
    await drain(app)
    [instance] = await app.workflows.instances(job=job.id)
    assert instance.state is InstanceState.SUCCEEDED, instance.reason
    rows = {
        (r.step, r.map_index): r for r in await app.store.workflow_step_runs("default", instance.id)
    }
    item_run = rows[("each", 1)].run_id
    assert item_run is not None
    store = app.store

    read = await store.workflow_step_inputs(item_run)  # no key: read from the database
    assert read is not None
    assert read.map_index == 1
    assert read.parents == {}
    key = step_key(instance.id, "each", 1)
    # a run id no step has: only the memory of the instance can answer, and does, alike
    assert await store.workflow_step_inputs(uuid.uuid4(), key=key, tenant="default") == read
    # another tenant's key, the source's own run, an item with a parent besides its source:
    # read (and a run id no step has reads nothing)
    assert await store.workflow_step_inputs(uuid.uuid4(), key=key, tenant="other") is None
    source_key = step_key(instance.id, "source", -1)
    assert await store.workflow_step_inputs(uuid.uuid4(), key=source_key, tenant="default") is None
    wide_key = step_key(instance.id, "wide", 0)
    assert await store.workflow_step_inputs(uuid.uuid4(), key=wide_key, tenant="default") is None
    wide_run = rows[("wide", 0)].run_id
    assert wide_run is not None
    wide = await store.workflow_step_inputs(wide_run, key=wide_key, tenant="default")
    assert wide is not None
    assert wide.parents == {"other": ["a", "b"]}
    # a key that only looks like a step's
    for odd in ("wf:", "wf:not-a-uuid:each:1", f"wf:{instance.id}:each:x", f"wf:{instance.id}"):
        assert await store.workflow_step_inputs(uuid.uuid4(), key=odd, tenant="default") is None


async def test_planning_statements_are_never_prepared(app: FrozenApp, store_url: str) -> None:
    """A generic plan made while an instance had a few rows would loop scans over a wide
    fan-out's later: the statements over an instance's rows are planned per execution. A
    statement without the mark is prepared after its fifth run on a connection (psycopg)."""
    if not store_url.startswith("postgres"):
        pytest.skip("prepared statements: PostgreSQL only")
    store: Any = app.store
    instance = uuid.uuid4()
    async with store._tx() as conn:
        for _ in range(8):
            await store._all(conn, "workflow_steps_whole", id=instance)
            await store._all(conn, "workflow_steps_ended", id=instance, ids=[uuid.uuid4()])
            await store._all(conn, "workflow_instance_lock", id=instance)
        cursor = await conn.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [r["statement"] for r in await cursor.fetchall()]
    assert not any("planned per execution" in s for s in prepared)
    if store.pooling.transaction_pooling:  # through PgBouncer nothing is ever prepared
        assert prepared == []
    else:
        assert any("FOR UPDATE" in s and "workflow_instances" in s for s in prepared)  # unmarked


async def test_an_item_changing_its_input_changes_no_other_items(app: FrozenApp) -> None:
    # the items' inputs come from the store's memory of their instance: each must get a
    # value of its own, as a read gives, never one object that every item shares
    @app.task("fp.three")
    async def three(ctx: RunContext) -> list[int]:
        return [0, 1, 2, 3]

    @app.task("fp.take")
    async def take(ctx: RunContext, payload: int) -> Any:
        assert ctx.workflow is not None
        given = ctx.workflow.input
        assert isinstance(given, dict)
        return given.pop("in", "taken by another item")

    flow = Workflow("fp-own-input")
    src = flow.step("source", task="fp.three")
    flow.step("take", task="fp.take", map_over=src)
    await app.workflows.register(flow)
    job = await app.schedule(
        "fpo", target={"type": "workflow", "name": "fp-own-input"}, now=True, payload={"in": 1}
    )
    await drain(app)
    [instance] = await app.workflows.instances(job=job.id)
    assert instance.state is InstanceState.SUCCEEDED, instance.reason
    rows = await app.store.workflow_step_runs("default", instance.id)
    taken = sorted((r.map_index, r.result) for r in rows if r.step == "take" and r.map_index >= 0)
    assert taken == [(0, 1), (1, 1), (2, 1), (3, 1)]
