"""The flat API, listed once: each name is a service's method (``app.schedule`` is
``app.jobs.schedule``). :class:`~duetime.app.AsyncApp` and :class:`~duetime.app.App` both
inherit it; on ``App`` each name is the sync service's mirror (see ``app/_forward.py``).
``runs(...)`` and ``keys(...)`` are no flat names: they are the services themselves, called."""

from __future__ import annotations

from duetime.app._forward import forward, operation
from duetime.app.bulk import Bulk
from duetime.app.jobs import Jobs
from duetime.app.keys import Keys
from duetime.app.lifecycle import Lifecycle
from duetime.app.monitoring import Monitoring
from duetime.app.runs import Runs
from duetime.app.tenants import Tenants


class FlatOperations:
    """The front hall's flat names (a base of both fronts; it holds no state)."""

    __slots__ = ()

    schedule = operation("jobs", Jobs.schedule)
    schedule_spec = operation("jobs", Jobs.schedule_spec)
    update_job = operation("jobs", Jobs.update_job)
    get = operation("jobs", Jobs.get)
    pause = operation("jobs", Jobs.pause)
    resume = operation("jobs", Jobs.resume)
    cancel = operation("jobs", Jobs.cancel)
    delete = operation("jobs", Jobs.delete)
    trigger = operation("jobs", Jobs.trigger)
    trigger_run = operation("jobs", Jobs.trigger_run)
    preview = forward("jobs", Jobs.preview)  # no I/O: the same function on both fronts
    preview_job = operation("jobs", Jobs.preview_job)
    next_fires = operation("jobs", Jobs.next_fires)
    sync = operation("lifecycle", Lifecycle.sync)
    job_history = operation("lifecycle", Lifecycle.history)
    pause_on_failure = operation("lifecycle", Lifecycle.pause_on_failure)
    schedule_many = operation("bulk", Bulk.schedule_many)
    run = operation("runs", Runs.get)
    attempts = operation("runs", Runs.attempts)
    skips = operation("runs", Runs.skips)
    dead_letters = operation("runs", Runs.dead_letters)
    replay = operation("runs", Runs.replay)
    cancel_run = operation("runs", Runs.cancel)
    resolve_run = operation("runs", Runs.resolve)
    webhook_secret = operation("tenants", Tenants.webhook_secret)
    rotate_webhook_secret = operation("tenants", Tenants.rotate_webhook_secret)
    tenant_limits_set = operation("tenants", Tenants.limits_set)
    tenant_limits_get = operation("tenants", Tenants.limits_get)
    tenant_limits_list = operation("tenants", Tenants.limits_list)
    tenant_stats = operation("tenants", Tenants.stats)
    tenant_alert_webhooks_set = operation("tenants", Tenants.alert_webhooks_set)
    tenant_alert_webhooks = operation("tenants", Tenants.alert_webhooks)
    create_key = operation("keys", Keys.create)
    revoke_key = operation("keys", Keys.revoke)
    authenticate = operation("keys", Keys.authenticate)
    nodes = operation("monitoring", Monitoring.nodes)
    breakers = operation("monitoring", Monitoring.breakers)
    cluster_stats = operation("monitoring", Monitoring.cluster_stats)
    timeline = operation("monitoring", Monitoring.timeline)
    incidents = operation("monitoring", Monitoring.incidents)
    explain = operation("monitoring", Monitoring.explain)

    # Last in the class: from here on, ``list`` in this class body names this attribute (the
    # fronts' own bodies, where their annotations are, still see the builtin).
    list = operation("jobs", Jobs.find, deprecated="app.jobs.find(...)")
