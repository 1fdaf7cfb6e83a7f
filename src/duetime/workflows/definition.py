"""Workflow definitions: the Python builder, the JSON document, and their validation.

A workflow is a DAG of steps. Each step runs a task (a registered function or a target) with
its payload and policies once its parents allow it: an edge from a parent says which of the
parent's outcomes satisfies it (``on_success``, the default; ``on_failure``; ``on_finished``),
and the step's trigger rule says how many satisfied edges it needs (docs/workflows.md has the
table). A step with ``map_over`` runs once per item of its parent's result (a list).

The Python builder and the JSON document describe the same thing; :func:`parse` turns a
document into a :class:`WorkflowDefinition` and :meth:`WorkflowDefinition.document` turns it
back, so a definition's :meth:`~WorkflowDefinition.digest` is the same whichever way it came.
Nothing here does I/O.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from duetime import _json
from duetime._types import JSON, DeliveryMode, RetryPolicy, Run, enum_value
from duetime.errors import ValidationError

_E = TypeVar("_E", bound=enum.Enum)

WORKFLOW_TASK = "duetime.workflow"
"""The built-in task a workflow job's runs carry: its run starts an instance."""

STEP_KEY_PREFIX = "wf:"
"""A step run's idempotency key starts so (``wf:<instance>:<step>:<index>``)."""

WorkflowRole = Literal["start", "step"]
"""What a run is to the workflow engine: a workflow job's start run, or a step's run."""


def step_key(instance_id: uuid.UUID, step: str, index: int) -> str:
    """The idempotency key of a step's run: one run per (instance, step, map index)."""
    return f"{STEP_KEY_PREFIX}{instance_id}:{step}:{index}"


def parse_step_key(key: str | None) -> tuple[uuid.UUID, str, int] | None:
    """The (instance, step, map index) of a :func:`step_key`, or None for a key that is not
    one (a user's own key may start with ``wf:`` too: that a key parses proves nothing)."""
    if key is None or not key.startswith(STEP_KEY_PREFIX):
        return None
    instance, _, rest = key[len(STEP_KEY_PREFIX) :].partition(":")
    step, _, index = rest.rpartition(":")
    try:
        return uuid.UUID(instance), step, int(index)
    except ValueError:
        return None


def workflow_role(run: Run) -> WorkflowRole | None:
    """What ``run`` is to the workflow engine: a workflow job's start run, a step's run (its
    end is planned with its completion), or nothing. A user's own idempotency key that
    happens to start with ``wf:`` only costs a lookup that finds no step."""
    if run.task == WORKFLOW_TASK:
        return "start"
    key = run.idempotency_key
    return "step" if key is not None and key.startswith(STEP_KEY_PREFIX) else None


class Condition(enum.StrEnum):
    """Which outcome of a parent satisfies an edge."""

    ON_SUCCESS = "on_success"
    ON_FAILURE = "on_failure"
    ON_FINISHED = "on_finished"


class TriggerRule(enum.StrEnum):
    """How many of a step's edges must be satisfied for it to run."""

    ALL = "all"
    ANY = "any"
    NONE_FAILED = "none_failed"


@dataclass(frozen=True, slots=True)
class WorkflowLimits:
    """Bounds a definition and an instance must keep (settings ``workflow_max_steps``,
    ``workflow_max_mapped``, ``result_max_bytes``)."""

    max_steps: int = 1000
    max_mapped: int = 10_000
    max_result_bytes: int = 1024 * 1024
    max_payload_bytes: int = 64 * 1024
    """Largest step payload, as JSON (the settings' ``payload_limit``, as for a job's)."""


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge from ``parent``, satisfied by the parent outcome ``condition`` names."""

    parent: str
    condition: Condition = Condition.ON_SUCCESS


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One step. ``task`` names a registered function, or ``target`` gives an HTTP target;
    ``retry`` None means the installation's default retry policy."""

    name: str
    task: str | None = None
    target: dict[str, JSON] | None = None
    payload: JSON = None
    after: tuple[Edge, ...] = ()
    rule: TriggerRule = TriggerRule.ALL
    map_over: str | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None
    delivery: DeliveryMode = DeliveryMode.AT_LEAST_ONCE
    queue: str = "default"
    priority: int = 0

    @property
    def parents(self) -> tuple[str, ...]:
        return tuple(edge.parent for edge in self.after)


