"""Why an instance's steps have not started, in words, and the instance's graph as edges —
from the definition and the steps' states alone (no I/O; the same rules as
:func:`duetime.workflows.engine.plan`, read back for people).

For each step that has not run (``pending``, ``skipped`` or ``cancelled``) :func:`explain`
says what it waits for or why it never will: each edge from a parent with that parent's state
and whether the edge is satisfied, and a one-line ``why``:

- ``waiting for extract (on_success)`` — an ``all`` step whose parent has not ended;
- ``waiting for one of: a (on_success), b (on_failure)`` — an ``any`` step;
- ``skipped: parent load failed, edge on_success`` — the edge that can no longer hold;
- ``cancelled: the instance was cancelled``.

A step that is running or has ended after running is not explained (its run says more).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from duetime.workflows.definition import Condition, StepSpec, TriggerRule, WorkflowDefinition
from duetime.workflows.engine import InstanceState, StepState, satisfies


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """An edge of the graph: ``child`` (``to``) follows ``parent`` (``from``) on ``on``."""

    parent: str
    child: str
    on: Condition


@dataclass(frozen=True, slots=True)
class EdgeWhy:
    """One edge into a step that has not started: its parent's state now, and whether the
    edge is satisfied (True), can no longer be (False), or may yet be (None)."""

    parent: str
    on: Condition
    parent_state: StepState
    satisfied: bool | None


@dataclass(frozen=True, slots=True)
class StepWhy:
    """Why ``step`` (in ``state``) has not started: ``why`` in one line, its ``rule``, its
    edges one by one, and ``map_over`` when it maps over a parent's result."""

    step: str
    state: StepState
    why: str
    rule: TriggerRule
    edges: tuple[EdgeWhy, ...]
    map_over: str | None = None


_NOT_STARTED = (StepState.PENDING, StepState.SKIPPED, StepState.CANCELLED)


def graph_edges(definition: WorkflowDefinition) -> list[GraphEdge]:
    """Every edge of the definition, children in definition order (a mapped step's implied
    edge from its source included)."""
    return [
        GraphEdge(edge.parent, step.name, edge.condition)
        for step in definition.steps
        for edge in step.after
    ]


def explain(
    definition: WorkflowDefinition,
    states: Mapping[str, StepState],
    *,
    instance: InstanceState = InstanceState.RUNNING,
    reasons: Mapping[str, str | None] | None = None,
) -> list[StepWhy]:
    """Each step of ``definition`` that has not started, in definition order (parents first),
    with why. ``states`` maps step names to their own row's state (missing: ``pending``);
    ``reasons`` the stored reasons of skipped steps (used when the rules alone cannot say,
    e.g. a mapped source that returned no list)."""
    now = {s.name: states.get(s.name, StepState.PENDING) for s in definition.steps}
    stored = reasons or {}
    out: list[StepWhy] = []
    for step in definition.steps:
        state = now[step.name]
        if state not in _NOT_STARTED:
            continue
        edges = tuple(_edge_why(step, e.parent, e.condition, now) for e in step.after)
        out.append(
            StepWhy(
                step=step.name,
                state=state,
                why=_why(step, state, edges, now, instance, stored.get(step.name)),
                rule=step.rule,
                edges=edges,
                map_over=step.map_over,
            )
        )
    return out


def _edge_why(step: StepSpec, parent: str, on: Condition, now: Mapping[str, StepState]) -> EdgeWhy:
    state = now[parent]
    if satisfies(on, state):
        verdict: bool | None = True
    elif state.ended:
        verdict = False
    else:
        verdict = None
    if step.rule is TriggerRule.NONE_FAILED and state is StepState.SKIPPED:
        verdict = True  # none_failed takes a skipped parent as fine
    return EdgeWhy(parent, on, state, verdict)


def _why(
    step: StepSpec,
    state: StepState,
    edges: tuple[EdgeWhy, ...],
    now: Mapping[str, StepState],
    instance: InstanceState,
    stored: str | None,
) -> str:
    if state is StepState.CANCELLED:
        return "cancelled: the instance was cancelled"
    if state is StepState.SKIPPED:
        return f"skipped: {_skip_cause(step, edges, now) or stored or 'its condition cannot hold'}"
    if instance is not InstanceState.RUNNING:
        return f"not started: the instance is {instance}"
    if not edges:
        return "ready: a root step, its run is being created"
    waiting = [e for e in edges if e.satisfied is None]
    if step.rule is TriggerRule.ANY and not any(e.satisfied for e in edges):
        return "waiting for one of: " + ", ".join(_edge(e) for e in waiting)
    if step.rule is not TriggerRule.ANY and waiting:
        listed = ", ".join(_edge(e) for e in waiting)
        suffix = " (rule none_failed: each parent must end)" if _none_failed(step) else ""
        return f"waiting for {listed}{suffix}"
    if step.map_over is not None and now[step.map_over] is not StepState.SUCCEEDED:
        return f"waiting for {step.map_over} to succeed: it maps over its result"
    return "ready: its edges are satisfied, its run is being created"


def _skip_cause(
    step: StepSpec, edges: tuple[EdgeWhy, ...], now: Mapping[str, StepState]
) -> str | None:
    """The rule that skips ``step``, as the engine states it (None: the states alone do not
    show it, e.g. a mapped source that succeeded without a list)."""
    if step.map_over is not None:
        source = now[step.map_over]
        if source.ended and source is not StepState.SUCCEEDED:
            return f"{step.map_over} {source}: no items to map over"
    if _none_failed(step):
        failed = next(
            (e for e in edges if e.parent_state in (StepState.FAILED, StepState.CANCELLED)), None
        )
        return None if failed is None else f"parent {failed.parent} failed (rule none_failed)"
    hopeless = [e for e in edges if e.satisfied is False]
    if step.rule is TriggerRule.ANY:
        if edges and len(hopeless) == len(edges):
            listed = ", ".join(f"{e.parent} {e.parent_state}" for e in hopeless)
            return f"no parent's edge was satisfied (rule any): {listed}"
        return None
    if hopeless:
        e = hopeless[0]
        return f"parent {e.parent} {e.parent_state}, edge {e.on}"
    return None


def _none_failed(step: StepSpec) -> bool:
    return step.rule is TriggerRule.NONE_FAILED


def _edge(e: EdgeWhy) -> str:
    return f"{e.parent} ({e.on})"
