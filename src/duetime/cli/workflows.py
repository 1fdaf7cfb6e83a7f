"""``duetime workflows …``: list, show and register workflow definitions; trigger; list
instances; an instance as a tree of its steps; cancel, retry and explain an instance
(docs/workflows.md). Every command acts through ``app.workflows``; ``--json`` prints the
shapes the REST API answers."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from duetime.app import AsyncApp
from duetime.cli._common import (
    AllowUnregisteredOption,
    DbOption,
    JsonOption,
    TenantOption,
    command_group,
    fail,
    print_json,
    with_app,
)
from duetime.cli._output import (
    clip,
    compact_json,
    parse_choice,
    parse_json_option,
    print_fields,
    print_result,
    print_rows,
    print_table,
    show_instant,
    to_jsonable,
)
from duetime.workflows.engine import WHOLE, InstanceState
from duetime.workflows.explain import StepWhy, graph_edges
from duetime.workflows.types import (
    InstanceDetail,
    StepRun,
    WorkflowInstance,
    WorkflowTrigger,
    WorkflowVersion,
)

commands = typer.Typer()
workflows = command_group(
    commands, "workflows", "Workflows (DAGs of steps): definitions, instances, explain."
)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="Workflow name.")]
InstanceArg = Annotated[str, typer.Argument(metavar="ID", help="Instance id (a UUID).")]
_SHOWN_ITEMS = 5
"""A mapped step's items that did not succeed, listed by the tree (the rest are counted)."""
T = TypeVar("T")


def _instance_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        fail(f"ID: {text!r} is not an instance id (a UUID; `duetime workflows runs` lists them)")


def _on_instance(
    instance: str,
    db: str | None,
    tenant: str,
    act: Callable[[AsyncApp, uuid.UUID], Coroutine[Any, Any, T]],
    *,
    create: bool = True,
) -> T:
    """``act(app, id)`` on the instance ``ID`` names (a bad id exits 2 before the app opens)."""
    chosen = _instance_id(instance)
    return with_app(db, tenant, lambda app: act(app, chosen), create=create)


# --- JSON shapes (those of the REST API) ------------------------------------------------------


def _version_json(v: WorkflowVersion) -> dict[str, Any]:
    return {
        "name": v.name,
        "version": v.version,
        "digest": v.digest,
        "created_at": to_jsonable(v.created_at),
        "definition": v.definition.document(),
    }


def _instance_json(i: WorkflowInstance) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(i)
    data.pop("tenant", None)
    return data


def _step_json(s: StepRun) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(s)
    data.pop("updated_at", None)
    return data


def _detail_json(d: InstanceDetail) -> dict[str, Any]:
    definition = None if d.version is None else d.version.definition
    return {
        **_instance_json(d.instance),
        "definition": None if definition is None else definition.document(),
        "edges": []
        if definition is None
        else [{"from": e.parent, "to": e.child, "on": str(e.on)} for e in graph_edges(definition)],
        "steps": [_step_json(s) for s in d.steps],
    }


def _why_json(w: StepWhy) -> dict[str, Any]:
    return {
        "step": w.step,
        "state": str(w.state),
        "why": w.why,
        "rule": str(w.rule),
        "map_over": w.map_over,
        "edges": [
            {
                "from": e.parent,
                "on": str(e.on),
                "parent_state": str(e.parent_state),
                "satisfied": e.satisfied,
            }
            for e in w.edges
        ],
    }


# --- definitions ------------------------------------------------------------------------------


@workflows.command("list")
def list_workflows(
    db: DbOption = None, tenant: TenantOption = "default", as_json: JsonOption = False
) -> None:
    """The latest version of each workflow."""
    found = with_app(db, tenant, lambda app: app.workflows.list(), create=False)
    print_rows(
        found,
        as_json,
        ["name", "version", "steps", "registered"],
        lambda v: (v.name, v.version, len(v.definition.steps), show_instant(v.created_at)),
        empty="no workflows",
        data=lambda versions: [
            {
                "name": v.name,
                "version": v.version,
                "digest": v.digest,
                "created_at": to_jsonable(v.created_at),
                "steps": len(v.definition.steps),
            }
            for v in versions
        ],
    )


