"""duetime: a distributed job scheduler for Python.

Register work once — run now, at an instant, on a cron schedule in a time zone, or every
interval — and it fires on time, one run per occurrence, on any number of machines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from duetime._config import Settings
from duetime._lazy import lazy_names

# The public API's re-exports; app/ and api/ import the same names from _types for their own use.
from duetime._types import (
    Attempt,
    AttemptOutcome,
    DeliveryMode,
    Job,
    JobStatus,
    MisfirePolicy,
    Occurrence,
    OverlapPolicy,
    Page,
    Run,
    RunState,
    Schedule,
    ScheduleKind,
    TenantLimits,
    TenantQueueStats,
)
from duetime._types import RetryPolicy as Retry
from duetime.errors import (
    Conflict,
    ConnectError,
    DuetimeError,
    NotFound,
    Permanent,
    RetryLater,
    SchemaError,
    UnsupportedFeature,
    UsageError,
    ValidationError,
)

if TYPE_CHECKING:
    from duetime.app import App, AsyncApp
    from duetime.targets.context import RunContext
    from duetime.workflows.definition import Workflow

__version__ = "0.1.0"

# Imported on first use: ``import duetime`` (the CLI's start, the pytest plugin's load in
# every test session of a project that installs duetime) then costs the value types only.
_LAZY = {
    "App": "duetime.app",
    "AsyncApp": "duetime.app",
    "RunContext": "duetime.targets.context",
    "Workflow": "duetime.workflows.definition",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "App",
    "AsyncApp",
    "Attempt",
    "AttemptOutcome",
    "Conflict",
    "ConnectError",
    "DeliveryMode",
    "DuetimeError",
    "Job",
    "JobStatus",
    "MisfirePolicy",
    "NotFound",
    "Occurrence",
    "OverlapPolicy",
    "Page",
    "Permanent",
    "Retry",
    "RetryLater",
    "Run",
    "RunContext",
    "RunState",
    "Schedule",
    "ScheduleKind",
    "SchemaError",
    "Settings",
    "TenantLimits",
    "TenantQueueStats",
    "UnsupportedFeature",
    "UsageError",
    "ValidationError",
    "Workflow",
]