@dataclass(frozen=True, slots=True)
class WorkflowDefinition:
    """A validated workflow: steps in topological order (parents before children)."""

    name: str
    steps: tuple[StepSpec, ...]
    _index: dict[str, StepSpec] = field(default_factory=dict, repr=False, compare=False)
    _children: dict[str, tuple[StepSpec, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self._index.update((s.name, s) for s in self.steps)
        kids: dict[str, list[StepSpec]] = {s.name: [] for s in self.steps}
        for step in self.steps:
            for parent in dict.fromkeys(step.parents):
                kids[parent].append(step)
        self._children.update((k, tuple(v)) for k, v in kids.items())

    def step(self, name: str) -> StepSpec:
        return self._index[name]

    def has_step(self, name: str) -> bool:
        return name in self._index

    def children(self, name: str) -> tuple[StepSpec, ...]:
        """The steps with an edge from ``name``, in definition order."""
        return self._children[name]

    @property
    def roots(self) -> tuple[StepSpec, ...]:
        return tuple(s for s in self.steps if not s.after)

    def document(self) -> dict[str, JSON]:
        """The JSON document of this definition (what :func:`parse` takes); defaults are
        left out, so equal definitions have equal documents."""
        return {"name": self.name, "steps": [_step_document(s) for s in self.steps]}

    def digest(self) -> str:
        """A hash of the document (keys sorted, numbers as JSON writes them): a definition
        registered again with the same digest is the same version."""
        canonical = json.dumps(self.document(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _step_document(step: StepSpec) -> dict[str, JSON]:
    doc: dict[str, JSON] = {"name": step.name}
    if step.task is not None:
        doc["task"] = step.task
    if step.target is not None:
        doc["target"] = step.target
    if step.payload is not None:
        doc["payload"] = step.payload
    if step.after:
        doc["after"] = [
            edge.parent
            if edge.condition is Condition.ON_SUCCESS
            else {"step": edge.parent, "on": str(edge.condition)}
            for edge in step.after
            if edge.parent != step.map_over
        ]
        if not doc["after"]:
            del doc["after"]
    if step.rule is not TriggerRule.ALL:
        doc["rule"] = str(step.rule)
    if step.map_over is not None:
        doc["map_over"] = step.map_over
    if step.retry is not None:
        doc["retry"] = {
            "max_attempts": step.retry.max_attempts,
            "backoff_base": float(step.retry.backoff_base),
            "backoff_factor": float(step.retry.backoff_factor),
            "backoff_cap": float(step.retry.backoff_cap),
        }
    if step.timeout is not None:
        doc["timeout"] = step.timeout
    if step.delivery is not DeliveryMode.AT_LEAST_ONCE:
        doc["delivery"] = str(step.delivery)
    if step.queue != "default":
        doc["queue"] = step.queue
    if step.priority:
        doc["priority"] = step.priority
    return doc


# --- the Python builder --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepRef:
    """A step added to a :class:`Workflow`; pass it in another step's ``after`` (an
    ``on_success`` edge) or use :attr:`failed` / :attr:`finished` / :attr:`succeeded`."""

    name: str

    @property
    def succeeded(self) -> Edge:
        return Edge(self.name, Condition.ON_SUCCESS)

    @property
    def failed(self) -> Edge:
        return Edge(self.name, Condition.ON_FAILURE)

    @property
    def finished(self) -> Edge:
        return Edge(self.name, Condition.ON_FINISHED)


Parents = StepRef | Edge | str | Iterable[StepRef | Edge | str]


class Workflow:
    """Build a workflow in Python::

        etl = Workflow("etl")
        extract = etl.step("extract", task="etl.extract")
        parts = etl.step("transform", task="etl.transform", map_over=extract)
        load = etl.step("load", task="etl.load", after=parts)
        etl.step("page", task="ops.page", after=[extract.failed, load.failed], rule="any")

    ``after`` takes steps (``on_success`` edges), edges (``load.failed``, ``load.finished``)
    or step names; ``map_over`` runs the step once per item of that parent's result (a list)
    and implies an ``on_success`` edge from it. :meth:`definition` validates the whole.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._steps: list[StepSpec] = []

    def step(
        self,
        name: str,
        *,
        task: str | None = None,
        target: Mapping[str, JSON] | None = None,
        payload: JSON = None,
        after: Parents = (),
        rule: TriggerRule | str = TriggerRule.ALL,
        map_over: StepRef | str | None = None,
        retry: RetryPolicy | Mapping[str, Any] | None = None,
        timeout: float | None = None,
        delivery: DeliveryMode | str = DeliveryMode.AT_LEAST_ONCE,
        queue: str = "default",
        priority: int = 0,
    ) -> StepRef:
        """Add a step and return its reference (checked as a whole by :meth:`definition`)."""
        edges = _edges(after)
        mapped = map_over.name if isinstance(map_over, StepRef) else map_over
        where = f"steps[{len(self._steps)}]"
        if isinstance(retry, Mapping):
            retry = _parse_retry(retry, f"{where}.retry")
        elif retry is not None and not isinstance(retry, RetryPolicy):
            raise ValidationError(f"{where}.retry", "must be a Retry(...) or a retry object")
        self._steps.append(
            StepSpec(
                name=name,
                task=task,
                target=None if target is None else dict(target),
                payload=payload,
                after=edges,
                rule=_enum(TriggerRule, rule, f"steps[{len(self._steps)}].rule"),
                map_over=mapped,
                retry=retry,
                timeout=None if timeout is None else float(timeout),
                delivery=_enum(DeliveryMode, delivery, f"steps[{len(self._steps)}].delivery"),
                queue=queue,
                priority=priority,
            )
        )
        return StepRef(name)

    def definition(self, limits: WorkflowLimits | None = None) -> WorkflowDefinition:
        """The validated definition (raises :class:`~duetime.errors.ValidationError`)."""
        return validate(self.name, self._steps, limits or WorkflowLimits())

    def document(self) -> dict[str, JSON]:
        return self.definition().document()


def _edges(after: Parents) -> tuple[Edge, ...]:
    items: Iterable[StepRef | Edge | str]
    items = [after] if isinstance(after, StepRef | Edge | str) else after
    edges: list[Edge] = []
    for item in items:
        if isinstance(item, Edge):
            edges.append(item)
        elif isinstance(item, StepRef):
            edges.append(Edge(item.name))
        else:
            edges.append(Edge(item))
    return tuple(edges)


def _enum(kind: type[_E], value: object, where: str) -> _E:
    return enum_value(kind, value, where, "must be one of {allowed}, not {value}")


# --- the JSON document ----------------------------------------------------------------------

_STEP_KEYS = frozenset(
    {
        "name", "task", "target", "payload", "after", "rule", "map_over", "retry", "timeout",
        "delivery", "queue", "priority",
    }
)  # fmt: skip
_RETRY_KEYS = ("max_attempts", "backoff_base", "backoff_factor", "backoff_cap")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")


def is_workflow_name(value: object) -> bool:
    """Whether ``value`` can name a workflow or a step (anything else names none)."""
    return isinstance(value, str) and _NAME.match(value) is not None


def parse(document: object, limits: WorkflowLimits | None = None) -> WorkflowDefinition:
    """A workflow document (``{"name": …, "steps": [{…}, …]}``) as a validated definition.
    Raises :class:`~duetime.errors.ValidationError` naming where (``steps[2].after[0]``)."""
    limits = limits or WorkflowLimits()
    if not isinstance(document, Mapping):
        raise ValidationError("workflow", "must be an object with name and steps")
    unknown = set(document) - {"name", "steps"}
    if unknown:
        raise ValidationError("workflow", f"unknown field(s): {', '.join(sorted(unknown))}")
    steps = document.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ValidationError("steps", "must be a non-empty list of steps")
    if len(steps) > limits.max_steps:
        raise ValidationError(
            "steps", f"{len(steps)} steps; a workflow has at most {limits.max_steps}"
        )
    specs = [_parse_step(raw, f"steps[{i}]") for i, raw in enumerate(steps)]
    return validate(document.get("name"), specs, limits)


def _parse_step(raw: object, where: str) -> StepSpec:
    if not isinstance(raw, Mapping):
        raise ValidationError(where, "must be an object")
    unknown = set(raw) - _STEP_KEYS
    if unknown:
        raise ValidationError(where, f"unknown field(s): {', '.join(sorted(unknown))}")
    after = raw.get("after", [])
    if isinstance(after, str | Mapping):
        after = [after]
    if not isinstance(after, list):
        raise ValidationError(f"{where}.after", "must be a list of step names or edges")
    edges = tuple(_parse_edge(item, f"{where}.after[{i}]") for i, item in enumerate(after))
    target = raw.get("target")
    if target is not None and not isinstance(target, dict):
        raise ValidationError(f"{where}.target", "must be an object")
    timeout = raw.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValidationError(f"{where}.timeout", "must be a positive number of seconds")
    priority = raw.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError(f"{where}.priority", "must be an integer")
    queue = raw.get("queue", "default")
    if not isinstance(queue, str) or not queue:
        raise ValidationError(f"{where}.queue", "must be a non-empty string")
    return StepSpec(
        name=raw.get("name"),  # type: ignore[arg-type]  # checked by validate
        task=raw.get("task"),
        target=target,
        payload=raw.get("payload"),
        after=edges,
        rule=_enum(TriggerRule, raw.get("rule", "all"), f"{where}.rule"),
        map_over=raw.get("map_over"),
        retry=_parse_retry(raw.get("retry"), f"{where}.retry"),
        timeout=None if timeout is None else float(timeout),
        delivery=_enum(DeliveryMode, raw.get("delivery", "at_least_once"), f"{where}.delivery"),
        queue=queue,
        priority=priority,
    )


def _parse_edge(item: object, where: str) -> Edge:
    if isinstance(item, str):
        return Edge(item)
    if not isinstance(item, Mapping) or set(item) - {"step", "on"} or "step" not in item:
        raise ValidationError(where, 'must be a step name or {"step": name, "on": condition}')
    step = item["step"]
    if not isinstance(step, str):
        raise ValidationError(f"{where}.step", "must be a step name")
    on = item.get("on", "on_success")
    if isinstance(on, str) and not on.startswith("on_"):
        on = f"on_{on}"  # "success", "failure", "finished" read as well
    return Edge(step, _enum(Condition, on, f"{where}.on"))


def _parse_retry(raw: object, where: str) -> RetryPolicy | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValidationError(where, "must be an object")
    unknown = set(raw) - set(_RETRY_KEYS)
    if unknown:
        raise ValidationError(where, f"unknown field(s): {', '.join(sorted(unknown))}")
    attempts = raw.get("max_attempts", 3)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        raise ValidationError(f"{where}.max_attempts", "must be an integer from 1 to 1000")
    numbers: dict[str, float] = {}
    for key, default in (("backoff_base", 1.0), ("backoff_factor", 2.0), ("backoff_cap", 600.0)):
        value = raw.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ValidationError(f"{where}.{key}", "must be a non-negative number")
        numbers[key] = float(value)
    return RetryPolicy(
        max_attempts=attempts,
        backoff_base=numbers["backoff_base"],
        backoff_factor=numbers["backoff_factor"],
        backoff_cap=numbers["backoff_cap"],
    )


# --- validation -------------------------------------------------------------------------------


def validate(name: object, steps: Sequence[StepSpec], limits: WorkflowLimits) -> WorkflowDefinition:
    """Check a workflow as a whole: its name, unique step names, each step's task or target,
    known parents, ``map_over`` among the parents' successes, no cycle (the error names one),
    and the step limit. Returns the definition with steps in topological order (the given
    order where it already is one)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValidationError(
            "name", "must be 1-100 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
        )
    if not steps:
        raise ValidationError("steps", "a workflow needs at least one step")
    if len(steps) > limits.max_steps:
        raise ValidationError(
            "steps", f"{len(steps)} steps; a workflow has at most {limits.max_steps}"
        )
    seen: dict[str, int] = {}
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(step.name, str) or not _NAME.match(step.name):
            raise ValidationError(f"{where}.name", "must be 1-100 letters, digits, '_', '.' or '-'")
        if step.name in seen:
            raise ValidationError(
                f"{where}.name",
                f"duplicate step name {step.name!r} (also steps[{seen[step.name]}])",
            )
        seen[step.name] = i
        _check_work(step, where, limits)
    checked = [_with_map_edge(step, f"steps[{i}]", seen) for i, step in enumerate(steps)]
    ordered = _topological(checked)
    return WorkflowDefinition(name=name, steps=tuple(ordered))


PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
"""A step's priority, as a job's (registration.PRIORITY_MIN/MAX)."""


def _check_work(step: StepSpec, where: str, limits: WorkflowLimits) -> None:
    if step.target is not None:
        if step.task is not None:
            raise ValidationError(f"{where}.task", "give either task or target, not both")
        if step.target.get("type") == "workflow":
            raise ValidationError(f"{where}.target", "a step cannot start a workflow")
    elif not isinstance(step.task, str) or not step.task:
        raise ValidationError(f"{where}.task", "must name a task (or give a target)")
    elif step.task == WORKFLOW_TASK:
        raise ValidationError(f"{where}.task", f"{WORKFLOW_TASK} cannot be a step's task")
    elif len(step.task) > 200 or not step.task.isprintable():
        raise ValidationError(f"{where}.task", "must be 1-200 printable characters")
    _json.encode_payload(step.payload, limit=limits.max_payload_bytes, field=f"{where}.payload")
    if (
        isinstance(step.priority, bool)
        or not isinstance(step.priority, int)
        or not PRIORITY_MIN <= step.priority <= PRIORITY_MAX
    ):
        raise ValidationError(
            f"{where}.priority", f"must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}"
        )
    queue = step.queue
    if not isinstance(queue, str) or not 0 < len(queue) <= 100 or not queue.isprintable():
        raise ValidationError(f"{where}.queue", "must be 1-100 printable characters")
    if step.timeout is not None and (
        isinstance(step.timeout, bool)
        or not isinstance(step.timeout, int | float)
        or not math.isfinite(step.timeout)
        or step.timeout <= 0
    ):
        raise ValidationError(f"{where}.timeout", "must be a positive number of seconds")
    if step.rule is not TriggerRule.ALL and not step.after:
        raise ValidationError(
            f"{where}.rule", f"a step without parents starts at once: rule {step.rule} is moot"
        )


def _with_map_edge(step: StepSpec, where: str, names: Mapping[str, int]) -> StepSpec:
    parents: set[str] = set()
    for j, edge in enumerate(step.after):
        if edge.parent not in names:
            raise ValidationError(f"{where}.after[{j}]", f"unknown step {edge.parent!r}")
        if edge.parent == step.name:
            raise ValidationError(f"{where}.after[{j}]", f"step {step.name!r} cannot follow itself")
        if edge.parent in parents:
            raise ValidationError(
                f"{where}.after[{j}]", f"{edge.parent!r} is listed twice; give one edge a parent"
            )
        parents.add(edge.parent)
    if step.rule is TriggerRule.NONE_FAILED and any(
        e.condition is not Condition.ON_SUCCESS for e in step.after
    ):
        raise ValidationError(
            f"{where}.rule", "none_failed counts parents' failures: its edges must be on_success"
        )
    if step.map_over is None:
        return step
    if not isinstance(step.map_over, str) or step.map_over not in names:
        raise ValidationError(f"{where}.map_over", f"unknown step {step.map_over!r}")
    mapped = next((e for e in step.after if e.parent == step.map_over), None)
    if mapped is None:
        return replace(step, after=(*step.after, Edge(step.map_over)))
    if mapped.condition is not Condition.ON_SUCCESS:
        raise ValidationError(
            f"{where}.map_over",
            f"a mapped step needs {step.map_over!r}'s result: its edge must be on_success",
        )
    return step


def _topological(steps: list[StepSpec]) -> list[StepSpec]:
    """Steps ordered parents first (stable: the given order where allowed); raises on a cycle,
    naming it (``a → b → a``)."""
    by_name = {s.name: s for s in steps}
    state: dict[str, int] = {}  # 1: on the current path, 2: placed
    ordered: list[StepSpec] = []
    for root in steps:
        if state.get(root.name) == 2:
            continue
        stack: list[tuple[str, int]] = [(root.name, 0)]
        path: list[str] = [root.name]
        state[root.name] = 1
        while stack:
            name, i = stack[-1]
            parents = by_name[name].parents
            if i < len(parents):
                stack[-1] = (name, i + 1)
                parent = parents[i]
                if state.get(parent) == 1:
                    cycle = [*path[path.index(parent) :], parent]
                    raise ValidationError("steps", f"cycle: {' → '.join(reversed(cycle))}")
                if state.get(parent) is None:
                    state[parent] = 1
                    stack.append((parent, 0))
                    path.append(parent)
                continue
            stack.pop()
            path.pop()
            state[name] = 2
            ordered.append(by_name[name])
    return ordered
