"""The engine's rules, one table: what a step does for each trigger rule, edge condition and
parent outcome (pure: no store). docs/workflows.md shows the same table."""

from __future__ import annotations

import pytest

from duetime.workflows.definition import Condition, Workflow
from duetime.workflows.engine import (
    Finish,
    InstanceState,
    Items,
    Settle,
    Skip,
    Start,
    StepState,
    plan,
    satisfies,
)

OK, FAIL, SKIP, RUN, WAIT = (
    StepState.SUCCEEDED,
    StepState.FAILED,
    StepState.SKIPPED,
    StepState.RUNNING,
    StepState.PENDING,
)


@pytest.mark.parametrize(
    ("condition", "parent", "satisfied"),
    [
        (Condition.ON_SUCCESS, OK, True),
        (Condition.ON_SUCCESS, FAIL, False),
        (Condition.ON_SUCCESS, SKIP, False),
        (Condition.ON_FAILURE, OK, False),
        (Condition.ON_FAILURE, FAIL, True),
        (Condition.ON_FAILURE, SKIP, False),
        (Condition.ON_FINISHED, OK, True),
        (Condition.ON_FINISHED, FAIL, True),
        (Condition.ON_FINISHED, SKIP, False),
    ],
)
def test_edge_conditions(condition: Condition, parent: StepState, satisfied: bool) -> None:
    assert satisfies(condition, parent) is satisfied


def two_parents(rule: str, conditions: tuple[str, str] = ("on_success", "on_success")):
    flow = Workflow("w")
    flow.step("a", task="t")
    flow.step("b", task="t")
    flow.step(
        "c",
        task="t",
        rule=rule,
        after=[{"on_success": "a", "on_failure": "a", "on_finished": "a"}[conditions[0]], "b"],
    )
    definition = flow.definition()
    return definition


def verdict(rule: str, a: StepState, b: StepState) -> str:
    definition = two_parents(rule)
    actions = plan(definition, {"a": a, "b": b})
    for action in actions:
        if isinstance(action, Start) and action.step == "c":
            return "run"
        if isinstance(action, Skip) and action.step == "c":
            return "skip"
    return "wait"


@pytest.mark.parametrize(
    ("rule", "a", "b", "expected"),
    [
        ("all", OK, OK, "run"),
        ("all", OK, RUN, "wait"),
        ("all", FAIL, RUN, "skip"),  # an edge that can never hold: skipped at once
        ("all", SKIP, OK, "skip"),
        ("any", OK, RUN, "run"),  # one satisfied edge is enough, at once
        ("any", FAIL, RUN, "wait"),
        ("any", FAIL, FAIL, "skip"),
        ("any", SKIP, OK, "run"),
        ("none_failed", OK, SKIP, "run"),  # a skipped branch does not block a join
        ("none_failed", SKIP, SKIP, "run"),
        ("none_failed", OK, RUN, "wait"),
        ("none_failed", FAIL, RUN, "skip"),
    ],
)
def test_trigger_rules(rule: str, a: StepState, b: StepState, expected: str) -> None:
    assert verdict(rule, a, b) == expected


def test_skips_cascade_in_one_answer_and_the_instance_finishes_after() -> None:
    flow = Workflow("w")
    flow.step("a", task="t")
    flow.step("b", task="t", after="a")
    flow.step("c", task="t", after="b")
    definition = flow.definition()
    actions = plan(definition, {"a": FAIL, "b": WAIT, "c": WAIT})
    assert actions == [
        Skip("b", "parent a failed, edge on_success"),
        Skip("c", "parent b skipped, edge on_success"),
    ]
    done = {"a": FAIL, "b": SKIP, "c": SKIP}
    assert plan(definition, done) == [Finish(InstanceState.FAILED, "step(s) failed: a")]


def test_a_failure_handled_by_a_failure_edge_leaves_the_instance_succeeded() -> None:
    flow = Workflow("w")
    a = flow.step("a", task="t")
    flow.step("on-fail", task="t", after=a.failed)
    definition = flow.definition()
    assert plan(definition, {"a": FAIL, "on-fail": OK}) == [Finish(InstanceState.SUCCEEDED, None)]
    # the handler itself failing still counts as handled; its own failure does not
    assert plan(definition, {"a": FAIL, "on-fail": FAIL}) == [
        Finish(InstanceState.FAILED, "step(s) failed: on-fail")
    ]


def test_a_mapped_step_settles_when_all_its_items_have_ended() -> None:
    flow = Workflow("w")
    src = flow.step("src", task="t")
    flow.step("each", task="t", map_over=src)
    definition = flow.definition()
    base = {"src": OK, "each": RUN}
    assert plan(definition, base, {"each": Items(2, ended=1)}) == []
    assert plan(definition, base, {"each": Items(2, ended=2, failed=1)}) == [
        Settle("each", FAIL, "1 of 2 items failed")
    ]
    assert plan(definition, base, {"each": Items(2, ended=2)}) == [Settle("each", OK, None)]
    # no items at all: settled at once
    assert plan(definition, base, {"each": Items(0)}) == [Settle("each", OK, None)]


def test_a_mapped_step_waits_for_its_source_even_under_any() -> None:
    flow = Workflow("w")
    src = flow.step("src", task="t")
    other = flow.step("other", task="t")
    flow.step("each", task="t", map_over=src, after=[other], rule="any")
    definition = flow.definition()
    states = {"src": RUN, "other": OK, "each": WAIT}
    assert plan(definition, states) == []
    states["src"] = FAIL
    assert plan(definition, states) == [Skip("each", "src failed: no items to map over")]
