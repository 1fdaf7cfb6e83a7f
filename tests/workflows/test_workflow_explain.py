"""``duetime.workflows.explain``: why each step that has not started has not — per rule, per
edge condition, mapped steps, cancelled instances — and the graph's edges. Pure: definitions
and states in, words out; each "skipped" answer is checked against what ``plan`` decides."""

from __future__ import annotations

from duetime.workflows.definition import Condition, Workflow, WorkflowDefinition
from duetime.workflows.engine import InstanceState, Skip, StepState, plan
from duetime.workflows.explain import EdgeWhy, explain, graph_edges

P, R, S, F, K, C = (
    StepState.PENDING,
    StepState.RUNNING,
    StepState.SUCCEEDED,
    StepState.FAILED,
    StepState.SKIPPED,
    StepState.CANCELLED,
)


def etl() -> WorkflowDefinition:
    wf = Workflow("etl")
    extract = wf.step("extract", task="t")
    parts = wf.step("parts", task="t", map_over=extract)
    load = wf.step("load", task="t", after=parts)
    wf.step("report", task="t", after=load)
    wf.step("page", task="t", after=[extract.failed, load.failed], rule="any")
    wf.step("cleanup", task="t", after=load.finished)
    wf.step("audit", task="t", after=[extract, load], rule="none_failed")
    return wf.definition()


def whys(definition: WorkflowDefinition, states: dict[str, StepState], **kw: object) -> dict:
    return {w.step: w.why for w in explain(definition, states, **kw)}  # type: ignore[arg-type]


def test_steps_waiting_on_a_running_parent_name_it_and_the_edge() -> None:
    found = whys(etl(), {"extract": S, "parts": R})
    assert found == {
        "load": "waiting for parts (on_success)",
        "report": "waiting for load (on_success)",
        "page": "waiting for one of: load (on_failure)",
        "cleanup": "waiting for load (on_finished)",
        "audit": "waiting for load (on_success) (rule none_failed: each parent must end)",
    }


def test_a_root_not_started_and_started_steps_are_left_out() -> None:
    definition = etl()
    found = explain(definition, {})
    assert found[0].step == "extract"
    assert found[0].why == "ready: a root step, its run is being created"
    assert found[0].edges == ()
    everything_ran = {s.name: S for s in definition.steps}
    assert explain(definition, everything_ran) == []


def test_skips_name_the_parent_and_the_edge_as_the_engine_does() -> None:
    definition = etl()
    states = {"extract": S, "parts": S, "load": F}
    # the engine's own skips for these states, applied, then explained in its words
    engine: dict[str, str] = {}
    for action in plan(definition, states):
        if isinstance(action, Skip):
            states[action.step] = K
            engine[action.step] = f"skipped: {action.reason}"
    found = whys(definition, states)
    assert engine == {k: v for k, v in found.items() if k in engine}
    assert found["report"] == "skipped: parent load failed, edge on_success"
    assert found["audit"] == "skipped: parent load failed (rule none_failed)"
    assert (
        found["page"]
        == found["cleanup"]
        == ("ready: its edges are satisfied, its run is being created")
    )
    [report] = [w for w in explain(definition, states) if w.step == "report"]
    assert report.edges == (EdgeWhy("load", Condition.ON_SUCCESS, F, False),)
    assert report.state is K


def test_any_rule_skipped_lists_every_parent() -> None:
    definition = etl()
    states = {"extract": S, "parts": S, "load": S, "report": S, "cleanup": S, "audit": S}
    states["page"] = K
    found = whys(definition, states)
    assert found == {
        "page": "skipped: no parent's edge was satisfied (rule any): extract succeeded, "
        "load succeeded"
    }


def test_a_mapped_step_whose_source_failed_or_returned_no_list() -> None:
    definition = etl()
    assert whys(definition, {"extract": F, "parts": K})["parts"] == (
        "skipped: extract failed: no items to map over"
    )
    # a source that succeeded without a list fails the mapped step; the stored reason tells
    stored = "map_over extract: its result must be a list, it returned dict"
    found = whys(definition, {"extract": S, "parts": F, "load": K}, reasons={"load": None})
    assert found["load"] == "skipped: parent parts failed, edge on_success"
    odd = whys(definition, {"extract": S, "parts": K}, reasons={"parts": stored})
    assert odd["parts"] == f"skipped: {stored}"


def test_none_failed_takes_a_skipped_parent_as_fine() -> None:
    wf = Workflow("w")
    a = wf.step("a", task="t")
    b = wf.step("b", task="t", after=a.failed)
    wf.step("c", task="t", after=[a, b], rule="none_failed")
    definition = wf.definition()
    [c] = [w for w in explain(definition, {"a": S, "b": K}) if w.step == "c"]
    assert [e.satisfied for e in c.edges] == [True, True]
    assert c.why == "ready: its edges are satisfied, its run is being created"


def test_an_any_step_mapping_over_a_parent_waits_for_that_parent() -> None:
    wf = Workflow("w")
    a = wf.step("a", task="t")
    b = wf.step("b", task="t")
    wf.step("m", task="t", map_over=a, after=[b], rule="any")
    definition = wf.definition()
    assert whys(definition, {"a": R, "b": S})["m"] == (
        "waiting for a to succeed: it maps over its result"
    )


def test_cancelled_steps_and_ended_instances() -> None:
    definition = etl()
    found = whys(
        definition, {"extract": S, "parts": C, "load": C}, instance=InstanceState.CANCELLED
    )
    assert found["parts"] == "cancelled: the instance was cancelled"
    assert found["report"] == "not started: the instance is cancelled"


def test_graph_edges_include_a_mapped_steps_implied_edge() -> None:
    edges = {(e.parent, e.child, str(e.on)) for e in graph_edges(etl())}
    assert edges == {
        ("extract", "parts", "on_success"),
        ("parts", "load", "on_success"),
        ("load", "report", "on_success"),
        ("extract", "page", "on_failure"),
        ("load", "page", "on_failure"),
        ("load", "cleanup", "on_finished"),
        ("extract", "audit", "on_success"),
        ("load", "audit", "on_success"),
    }
