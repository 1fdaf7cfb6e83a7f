"""The chaos verdict's workflow ordering check (chaos/checks.py ``_step_order``) on timelines
built by hand: it passes the order the engine promises and names each child run created
before its parents allowed it. The chaos test itself only ever shows it passing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from chaos.checks import _definition, _step_order
from chaos.workload import WORKFLOW_ITEMS, workflow

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(created: float, finished: float | None, state: str = "succeeded") -> dict[str, Any]:
    return {
        "found": "run",
        "created_at": at(created),
        "finished_at": None if finished is None else at(finished),
        "run_state": state if finished is not None else "running",
    }


def healthy() -> dict[tuple[str, int], dict[str, Any]]:
    """An instance of the chaos workflow as the engine runs it: each child created when its
    parents' runs ended (the same instant: the same transaction)."""
    rows = {("root", -1): run(1, 2), ("item", -1): {"found": None}}
    rows.update({("item", i): run(2, 3 + i / 100) for i in range(WORKFLOW_ITEMS)})
    last_item = 3 + (WORKFLOW_ITEMS - 1) / 100
    rows[("fan_in", -1)] = run(last_item, last_item + 1)
    rows[("doomed", -1)] = run(2, 2.5, "dead")
    rows[("handler", -1)] = run(2.5, 2.6)
    rows[("never", -1)] = {"found": None}
    return rows


DEFINITION = _definition(workflow().definition().document())


def test_the_definition_is_read_from_the_stored_document() -> None:
    assert DEFINITION["item"].edges == (("root", "on_success"),)
    assert DEFINITION["item"].mapped
    assert DEFINITION["handler"].edges == (("doomed", "on_failure"),)
    assert DEFINITION["fan_in"].edges == (("item", "on_success"),)
    assert DEFINITION["root"].edges == ()


def test_the_order_the_engine_promises_passes() -> None:
    checked, bad = _step_order(DEFINITION, healthy(), start_finished=at(1))
    assert bad == []
    # root ← start; each item ← root; fan_in ← each item; doomed ← root; handler ← doomed
    assert checked == 1 + WORKFLOW_ITEMS + WORKFLOW_ITEMS + 1 + 1


def test_a_fan_in_created_before_an_item_ended_is_named() -> None:
    rows = healthy()
    rows[("item", 42)] = run(2, 100)  # ended long after the fan-in was created
    _, bad = _step_order(DEFINITION, rows, start_finished=at(1))
    [only] = bad
    assert only.startswith("fan_in[-1] created")
    assert "before its parent item ended (1 of 100 parent run(s) unfinished then)" in only


def test_an_item_created_while_its_source_still_ran_is_named() -> None:
    rows = healthy()
    rows[("root", -1)] = run(1, None)  # still running
    _, bad = _step_order(DEFINITION, rows, start_finished=at(1))
    assert sum("item[" in b for b in bad) == WORKFLOW_ITEMS
    assert any(b.startswith("doomed[-1]") for b in bad)


def test_a_failure_handler_started_after_a_success_is_named() -> None:
    rows = healthy()
    rows[("doomed", -1)] = run(2, 2.5, "succeeded")
    _, bad = _step_order(DEFINITION, rows, start_finished=at(1))
    assert bad == ["handler[-1] started though doomed ended succeeded (edge on_failure)"]


def test_a_root_step_created_before_its_start_run_ended_is_named() -> None:
    _, bad = _step_order(DEFINITION, healthy(), start_finished=at(1.5))
    [only] = bad
    assert only == f"root[-1] created {at(1)} before its start run ended"


def test_rule_any_needs_one_parent_that_allowed_it() -> None:
    definition = _definition(
        {
            "name": "either",
            "steps": [
                {"name": "a", "task": "t"},
                {"name": "b", "task": "t"},
                {"name": "c", "task": "t", "after": ["a", "b"], "rule": "any"},
            ],
        }
    )
    rows = {("a", -1): run(0, 1), ("b", -1): run(0, None), ("c", -1): run(1, 2)}
    assert _step_order(definition, rows, start_finished=at(0))[1] == []
    rows[("a", -1)] = run(0, 1, "dead")
    _, bad = _step_order(definition, rows, start_finished=at(0))
    assert bad == [f"c[-1] created {at(1)} before any parent allowed it"]
