"""``duetime doctor``: what is wrong with a deployment, each finding with its fix.

:func:`diagnose` opens the database itself (not through :class:`~duetime.app.AsyncApp`, which
refuses a schema it does not match: that is one of the things to report) and checks, in order:
the database answers; its schema is this duetime's; this host's clock agrees with the
database's; which time-zone rules this process uses; for PostgreSQL, whether the URL goes
through PgBouncer's transaction pooling as ``DUETIME_PGBOUNCER`` says, and then the listen URL;
schedulers, a leader and workers are alive
(heartbeats within ``worker_stale_after``); nothing is falling behind (occurrences overdue,
leases expired, due runs of a task no live worker serves); alerts firing. Each check says
``ok``, ``warn`` (works, but something will not happen as expected) or ``fail`` (runs will not
fire or not run); a check that cannot run because an earlier one failed is left out.

Read-only: nothing is written (a SQLite file that does not exist is not created).
"""

from __future__ import annotations

import enum
import zoneinfo
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from duetime._clock import SystemClock, offset_to
from duetime._config import Settings
from duetime._monitoring import ClusterStats
from duetime._redact import redact_url
from duetime.errors import DuetimeError
from duetime.schedules import tzdb
from duetime.store import (
    SCHEMA_VERSION,
    Pooling,
    Store,
    create_store,
    is_postgres_url,
    probe_pooler,
)
from duetime.store.base import IncidentListParams, StatsParams
from duetime.targets.brokers.checks import check_connections
from duetime.targets.brokers.config import parse_brokers
from duetime.targets.command import check_commands, load_commands
from duetime.targets.secrets import resolve_secrets

CLOCK_TOLERANCE = timedelta(seconds=1)
"""An offset to the database clock past which due checks and leases (read on the database's
clock) and a worker's precise firing (on its own) disagree visibly."""


