"""What a workflow instance does next, decided from its steps' states alone (no I/O).

The store calls :func:`plan` inside the transaction that recorded a step's end (holding the
instance's row lock), applies the actions, and calls it again until it answers nothing new;
the same states always give the same actions, so a sweep that re-plans an instance later
(after a crash, or for a step run ended by the reaper or an operator) does what the first
pass would have done, and the database's uniqueness of (instance, step, map index) makes a
repeated start a no-op.

Step states: ``pending`` (not decided), ``running`` (its run exists; a mapped step: its
items' runs), then one of ``succeeded``, ``failed``, ``skipped`` (its condition can never
hold; the reason says why), ``cancelled`` (the instance was cancelled). A mapped step's items
are rows of their own (map index 0…n-1); the step's own row (index -1) counts them
(:class:`Items`) and ends when they all have: ``succeeded`` if every item did, else
``failed`` — so planning reads one row per step, however wide a fan-out.

Edges and trigger rules (docs/workflows.md has the table):

- an ``on_success`` edge is satisfied by a parent that succeeded, ``on_failure`` by one that
  failed, ``on_finished`` by either; a skipped parent satisfies none;
- ``all``: runs once every edge is satisfied; skipped as soon as one cannot be;
- ``any``: runs as soon as one edge is satisfied; skipped once every parent has ended and
  none is;
- ``none_failed``: runs once every parent has ended and none failed (skipped parents are
  fine); skipped as soon as one fails;
- a mapped step also needs its ``map_over`` parent to have succeeded (it needs its result).

An instance ends when no step is pending or running: ``succeeded`` if every failed step is
handled — a child with an ``on_failure`` or ``on_finished`` edge from it ran — else
``failed``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from duetime.workflows.definition import Condition, StepSpec, TriggerRule, WorkflowDefinition

WHOLE = -1
"""The map index of a step's own row (every step has one; mapped items are 0…n-1)."""


class StepState(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self not in (StepState.PENDING, StepState.RUNNING)


class InstanceState(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Start:
    """Create the run of an unmapped step (or, for a mapped step, its items' runs)."""

    step: str


@dataclass(frozen=True, slots=True)
class Skip:
    step: str
    reason: str


@dataclass(frozen=True, slots=True)
class Settle:
    """Every item of a mapped step has ended: the step's own row takes ``state``."""

    step: str
    state: StepState
    reason: str | None


@dataclass(frozen=True, slots=True)
class Finish:
    state: InstanceState
    reason: str | None


@dataclass(frozen=True, slots=True)
class Items:
    """A running mapped step's items: how many, how many have ended, how many of those did
    not succeed (the store keeps these counts on the step's own row)."""

    total: int
    ended: int = 0
    failed: int = 0


Action = Start | Skip | Settle | Finish
States = Mapping[str, StepState]


def plan(
    definition: WorkflowDefinition, states: States, items: Mapping[str, Items] | None = None
) -> list[Action]:
    """The actions the instance's steps call for now, parents before children, from each
    step's state (by name; missing: ``pending``) and each running mapped step's
    :class:`Items`. Skips and settles cascade within one answer; a :class:`Start` is
    answered once (the store marks the step ``running`` before asking again).
    :class:`Finish` comes last, alone, once nothing is pending or running."""
    now = {s.name: states.get(s.name, StepState.PENDING) for s in definition.steps}
    counts = items or {}
    actions: list[Action] = []
    for step in definition.steps:
        state = now[step.name]
        if state is StepState.RUNNING and step.map_over is not None:
            settled = _settle(step.name, counts.get(step.name, Items(0)))
            if settled is not None:
                actions.append(settled)
                now[step.name] = settled.state
            continue
        if state is not StepState.PENDING:
            continue
        verdict = _verdict(step, now)
        if verdict is None:
            continue
        actions.append(verdict)
        now[step.name] = StepState.RUNNING if isinstance(verdict, Start) else StepState.SKIPPED
    if actions:
        return actions
    if all(state.ended for state in now.values()):
        return [_finish(definition, now)]
    return []


def _settle(name: str, items: Items) -> Settle | None:
    if items.ended < items.total:
        return None
    if items.failed:
        return Settle(name, StepState.FAILED, f"{items.failed} of {items.total} items failed")
    return Settle(name, StepState.SUCCEEDED, None)


def satisfies(condition: Condition, parent: StepState) -> bool:
    """Whether a parent in ``parent`` state satisfies an edge of ``condition``."""
    if parent is StepState.SUCCEEDED:
        return condition is not Condition.ON_FAILURE
    if parent in (StepState.FAILED, StepState.CANCELLED):
        return condition is not Condition.ON_SUCCESS
    return False


def _verdict(step: StepSpec, now: Mapping[str, StepState]) -> Start | Skip | None:
    if step.map_over is not None:
        source = now[step.map_over]
        if source.ended and source is not StepState.SUCCEEDED:
            return Skip(step.name, f"{step.map_over} {source}: no items to map over")
    if step.rule is TriggerRule.NONE_FAILED:
        failed = next(
            (
                e.parent
                for e in step.after
                if now[e.parent] in (StepState.FAILED, StepState.CANCELLED)
            ),
            None,
        )
        if failed is not None:
            return Skip(step.name, f"parent {failed} failed (rule none_failed)")
        if all(now[e.parent].ended for e in step.after):
            return _start_if_mapped_ready(step, now)
        return None
    satisfied = [e for e in step.after if satisfies(e.condition, now[e.parent])]
    hopeless = [e for e in step.after if now[e.parent].ended and e not in satisfied]
    if step.rule is TriggerRule.ANY:
        if satisfied:
            return _start_if_mapped_ready(step, now)
        if len(hopeless) == len(step.after):
            return Skip(step.name, "no parent's edge was satisfied (rule any)")
        return None
    if hopeless:
        edge = hopeless[0]
        return Skip(step.name, f"parent {edge.parent} {now[edge.parent]}, edge {edge.condition}")
    if len(satisfied) == len(step.after):
        return _start_if_mapped_ready(step, now)
    return None


def _start_if_mapped_ready(step: StepSpec, now: Mapping[str, StepState]) -> Start | None:
    """A mapped step starts only once its source has succeeded (``any`` may otherwise allow it
    earlier)."""
    if step.map_over is not None and now[step.map_over] is not StepState.SUCCEEDED:
        return None
    return Start(step.name)


def _finish(definition: WorkflowDefinition, now: Mapping[str, StepState]) -> Finish:
    unhandled = [
        step.name
        for step in definition.steps
        if now[step.name] in (StepState.FAILED, StepState.CANCELLED)
        and not _handled(definition, step.name, now)
    ]
    if unhandled:
        listed = ", ".join(unhandled[:5]) + (" …" if len(unhandled) > 5 else "")
        return Finish(InstanceState.FAILED, f"step(s) failed: {listed}")
    return Finish(InstanceState.SUCCEEDED, None)


def _handled(definition: WorkflowDefinition, name: str, now: Mapping[str, StepState]) -> bool:
    """A failed step is handled when a child with an ``on_failure`` or ``on_finished`` edge
    from it ran (whatever that child's own outcome)."""
    for child in definition.children(name):
        ran = now[child.name] not in (StepState.PENDING, StepState.SKIPPED)
        edge = next(e for e in child.after if e.parent == name)
        if ran and edge.condition is not Condition.ON_SUCCESS:
            return True
    return False
