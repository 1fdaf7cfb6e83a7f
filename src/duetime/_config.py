"""Settings with defaults, validated when constructed; every field can come from ``DUETIME_*``.

The defaults are the table in docs/architecture.md ("Defaults"). ``Settings.from_env()`` reads
``DUETIME_<FIELD>`` (upper case) for each field, e.g. ``DUETIME_LEASE_TTL=60``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace
from typing import Any

from duetime._durations import MAX_SECONDS
from duetime.errors import ValidationError

DEFAULT_DATABASE_URL = "duetime.db"


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    """A SQLite path (or ``sqlite:///path``) or a ``postgresql://`` URL."""
    pgbouncer: str = ""
    """``transaction`` when ``database_url`` is PgBouncer in transaction pooling mode (no
    prepared statements, no session state); empty (or ``session``) otherwise
    (docs/howto/pgbouncer.md)."""
    listen_url: str = ""
    """A direct ``postgresql://`` URL to hear notifications on (new runs, cancellations, API key
    news); empty: ``database_url``, or polling under ``pgbouncer=transaction``."""
    replica_url: str = ""
    """A ``postgresql://`` URL of a streaming replica of the database; the API reads its list
    and history pages and its metrics gauges there, read-only (docs/howto/read-replica.md);
    empty: everything reads the primary."""
    database_pool_size: int = 10
    """The most pooled PostgreSQL connections one store (one process) opens."""
    database_checkout_wait: float = 30.0
    """Seconds a PostgreSQL call waits for a pooled connection (the database unreachable, or
    every connection busy) before it fails as unreachable: the loops retry, the REST API
    answers 503 (docs/howto/failover.md)."""
    lease_ttl: float = 30.0
    heartbeat_interval: float = 10.0
    reaper_interval: float = 5.0
    scheduler_tick: float = 1.0
    scheduler_horizon: float = 10.0
    scheduler_batch: int = 500
    worker_lookahead: float = 1.0
    worker_concurrency: int = 100
    """The most runs a worker executes at once: a ceiling, not a size. A worker claims for 10
    slots at first and for twice as many (up to this) after each claim that came back full
    while its slots were all taken; it claims ahead of its free slots only what they finish
    within ``worker_claim_ahead`` claim round trips (worker/claim_ahead.py)."""
    worker_batch: int = 500
    """The most runs one claim takes: a ceiling. A claim takes at most 100 at first, twice as
    many after each claim that came back full, half as many after runs claimed ahead waited
    for a slot (worker/claim_ahead.py)."""
    worker_claim_ahead: float = 2.0
    """Claim round trips' worth of work a worker may hold beyond its free slots, from the
    measured time a run holds a slot (worker/claim_ahead.py); 0 claims only free slots."""
    worker_poll_interval: float = 1.0
    max_attempts: int = 3
    backoff_base: float = 1.0
    backoff_factor: float = 2.0
    backoff_cap: float = 600.0
    misfire_grace: float = 60.0
    backfill_rate: float = 10.0
    """Runs of one backfill (``duetime jobs backfill``) released per second: their
    ``available_at`` is spaced by ``1 / backfill_rate`` (docs/scheduling.md, "Backfill")."""
    payload_limit: int = 64 * 1024
    shutdown_grace: float = 30.0
    startup_wait: float = 0.0
    """How long opening the store keeps retrying, with backoff, while the database is
    unreachable; 0 fails at once. ``duetime scheduler``/``worker``/``up`` default to 600 s."""
    retention_days: float = 90.0
    retention_duty: float = 0.25
    """The largest fraction of the time the leader's history retention may be busy: a pass
    that stopped at its cap (a backlog) is followed after a pause of at least 1 s and at least
    ``(1 - duty) / duty`` times its own length, not after the usual minute
    (maintenance/retention.py). 1 retires back to back (1 s apart)."""
    leader_ttl: float = 3.0
    """How long a leadership lasts unless renewed (renewed every third of it): a dead leader
    is replaced within ``4/3`` of it (docs/reliability.md)."""
    partition_lease_ttl: float = 3.0
    """How long a scheduler's partition leases last unless renewed (renewed every third of
    it): a dead scheduler's partitions are taken over within ``4/3`` of it."""
    worker_stale_after: float = 60.0
    """A worker that has not heartbeated for this long no longer counts as serving its tasks."""
    http_allow_hosts: str = ""
    """Where HTTP targets may send, comma-separated IPs, CIDRs, host names or ``public``; empty
    means public addresses only. Link-local addresses are never allowed (docs/webhooks.md)."""
    api_rate_limit: float = 100.0
    """REST API requests per second per tenant, per API process (a token bucket holding one
    second's worth); 0 turns the limit off."""
    api_allowed_hosts: str = ""
    """Host names (or addresses) an *open* API (``duetime up``, ``server --no-auth``) answers
    besides loopback ones, comma-separated; ``*`` answers any (turns the DNS-rebinding guard
    off). Ignored when API keys are required (docs/api.md)."""
    api_max_body_bytes: int = 1024 * 1024
    """The largest request body the API reads (413 beyond); raised to fit a payload and
    metadata of ``payload_limit`` each when that is larger."""
    api_auth_failures: int = 20
    """Failed authentications (unknown or revoked keys) a client address may make per minute
    before its requests with a key get 429; 0 turns the limit off."""
    api_keep_alive: float = 5.0
    """Seconds an idle API connection (before its first request or between requests) is kept."""
    api_header_timeout: float = 10.0
    """Seconds a request's line and headers have to arrive, from the connection's opening or
    the previous response; then the connection is closed."""
    api_body_timeout: float = 30.0
    """Seconds a request's body has to arrive once its headers have; then the connection is
    closed."""
    api_max_connections: int = 1000
    """Open API connections plus requests in progress beyond which requests get 503; 0: no
    limit."""
    priority_aging: float = 60.0
    """Seconds of waiting that raise a due run by one priority step (docs/fairness.md); 0 turns
    aging off (strict priority)."""
    priority_aging_cap: int = 1000
    """The highest priority waiting can raise a run to; runs above it do not age. The default,
    the top of the range (-1000..1000), lets every run reach the most urgent and then go oldest
    first, so none starves."""
    alert_webhooks: str = ""
    """Comma-separated URLs that receive alerts (JSON, signed like webhook targets); alerts
    always go to the log too (docs/observability.md)."""
    alert_secret: str = ""
    """The key alert webhooks are signed with; empty: tenant ``default``'s webhook secret."""
    alert_interval: float = 10.0
    """How often the leader evaluates alerts."""
    alert_behind_after: float = 60.0
    """``scheduler_behind`` fires when due work (a run of a served task, or an occurrence not
    materialized) has waited longer than this."""
    alert_stuck_factor: float = 3.0
    """``run_stuck`` fires when a run has been running longer than this many times its job's
    expected duration (default: the p95 of its last 20 successful runs) …"""
    alert_stuck_min: float = 60.0
    """… and at least this long."""
    alert_lost_leases: int = 2
    """``run_stuck`` also fires when a run lost its lease this many times."""
    alert_no_worker_after: float = 30.0
    """``no_worker`` fires when runs of a task nobody serves have been due this long."""
    alert_dead_lookback: float = 86400.0
    """Dead runs that died within this window are alerted (older ones when the leader first
    starts are not)."""
    workflow_max_steps: int = 1000
    """Static steps a workflow definition may have."""
    workflow_max_mapped: int = 10_000
    """Items a mapped step may run over (a longer list fails the step)."""
    result_max_bytes: int = 1024 * 1024
    """Largest result (JSON) a run keeps; a workflow step over it fails, a job's is dropped."""
    commands: str = ""
    """The commands this worker may run for command targets: JSON (``{"name": {"argv": […],
    …}}``) or the path of a JSON file (targets/command.py, docs/targets.md); empty: none."""
    breaker_threshold: int = 5
    """Consecutive failures of one target host or command that open its circuit breaker."""
    breaker_cooldown: float = 30.0
    """Seconds an open breaker holds its runs back before one probe run goes through."""
    brokers: str = ""
    """The broker connections this worker serves for broker targets: JSON (``{"name":
    {"type": "redis", "url": …}}``) or the path of a JSON file (targets/brokers/config.py,
    docs/brokers.md); empty: none. Its relay publishes their outbox messages."""
    run_events: str = ""
    """Run events to publish through the outbox (docs/brokers.md, "Run events"): JSON
    (``{"target": {"type": "nats", "connection": …, "subject": …}, "events": […], "tenants":
    […]}``) or the path of a JSON file (targets/brokers/events.py); empty: none. Every process
    that starts, ends or skips runs writes them in the same transaction."""
    outbox_lease: float = 30.0
    """Seconds a relay's claimed outbox rows stay hidden from other relays: a relay that dies
    mid-publish leaves them to be published again (same message ids) this long after."""
    alert_outbox_after: float = 60.0
    """``outbox_backlog`` fires when the oldest unpublished broker message is this old."""
    alert_breaker_open_after: float = 300.0
    """``breaker_open`` fires when a circuit breaker has been open (or half-open) this long."""
    metrics_auth: str = "none"
    """Who may read the API's ``/metrics`` (its labels name every tenant): ``none`` needs no key
    (Prometheus scrapes it as is); ``admin`` needs an admin API key, 401 without one, 403 for
    another role (docs/observability.md). Checked when the API starts."""

    def __post_init__(self) -> None:
        positive = (
            "lease_ttl heartbeat_interval reaper_interval scheduler_tick worker_lookahead "
            "worker_poll_interval backoff_base backoff_factor backoff_cap shutdown_grace "
            "retention_days worker_stale_after leader_ttl partition_lease_ttl outbox_lease "
            "database_checkout_wait"
        ).split()
        for name in positive:
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValidationError(name, f"must be a finite number > 0, got {value!r}")
        for name in (
            "scheduler_batch",
            "worker_concurrency",
            "worker_batch",
            "max_attempts",
            "payload_limit",
            "workflow_max_steps",
            "workflow_max_mapped",
            "result_max_bytes",
            "breaker_threshold",
            "database_pool_size",
        ):
            if not getattr(self, name) >= 1:
                raise ValidationError(name, f"must be >= 1, got {getattr(self, name)!r}")
        for name in (
            "alert_interval",
            "alert_behind_after",
            "alert_stuck_factor",
            "alert_no_worker_after",
            "alert_dead_lookback",
            "breaker_cooldown",
            "alert_breaker_open_after",
            "alert_outbox_after",
        ):
            if not getattr(self, name) > 0:
                raise ValidationError(name, f"must be > 0, got {getattr(self, name)!r}")
        if not self.alert_stuck_min >= 0 or not self.alert_lost_leases >= 1:
            raise ValidationError("alert_stuck_min", "must be >= 0 (and alert_lost_leases >= 1)")
        if not 0 <= self.worker_claim_ahead <= 100:
            raise ValidationError(
                "worker_claim_ahead", f"must be 0 to 100, got {self.worker_claim_ahead!r}"
            )
        if not self.priority_aging >= 0:
            raise ValidationError("priority_aging", f"must be >= 0, got {self.priority_aging!r}")
        if not -1000 <= self.priority_aging_cap <= 1000:
            raise ValidationError(
                "priority_aging_cap", f"must be -1000 to 1000, got {self.priority_aging_cap!r}"
            )
        if not self.api_rate_limit >= 0:
            raise ValidationError("api_rate_limit", f"must be >= 0, got {self.api_rate_limit!r}")
        for name in ("api_keep_alive", "api_header_timeout", "api_body_timeout"):
            if not getattr(self, name) > 0:
                raise ValidationError(name, f"must be > 0, got {getattr(self, name)!r}")
        if not self.api_max_body_bytes >= 1024:
            raise ValidationError(
                "api_max_body_bytes", f"must be >= 1024, got {self.api_max_body_bytes!r}"
            )
        for name in ("api_auth_failures", "api_max_connections"):
            if not getattr(self, name) >= 0:
                raise ValidationError(name, f"must be >= 0, got {getattr(self, name)!r}")
        if not 0 < self.retention_duty <= 1:
            raise ValidationError(
                "retention_duty", f"must be > 0 and <= 1, got {self.retention_duty!r}"
            )
        if not self.startup_wait >= 0:
            raise ValidationError("startup_wait", f"must be >= 0, got {self.startup_wait!r}")
        if not self.backfill_rate > 0:
            raise ValidationError("backfill_rate", f"must be > 0, got {self.backfill_rate!r}")
        if not self.scheduler_horizon >= 0:
            raise ValidationError(
                "scheduler_horizon", f"must be >= 0, got {self.scheduler_horizon!r}"
            )
        if not 0 <= self.misfire_grace <= MAX_SECONDS:
            raise ValidationError(
                "misfire_grace",
                f"must be 0 to {MAX_SECONDS:.0f} seconds (10 years), got {self.misfire_grace!r}",
            )
        if self.heartbeat_interval >= self.lease_ttl:
            raise ValidationError(
                "heartbeat_interval",
                f"({self.heartbeat_interval}s) must be shorter than lease_ttl ({self.lease_ttl}s)",
            )
        if not self.database_url:
            raise ValidationError("database_url", "must not be empty")
        if self.replica_url and not self.replica_url.startswith(("postgresql://", "postgres://")):
            raise ValidationError("replica_url", "must be a postgresql:// URL")
        if self.pgbouncer not in ("", "session", "transaction"):
            raise ValidationError(
                "pgbouncer", f"must be empty, 'session' or 'transaction', got {self.pgbouncer!r}"
            )

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``DUETIME_*`` variables, then explicit ``overrides`` (None is ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"DUETIME_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            kind = type(getattr(cls(), f.name))
            try:
                values[f.name] = kind(raw)
            except ValueError:
                raise ValidationError(
                    f"DUETIME_{f.name.upper()}", f"expected {kind.__name__}, got {raw!r}"
                ) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)
