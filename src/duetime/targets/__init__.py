"""How a run is executed: Python functions registered by name (HTTP and others later)."""

from duetime.targets.python import BUILTIN_TASKS, TaskDef, TaskRegistry, invoke

__all__ = ["BUILTIN_TASKS", "TaskDef", "TaskRegistry", "invoke"]