class Status(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str | None = None
    """What to do about it (None when nothing needs doing)."""


async def diagnose(settings: Settings) -> list[Finding]:
    """Every check's finding for the deployment ``settings`` names (module docstring)."""
    url = settings.database_url
    where = redact_url(url) if is_postgres_url(url) else url
    findings: list[Finding] = []
    store = create_store(url, create=False, pooling=Pooling.of(settings))
    try:
        await store.open()
    except (DuetimeError, OSError) as exc:
        findings.append(
            Finding(
                "database",
                Status.FAIL,
                f"cannot open {where}: {exc}",
                "check the URL (--db or DUETIME_DATABASE_URL), that the server runs and that "
                "this host may connect to it",
            )
        )
        return findings
    try:
        findings.append(Finding("database", Status.OK, f"{store.dialect} at {where} answers"))
        schema = await _schema(store)
        findings.append(schema)
        findings.append(await _clock(store))
        findings.append(_zone_rules())
        if is_postgres_url(url):
            findings += await _pgbouncer(settings)
        if schema.status is not Status.FAIL:
            findings += await _cluster(store, settings)
    finally:
        await store.close()
    return findings + await _brokers(settings) + _commands(settings)


def _commands(settings: Settings) -> list[Finding]:
    """The commands this host's configuration allows (none: no finding)."""
    try:
        commands = load_commands(settings.commands)
    except DuetimeError as exc:
        return [Finding("commands", Status.FAIL, str(exc), "fix DUETIME_COMMANDS")]
    return [
        Finding(
            f"command {name}",
            Status.OK if ok else Status.FAIL,
            detail,
            None if ok else "fix its argv[0] or cwd in DUETIME_COMMANDS, or install the program",
        )
        for name, ok, detail in check_commands(commands)
    ]


async def _brokers(settings: Settings) -> list[Finding]:
    """The broker connections this host's configuration names (none: no finding)."""
    try:
        connections = parse_brokers(settings.brokers)
    except DuetimeError as exc:
        return [Finding("brokers", Status.FAIL, str(exc), "fix DUETIME_BROKERS")]
    checks = await check_connections(connections, lambda v: resolve_secrets(v).value)
    return [Finding(f"broker {c.connection}", Status(c.level), c.detail, c.fix) for c in checks]


_PGBOUNCER_DOC = "docs/howto/pgbouncer.md"


async def _pgbouncer(settings: Settings) -> list[Finding]:
    """PgBouncer's pooling mode as ``DUETIME_PGBOUNCER`` says and as the database URL behaves,
    and, under transaction pooling, the listen URL (``duetime.store.probe_pooler``)."""
    url, setting = settings.database_url, settings.pgbouncer or "unset"
    try:
        probe = await probe_pooler(url)
    except DuetimeError as exc:
        return [Finding("pgbouncer", Status.WARN, f"could not probe the database URL: {exc}")]
    seen = (
        "two client connections ran on one server session"
        if probe.shares_sessions
        else f"PgBouncer's console says pool_mode = {probe.pool_mode}"
    )
    if probe.transaction_pooling and settings.pgbouncer != "transaction":
        found = Finding(
            "pgbouncer",
            Status.WARN,
            f"the database URL looks like PgBouncer in transaction pooling mode ({seen}) but "
            f"DUETIME_PGBOUNCER is {setting}: prepared statements and session settings "
            "will fail or leak between clients",
            f"set DUETIME_PGBOUNCER=transaction on every duetime process ({_PGBOUNCER_DOC})",
        )
    elif probe.transaction_pooling:
        found = Finding(
            "pgbouncer", Status.OK, f"DUETIME_PGBOUNCER=transaction; transaction pooling ({seen})"
        )
    elif settings.pgbouncer == "transaction" and probe.console.value == "absent":
        found = Finding(
            "pgbouncer",
            Status.WARN,
            "DUETIME_PGBOUNCER=transaction but the database URL is PostgreSQL itself (it "
            "has no PgBouncer console): duetime gives up prepared statements and LISTEN "
            "for nothing",
            "unset DUETIME_PGBOUNCER, or point the URL at PgBouncer",
        )
    elif probe.pgbouncer:
        mode = probe.pool_mode or "not transaction pooling as far as can be seen"
        found = Finding(
            "pgbouncer", Status.OK, f"PgBouncer ({mode}); DUETIME_PGBOUNCER is {setting}"
        )
    else:
        found = Finding(
            "pgbouncer",
            Status.OK,
            f"no PgBouncer detected in front of the database; DUETIME_PGBOUNCER is {setting}",
        )
    findings = [found]
    if settings.pgbouncer == "transaction" or probe.transaction_pooling:
        findings.append(await _listen(settings))
    return findings


async def _listen(settings: Settings) -> Finding:
    """Under transaction pooling: notifications need a direct listen URL."""
    if not settings.listen_url:
        return Finding(
            "listen",
            Status.WARN,
            "no DUETIME_LISTEN_URL under transaction pooling: workers claim by polling "
            "(every DUETIME_WORKER_POLL_INTERVAL), a replaced run is stopped at the next "
            "heartbeat, the API server reads API keys on every request",
            f"set DUETIME_LISTEN_URL to a direct URL of the same database ({_PGBOUNCER_DOC})",
        )
    where = redact_url(settings.listen_url)
    try:
        probe = await probe_pooler(settings.listen_url)
    except DuetimeError as exc:
        return Finding(
            "listen",
            Status.FAIL,
            f"DUETIME_LISTEN_URL: {exc}",
            "fix DUETIME_LISTEN_URL: a direct URL of the same database",
        )
    if probe.transaction_pooling:
        return Finding(
            "listen",
            Status.WARN,
            f"DUETIME_LISTEN_URL {where} goes through transaction pooling too: LISTEN there "
            "hears nothing once its transaction ends",
            "point DUETIME_LISTEN_URL at PostgreSQL itself, not PgBouncer",
        )
    return Finding("listen", Status.OK, f"notifications from {where}")


async def _schema(store: Store) -> Finding:
    version = await store.schema_version()
    if version is None:
        return Finding("schema", Status.FAIL, "the database has no duetime schema", _MIGRATE)
    if version < SCHEMA_VERSION:
        return Finding(
            "schema",
            Status.FAIL,
            f"schema v{version}; this duetime needs v{SCHEMA_VERSION}",
            _MIGRATE,
        )
    if version > SCHEMA_VERSION:
        return Finding(
            "schema",
            Status.FAIL,
            f"schema v{version} is newer than this duetime knows (v{SCHEMA_VERSION})",
            "upgrade duetime on this host to the release that migrated the database",
        )
    return Finding("schema", Status.OK, f"v{version}, this duetime's")


_MIGRATE = (
    "run `duetime migrate` (it says when a migration needs the previous release stopped first)"
)


async def _clock(store: Store) -> Finding:
    if store.dialect == "sqlite":
        return Finding("clock", Status.OK, "SQLite: the database clock is this host's")
    offset, round_trip = await offset_to(store.db_now, SystemClock())
    shown = f"{offset.total_seconds() * 1000:+.0f} ms (round trip {round_trip * 1000:.0f} ms)"
    if abs(offset) > CLOCK_TOLERANCE:
        return Finding(
            "clock",
            Status.WARN,
            f"this host's clock is {shown} off the database's",
            "synchronise this host's and the database server's clocks (NTP, chrony)",
        )
    return Finding("clock", Status.OK, f"offset to the database {shown}")


def _zone_rules() -> Finding:
    """Which IANA rules this process computes local times with: always the ``tzdata``
    package's (decision 0023), whatever the host ships. Every node should use the same
    release; a newer one recomputes the zoned jobs' next instants when its scheduler starts."""
    try:
        used = tzdb.current().version
    except (ImportError, OSError, ValueError) as exc:
        return Finding(
            "tzdata",
            Status.FAIL,
            f"no time-zone rules: the tzdata package cannot be read ({exc})",
            "pip install tzdata (it comes with duetime)",
        )
    detail = f"{used}, from the tzdata package"
    system = _system_tzdata()
    if system is not None and system != used:
        detail += f" (the system's zoneinfo, {system}, is not used)"
    return Finding("tzdata", Status.OK, detail)


def _system_tzdata() -> str | None:
    """The release (``2025b``) of the first zoneinfo directory Python searches that has one."""
    for folder in zoneinfo.TZPATH:
        header = Path(folder) / "tzdata.zi"
        try:
            with header.open(encoding="utf-8") as f:
                first = f.readline().strip()
        except OSError:
            continue
        if first.startswith("# version "):
            return first.removeprefix("# version ")
    return None


async def _cluster(store: Store, settings: Settings) -> list[Finding]:
    now = await store.db_now()
    live_after = now - timedelta(seconds=settings.worker_stale_after)
    stats = await store.stats_snapshot(StatsParams(live_after=live_after, now=now))
    firing = await store.incidents_list(IncidentListParams(firing=True, limit=1000))
    window = f"{settings.worker_stale_after:g}s"
    return [
        _schedulers(stats, window),
        _leader(stats),
        _workers(stats, window),
        *_falling_behind(stats),
        Finding(
            "alerts",
            Status.WARN if firing else Status.OK,
            f"{len(firing)} firing: " + "; ".join(i.summary for i in firing[:3])
            if firing
            else "none firing",
            "see `GET /api/v1/alerts` or the dashboard" if firing else None,
        ),
    ]


def _schedulers(stats: ClusterStats, window: str) -> Finding:
    schedulers = [n for n in stats.nodes if "scheduler" in n.roles]
    if not schedulers:
        return Finding(
            "schedulers",
            Status.FAIL,
            f"no scheduler heartbeated within {window}: no occurrence fires",
            "start `duetime scheduler` (any number, on any hosts)",
        )
    hosts = ", ".join(sorted({f"{n.host}:{n.pid}" for n in schedulers}))
    return Finding("schedulers", Status.OK, f"{len(schedulers)} alive ({hosts})")


def _leader(stats: ClusterStats) -> Finding:
    if stats.leader is None:
        return Finding(
            "leader",
            Status.FAIL,
            "no scheduler leads: expired leases are not taken back, history is not pruned, "
            "alerts are not raised",
            "start `duetime scheduler`; one of them is elected within its leader lease",
        )
    until = stats.leader.expires_at.isoformat(timespec="seconds")
    return Finding(
        "leader", Status.OK, f"{stats.leader.node_id} (term {stats.leader.term}, until {until})"
    )


def _workers(stats: ClusterStats, window: str) -> Finding:
    own = [w for w in stats.workers if w.tenant is None]
    remote = len(stats.workers) - len(own)
    if not stats.workers:
        return Finding(
            "workers",
            Status.WARN,
            f"no worker heartbeated within {window}: runs wait",
            "start `duetime worker --app yourpackage.tasks:app` (or a worker in your application)",
        )
    tasks = sorted({t for w in own for t in w.tasks if not t.startswith("duetime.")})
    shown = ", ".join(tasks[:5]) + (f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")
    detail = f"{len(own)} alive" + (f", {remote} remote" if remote else "")
    return Finding("workers", Status.OK, detail + (f"; tasks {shown}" if tasks else ""))


def _falling_behind(stats: ClusterStats) -> list[Finding]:
    out: list[Finding] = []
    if stats.overdue_jobs:
        since = (
            ""
            if stats.oldest_overdue_at is None
            else f", the oldest since {stats.oldest_overdue_at.isoformat(timespec='seconds')}"
        )
        out.append(
            Finding(
                "scheduling",
                Status.WARN,
                f"{stats.overdue_jobs} job(s) with an occurrence not written yet{since}",
                "start a scheduler, or more of them (`duetime scheduler --partitions`), if "
                "this stays",
            )
        )
    else:
        out.append(Finding("scheduling", Status.OK, "every occurrence due is written"))
    if stats.expired_leases:
        out.append(
            Finding(
                "leases",
                Status.WARN,
                f"{stats.expired_leases} running run(s) whose lease expired (their worker died "
                "or stalled)",
                "the leader's reaper takes them back; if this stays, check that a leader runs",
            )
        )
    served = {t for w in stats.workers for t in w.tasks}
    unserved = sorted({(d.tenant, d.task) for d in stats.tasks_due if d.task not in served})
    if unserved:
        names = ", ".join(f"{task} ({tenant})" for tenant, task in unserved[:5])
        out.append(
            Finding(
                "tasks",
                Status.WARN,
                f"due runs of task(s) no live worker serves: {names}",
                "start a worker whose app registers them (`duetime worker --app …`)",
            )
        )
    return out


def exit_code(findings: list[Finding]) -> int:
    """1 when a check failed, else 0 (warnings do not fail a deployment check)."""
    return 1 if any(f.status is Status.FAIL for f in findings) else 0


__all__ = ["Finding", "Status", "diagnose", "exit_code"]
