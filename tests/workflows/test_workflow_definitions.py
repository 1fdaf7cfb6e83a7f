"""Workflow definitions: the builder and the JSON document agree, and validation names where
a definition is wrong (pure: no store)."""

from __future__ import annotations

from typing import Any

import pytest

from duetime._types import DeliveryMode, RetryPolicy
from duetime.errors import ValidationError
from duetime.workflows.definition import (
    Condition,
    Edge,
    TriggerRule,
    Workflow,
    WorkflowLimits,
    parse,
)


def etl() -> Workflow:
    flow = Workflow("etl")
    extract = flow.step("extract", task="etl.extract", retry=RetryPolicy(max_attempts=5))
    parts = flow.step("transform", task="etl.transform", map_over=extract, timeout=30)
    load = flow.step("load", task="etl.load", after=parts, payload={"table": "t"})
    flow.step("page", task="ops.page", after=[extract.failed, load.failed], rule="any")
    flow.step(
        "hook",
        target={"type": "http", "url": "https://example.com/done"},
        after=load.finished,
        delivery=DeliveryMode.AT_MOST_ONCE,
    )
    return flow


def test_the_builder_and_its_json_document_are_the_same_definition() -> None:
    built = etl().definition()
    document = built.document()
    assert document == {
        "name": "etl",
        "steps": [
            {"name": "extract", "task": "etl.extract", "retry": {
                "max_attempts": 5, "backoff_base": 1.0, "backoff_factor": 2.0,
                "backoff_cap": 600.0}},
            {"name": "transform", "task": "etl.transform", "map_over": "extract",
             "timeout": 30.0},
            {"name": "load", "task": "etl.load", "payload": {"table": "t"},
             "after": ["transform"]},
            {"name": "page", "task": "ops.page", "after": [
                {"step": "extract", "on": "on_failure"}, {"step": "load", "on": "on_failure"}],
             "rule": "any"},
            {"name": "hook", "target": {"type": "http", "url": "https://example.com/done"},
             "after": [{"step": "load", "on": "on_finished"}], "delivery": "at_most_once"},
        ],
    }  # fmt: skip
    parsed = parse(document)
    assert parsed == built
    assert parsed.digest() == built.digest()
    assert parsed.step("transform").after == (Edge("extract", Condition.ON_SUCCESS),)
    assert parsed.step("page").rule is TriggerRule.ANY


def test_short_edge_forms_read_the_same() -> None:
    long = parse({"name": "w", "steps": [
        {"name": "a", "task": "t"},
        {"name": "b", "task": "t", "after": [{"step": "a", "on": "on_failure"}]},
    ]})  # fmt: skip
    short = parse({"name": "w", "steps": [
        {"name": "a", "task": "t"},
        {"name": "b", "task": "t", "after": {"step": "a", "on": "failure"}},
    ]})  # fmt: skip
    assert long == short


def test_steps_are_ordered_parents_first_whatever_the_given_order() -> None:
    definition = parse({"name": "w", "steps": [
        {"name": "c", "task": "t", "after": ["b"]},
        {"name": "b", "task": "t", "after": ["a"]},
        {"name": "a", "task": "t"},
    ]})  # fmt: skip
    assert [s.name for s in definition.steps] == ["a", "b", "c"]
    assert [s.name for s in definition.roots] == ["a"]
    assert [s.name for s in definition.children("a")] == ["b"]


