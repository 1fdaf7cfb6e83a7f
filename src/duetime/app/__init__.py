"""The Python API, the front hall: :class:`AsyncApp` for async code, :class:`App` for plain
synchronous code.

Both hold settings, a store and a task registry; both open and close the store and hand out
one typed service per concern:

- ``app.jobs`` (:class:`Jobs`): schedule (create-or-update by tenant and name, so re-running a
  program that declares its jobs is safe), update_job (a partial update, atomic), get, find,
  pause, resume, cancel, delete, trigger, preview;
- ``app.runs`` (:class:`Runs`): find (also ``app.runs(...)``), get, attempts, skips, dead
  letters, replay, cancel;
- ``app.bulk`` (:class:`Bulk`): bulk registration;
- ``app.tenants`` (:class:`Tenants`) and ``app.keys`` (:class:`Keys`): fairness limits, queue
  stats, the webhook secret; API keys;
- ``app.monitoring`` (:class:`Monitoring`): cluster stats, timelines, incidents, nodes, explain;
- ``app.lifecycle`` (:class:`Lifecycle`): a job's history, pause on failure, declared jobs
  kept in sync (``app.sync``).

Every operation is also a flat name on the app (``app.schedule``, ``app.trigger``, …), the
same method. ``AsyncApp`` also makes the scheduler and worker loops. ``App`` runs an
``AsyncApp`` on a private event-loop thread, with the same signatures, blocking.
"""

from duetime.app.async_app import AsyncApp
from duetime.app.bulk import BULK_CHUNK, BULK_FIRST_BATCH, Bulk
from duetime.app.jobs import Jobs
from duetime.app.keys import API_KEY_PREFIX, Keys, hash_api_key
from duetime.app.lifecycle import Lifecycle, SyncPlan
from duetime.app.monitoring import Monitoring
from duetime.app.runs import Runs
from duetime.app.sync_app import (
    App,
    SyncBulk,
    SyncJobs,
    SyncKeys,
    SyncMonitoring,
    SyncRuns,
    SyncTenants,
)
from duetime.app.tenants import Tenants

# Types in the app's signatures, named here for its callers (the CLI and the REST API import
# nothing below the app): what worker(on_start=…, on_complete=…) listeners are given, and
# what remote_workers().complete takes; what update_job takes.
from duetime.registration import JobChanges, RetryChanges
from duetime.store.base import ClaimedRun, RunCompletion
from duetime.worker.remote import RemoteOutcome

__all__ = [
    "API_KEY_PREFIX",
    "BULK_CHUNK",
    "BULK_FIRST_BATCH",
    "App",
    "AsyncApp",
    "Bulk",
    "ClaimedRun",
    "JobChanges",
    "Jobs",
    "Keys",
    "Lifecycle",
    "Monitoring",
    "RemoteOutcome",
    "RetryChanges",
    "RunCompletion",
    "Runs",
    "SyncBulk",
    "SyncJobs",
    "SyncKeys",
    "SyncMonitoring",
    "SyncPlan",
    "SyncRuns",
    "SyncTenants",
    "Tenants",
    "hash_api_key",
]