@workflows.command("show")
def show_workflow(
    name: NameArg,
    version: Annotated[
        int | None,
        typer.Option("--version", min=1, max=2**31 - 1, help="A version (default: the latest)."),
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """A workflow's version: its steps and edges, and every version number."""

    async def body(app: AsyncApp) -> tuple[WorkflowVersion, list[int]]:
        return await app.workflows.get(name, version), await app.workflows.versions(name)

    found, versions = with_app(db, tenant, body, create=False)
    if as_json:
        print_json({**_version_json(found), "versions": versions})
        return
    print_fields(
        [
            ("name", found.name),
            ("version", f"{found.version} of {', '.join(map(str, versions))}"),
            ("digest", found.digest[:16]),
            ("registered", show_instant(found.created_at)),
        ]
    )
    rows = []
    for step in found.definition.steps:
        after = ", ".join(
            e.parent if str(e.condition) == "on_success" else f"{e.parent} ({e.condition})"
            for e in step.after
        )
        work = step.task or f"{(step.target or {}).get('type', 'target')} target"
        rows.append((step.name, work, after, str(step.rule), step.map_over))
    print_table(["step", "task", "after", "rule", "map over"], rows, title="steps")


@workflows.command("register")
def register_workflow(
    file: Annotated[Path, typer.Argument(metavar="FILE.json", help="The workflow document.")],
    allow_unregistered: AllowUnregisteredOption = False,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Register a workflow from its JSON document: a new version when its content changed,
    else the existing one."""
    try:
        document = json.loads(file.read_text())
    except OSError as exc:
        fail(f"FILE.json: cannot read {str(file)!r}: {exc.strerror or exc}")
    except ValueError as exc:
        fail(f"FILE.json: {str(file)!r} is not JSON ({exc})")

    async def body(app: AsyncApp) -> tuple[WorkflowVersion, bool]:
        return await app.workflows.register_version(document, allow_unregistered=allow_unregistered)

    version, created = with_app(db, tenant, body)
    if as_json:
        print_json({**_version_json(version), "created": created})
        return
    verb = "registered" if created else "unchanged:"
    typer.echo(f"{verb} workflow {version.name!r} version {version.version}")


@workflows.command("trigger")
def trigger_workflow(
    name: NameArg,
    payload: Annotated[
        str | None, typer.Option("--payload", metavar="JSON", help="The instance's input.")
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option("--idempotency-key", help="The same key never starts a second instance."),
    ] = None,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Start an instance now, through the job workflow:NAME (the first call creates it)."""
    given = parse_json_option(payload, "--payload")

    async def body(app: AsyncApp) -> WorkflowTrigger:
        return await app.workflows.trigger(name, payload=given, idempotency_key=idempotency_key)

    print_result(with_app(db, tenant, body), as_json, _say_triggered)


def _say_triggered(done: WorkflowTrigger) -> None:
    if done.run_id is None:
        typer.echo(
            f"created job {done.job_name!r}: its first run starts an instance at the "
            "scheduler's next tick"
        )
    elif done.created:
        typer.echo(f"triggered {done.job_name!r}: run {done.run_id}")
    else:
        typer.echo(f"already triggered with this key: run {done.run_id}")


# --- instances --------------------------------------------------------------------------------


@workflows.command("runs")
def list_instances(
    workflow: Annotated[str | None, typer.Option("--workflow", help="Only this workflow.")] = None,
    state: Annotated[
        str | None,
        typer.Option("--state", help="running, succeeded, failed or cancelled."),
    ] = None,
    job: Annotated[
        str | None, typer.Option("--job", help="Only those this job (id) started.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="At most.")] = 100,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Workflow instances, newest first."""
    chosen = parse_choice(state, InstanceState, "--state")
    job_id = None
    if job is not None:
        try:
            job_id = uuid.UUID(job)
        except ValueError:
            fail(f"--job: {job!r} is not a job id (a UUID)")

    async def body(app: AsyncApp) -> list[WorkflowInstance]:
        return await app.workflows.instances(
            workflow=workflow, state=chosen, job=job_id, limit=limit
        )

    print_rows(
        with_app(db, tenant, body, create=False),
        as_json,
        ["id", "workflow", "version", "state", "started", "finished", "reason"],
        lambda i: (
            str(i.id),
            i.workflow,
            i.version,
            str(i.state),
            show_instant(i.created_at),
            show_instant(i.finished_at),
            clip(i.reason or ""),
        ),
        empty="no workflow instances",
        data=lambda found: [_instance_json(i) for i in found],
    )


@workflows.command("instance")
def show_instance(
    instance: InstanceArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """An instance as a tree of its steps with their states (a mapped step's items
    summarized), runs, attempts and results."""
    detail = _on_instance(
        instance, db, tenant, lambda app, i: app.workflows.detail(i), create=False
    )
    print_result(detail, as_json, _print_tree, data=_detail_json)


def _print_tree(detail: InstanceDetail) -> None:
    console = Console(highlight=False)
    if not console.is_terminal:  # piped: one line per step, however long
        console = Console(highlight=False, width=10_000)
    console.print(instance_tree(detail))


def instance_tree(detail: InstanceDetail) -> Tree:
    """The instance as a tree: one branch per step in definition order (its parents named),
    a mapped step's items counted by state with those that did not succeed listed."""
    i = detail.instance
    head = f"{i.workflow} v{i.version}  {i.state}  {i.id}"
    if i.reason:
        head += f"  ({i.reason})"
    tree = Tree(Text(head))
    wholes = {s.step: s for s in detail.steps if s.map_index == WHOLE}
    items: dict[str, list[StepRun]] = {}
    for s in detail.steps:
        if s.map_index != WHOLE:
            items.setdefault(s.step, []).append(s)
    specs = [] if detail.version is None else list(detail.version.definition.steps)
    for spec in specs:
        row = wholes.get(spec.name)
        line = f"{spec.name}  {row.state if row else 'pending'}"
        if spec.after:
            line += "  after " + ", ".join(
                e.parent if str(e.condition) == "on_success" else f"{e.parent} ({e.condition})"
                for e in spec.after
            )
        if row is not None:
            line += _run_note(row)
        branch = tree.add(Text(line))
        if spec.name in items:
            mapped = items[spec.name]
            counts = Counter(str(s.state) for s in mapped)
            summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
            branch.add(Text(f"{len(mapped)} items: {summary}"))
            for s in [s for s in mapped if str(s.state) != "succeeded"][:_SHOWN_ITEMS]:
                branch.add(Text(f"[{s.map_index}] {s.state}{_run_note(s)}"))
    return tree


def _run_note(s: StepRun) -> str:
    note = ""
    if s.run_id is not None:
        note += f"  run {str(s.run_id)[:8]} attempt {s.attempt}"
    if s.started_at is not None and s.finished_at is not None:
        note += f"  {(s.finished_at - s.started_at).total_seconds():.3f}s"
    if s.reason:
        note += f"  — {clip(s.reason, 80)}"
    elif s.result is not None:
        note += f"  → {clip(compact_json(s.result), 60)}"
    return note


@workflows.command("cancel")
def cancel_instance(
    instance: InstanceArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Cancel a running instance: pending steps end cancelled, its step runs are cancelled
    (running ones asked to stop)."""
    print_result(
        _on_instance(instance, db, tenant, lambda app, i: app.workflows.cancel(i)),
        as_json,
        lambda done: typer.echo(f"cancelled workflow instance {done.id}"),
        data=_instance_json,
    )


@workflows.command("retry")
def retry_instance(
    instance: InstanceArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Retry a failed instance from its failures (successful steps are kept)."""
    print_result(
        _on_instance(instance, db, tenant, lambda app, i: app.workflows.retry(i)),
        as_json,
        lambda done: typer.echo(f"retrying workflow instance {done.id}: {done.state}"),
        data=_instance_json,
    )


@workflows.command("explain")
def explain_instance(
    instance: InstanceArg,
    db: DbOption = None,
    tenant: TenantOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Why each step that has not started has not: which parent, which edge, which rule."""

    async def body(app: AsyncApp, chosen: uuid.UUID) -> tuple[WorkflowInstance, list[StepWhy]]:
        return await app.workflows.instance(chosen), await app.workflows.explain(chosen)

    found, whys = _on_instance(instance, db, tenant, body, create=False)
    if as_json:
        print_json(
            {
                "instance_id": str(found.id),
                "state": str(found.state),
                "steps": [_why_json(w) for w in whys],
            }
        )
        return
    if not whys:
        typer.echo(f"every step of instance {found.id} ({found.state}) has started")
        return
    print_table(["step", "state", "why"], [(w.step, str(w.state), w.why) for w in whys])
