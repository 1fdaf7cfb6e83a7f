"""Python function targets: a registry of tasks by name, and the built-in tasks.

A task is called as ``fn(ctx, payload)``, ``fn(ctx)`` or ``fn()`` depending on how many
parameters it takes; async functions are awaited, sync ones run in the worker's thread pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from duetime.errors import Permanent, ValidationError
from duetime.targets.context import RunContext
from duetime.targets.http import HTTP_TASK
from duetime.workflows.definition import WORKFLOW_TASK

TaskFunc = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class TaskDef:
    name: str
    func: TaskFunc
    is_async: bool
    arity: int
    """How many positional arguments it takes: 0, 1 (ctx) or 2 (ctx, payload)."""

    @classmethod
    def of(cls, name: str, func: TaskFunc) -> TaskDef:
        if not name or len(name) > 200 or not name.isprintable():
            raise ValidationError("task", f"name must be 1-200 printable characters: {name!r}")
        try:
            params = [
                p
                for p in inspect.signature(func).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):
            params = []
        arity = min(len(params), 2)
        return cls(name, func, inspect.iscoroutinefunction(func), arity)


class TaskRegistry:
    """Task names → functions. Built-in tasks are always present."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskDef] = {t.name: t for t in BUILTIN_TASKS}

    def register(self, name: str, func: TaskFunc) -> TaskDef:
        if name in self._tasks and self._tasks[name].func is not func:
            raise ValidationError("task", f"{name!r} is already registered to another function")
        task = TaskDef.of(name, func)
        self._tasks[name] = task
        return task

    def get(self, name: str) -> TaskDef | None:
        return self._tasks.get(name)

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks


class TaskThread:
    """One call of a sync task, submitted to ``executor`` in a copy of the caller's context (its
    log lines are about the run, as an async task's). Await :attr:`result` for its outcome.
    Cancelling the asyncio side does not stop the thread: after a cancel, :meth:`abandon` says
    whether the function is running or has run (then await :meth:`exited`: a replaced run
    waits for it, decision 0016) or will never run. The pool's future already knows both, so
    this costs nothing per call over ``run_in_executor``."""

    __slots__ = ("_future", "result")

    def __init__(self, executor: Executor, func: Callable[..., Any], *args: Any) -> None:
        context = contextvars.copy_context()
        self._future: Future[Any] = executor.submit(context.run, func, *args)
        self.result: asyncio.Future[Any] = asyncio.wrap_future(self._future)
        """The call's outcome; cancelling it cancels a call that has not begun."""

    def abandon(self) -> bool:
        """The attempt was cancelled: True if the function is running or has run (await
        :meth:`exited`), False if it had not begun (it never will)."""
        return not self._future.cancel()

    async def exited(self) -> None:
        """Return once the function has returned (or raised). Cancelling this wait leaves the
        thread running."""
        if self._future.done():
            return
        loop = asyncio.get_running_loop()
        returned = asyncio.Event()
        self._future.add_done_callback(lambda _: loop.call_soon_threadsafe(returned.set))
        await returned.wait()


def start(
    task: TaskDef, ctx: RunContext, executor: Executor
) -> tuple[Awaitable[Any], TaskThread | None]:
    """Call ``task`` for ``ctx``: the awaitable of its outcome and, for a sync task (run in
    ``executor``), its :class:`TaskThread`."""
    args = (ctx, ctx.payload)[: task.arity]
    if task.is_async:
        return task.func(*args), None
    thread = TaskThread(executor, task.func, *args)
    return thread.result, thread


async def invoke(task: TaskDef, ctx: RunContext, executor: Executor) -> Any:
    """Call ``task`` for ``ctx`` and return its result. A sync task runs in ``executor``."""
    call, _ = start(task, ctx, executor)
    return await call


# --- built-in tasks ---------------------------------------------------------------------------


async def _noop(ctx: RunContext, payload: Any) -> None:
    """Does nothing; for tests and benchmarks."""


async def _sleep(ctx: RunContext, payload: Any) -> None:
    """Sleeps ``payload["seconds"]``."""
    seconds = payload.get("seconds", 1) if isinstance(payload, dict) else 1
    if not isinstance(seconds, int | float) or seconds < 0:
        raise Permanent(f"duetime.sleep needs a non-negative number of seconds, got {seconds!r}")
    await asyncio.sleep(seconds)


class DemoFailure(RuntimeError):
    """Raised by ``duetime.fail``."""


async def _fail(ctx: RunContext, payload: Any) -> None:
    """Fails ``payload["times"]`` times then succeeds; ``{"always": true}`` never succeeds."""
    payload = payload if isinstance(payload, dict) else {}
    if payload.get("always"):
        raise DemoFailure(f"duetime.fail always fails (attempt {ctx.attempt})")
    times = payload.get("times", 1)
    if ctx.attempt <= times:
        raise DemoFailure(f"duetime.fail failing attempt {ctx.attempt} of {times}")


async def _http(ctx: RunContext, payload: Any) -> None:
    """Runs of HTTP-target jobs go to the worker's HTTP executor; this only runs for a run that
    names the task without a target."""
    raise Permanent("duetime.http runs need an HTTP target; this run has none")


async def _workflow(ctx: RunContext, payload: Any) -> None:
    """A workflow job's run: succeeding is its whole work — the store starts the workflow's
    instance in the transaction that records it (store/_sql_workflows.py)."""


BUILTIN_TASKS: tuple[TaskDef, ...] = (
    TaskDef.of("duetime.noop", _noop),
    TaskDef.of("duetime.sleep", _sleep),
    TaskDef.of("duetime.fail", _fail),
    TaskDef.of(HTTP_TASK, _http),
    TaskDef.of(WORKFLOW_TASK, _workflow),
)
BUILTIN_NAMES = frozenset(t.name for t in BUILTIN_TASKS)