@pytest.mark.parametrize(
    ("document", "where", "says"),
    [
        ({"name": "w", "steps": []}, "steps", "non-empty list"),
        ({"name": "w", "steps": [{"name": "a"}]}, "steps[0].task", "must name a task"),
        ({"name": "bad name!", "steps": [{"name": "a", "task": "t"}]}, "name", "letters"),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t"}, {"name": "a", "task": "t"}]},
            "steps[1].name",
            "duplicate step name 'a' (also steps[0])",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "after": ["x"]}]},
            "steps[0].after[0]",
            "unknown step 'x'",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "after": ["a"]}]},
            "steps[0].after[0]",
            "cannot follow itself",
        ),
        (
            {"name": "w", "steps": [
                {"name": "a", "task": "t", "after": ["c"]},
                {"name": "b", "task": "t", "after": ["a"]},
                {"name": "c", "task": "t", "after": ["b"]},
            ]},
            "steps",
            "cycle: ",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "rule": "most"}]},
            "steps[0].rule",
            "must be one of all, any, none_failed",
        ),
        (
            {"name": "w", "steps": [
                {"name": "a", "task": "t", "after": [{"step": "a", "on": "x"}]},
            ]},
            "steps[0].after[0].on",
            "must be one of",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "timeout": -1}]},
            "steps[0].timeout",
            "positive",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "retry": {"max_attempts": 0}}]},
            "steps[0].retry.max_attempts",
            "1 to 1000",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "colour": "red"}]},
            "steps[0]",
            "unknown field(s): colour",
        ),
        (
            {"name": "w", "steps": [
                {"name": "a", "task": "t"},
                {"name": "b", "task": "t", "map_over": "a",
                 "after": [{"step": "a", "on": "failure"}]},
            ]},
            "steps[1].map_over",
            "its edge must be on_success",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t", "map_over": "zz"}]},
            "steps[0].map_over",
            "unknown step 'zz'",
        ),
        (
            {"name": "w", "steps": [
                {"name": "a", "task": "t"},
                {"name": "b", "task": "t", "rule": "none_failed",
                 "after": [{"step": "a", "on": "finished"}]},
            ]},
            "steps[1].rule",
            "none_failed",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "t",
                                     "target": {"type": "http", "url": "https://x"}}]},
            "steps[0].task",
            "either task or target",
        ),
        (
            {"name": "w", "steps": [{"name": "a", "task": "duetime.workflow"}]},
            "steps[0].task",
            "cannot be a step's task",
        ),
    ],
)  # fmt: skip
def test_validation_says_what_and_where(document: Any, where: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse(document)
    assert caught.value.field == where
    assert says in caught.value.reason


def test_a_cycle_is_named_step_by_step() -> None:
    with pytest.raises(
        ValidationError, match=r"cycle: (a → b → c → a|b → c → a → b|c → a → b → c)"
    ):
        parse({"name": "w", "steps": [
            {"name": "a", "task": "t", "after": ["c"]},
            {"name": "b", "task": "t", "after": ["a"]},
            {"name": "c", "task": "t", "after": ["b"]},
        ]})  # fmt: skip


def test_the_step_limit_is_configurable() -> None:
    steps = [{"name": f"s{i}", "task": "t"} for i in range(4)]
    parse({"name": "w", "steps": steps}, WorkflowLimits(max_steps=4))
    with pytest.raises(ValidationError, match="4 steps; a workflow has at most 3") as caught:
        parse({"name": "w", "steps": steps}, WorkflowLimits(max_steps=3))
    assert caught.value.field == "steps"


def test_a_thousand_steps_in_a_chain_validate_without_recursion() -> None:
    steps = [{"name": "s0", "task": "t"}] + [
        {"name": f"s{i}", "task": "t", "after": [f"s{i - 1}"]} for i in range(1, 1000)
    ]
    definition = parse({"name": "long", "steps": list(reversed(steps))})
    assert [s.name for s in definition.steps][:3] == ["s0", "s1", "s2"]


def test_the_builder_takes_a_retry_as_an_object_and_refuses_anything_else() -> None:
    flow = Workflow("w")
    flow.step("a", task="t", retry={"max_attempts": 5})
    assert flow.definition().step("a").retry == RetryPolicy(max_attempts=5)
    with pytest.raises(ValidationError, match="max_attempts") as caught:
        Workflow("w").step("a", task="t", retry={"max_attempts": "five"})
    assert caught.value.field == "steps[0].retry.max_attempts"
    with pytest.raises(ValidationError) as caught:
        Workflow("w").step("a", task="t", retry=5)  # type: ignore[arg-type]
    assert caught.value.field == "steps[0].retry"
