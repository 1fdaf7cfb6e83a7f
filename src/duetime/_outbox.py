"""The transactional outbox's value types and its store protocol (docs/brokers.md, decision
0026). A broker run's message is an :class:`OutboxMessage` carried by its completion
(``RunCompletion.outbox``) and inserted in the completion's own transaction; relays claim
:class:`OutboxRow` batches, publish them and mark them sent, retried or dead."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

BROKER_TYPES = ("redis", "rabbitmq", "nats")
"""Target types a broker connection (and a job's broker target) may have."""

BROKER_TASK_PREFIX = "duetime.broker:"
"""A broker target's job runs under ``duetime.broker:<connection>``: workers register that
task name for every connection they serve, so claims reach only such workers and registration
refuses an unknown connection (as it refuses an unknown task)."""


def broker_task(connection: str) -> str:
    """The task name a broker target naming ``connection`` runs under."""
    return BROKER_TASK_PREFIX + connection


def broker_connection(task: str) -> str | None:
    """The connection a broker task name serves, or None for any other task."""
    if task.startswith(BROKER_TASK_PREFIX):
        return task[len(BROKER_TASK_PREFIX) :]
    return None


def message_id(run_id: uuid.UUID, attempt: int) -> str:
    """A message's id: the same for every publish of one run's attempt (duplicates after a
    relay's crash carry it; consumers and NATS JetStream dedupe on it)."""
    return f"{run_id}:{attempt}"


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """One message, as the worker built it from a succeeded broker run."""

    tenant: str
    run_id: uuid.UUID
    attempt: int
    connection: str
    target: Mapping[str, Any]
    """The job's validated broker target (type, connection, stream / exchange+routing_key /
    subject)."""
    body: str
    """The run's payload as JSON text."""
    headers: Mapping[str, str]
    """``duetime-run-id``, ``duetime-scheduled-for``, ``duetime-attempt``, ``duetime-token``,
    ``duetime-job``, ``duetime-tenant``, ``traceparent`` (when tracing is on)."""

    @property
    def message_id(self) -> str:
        return message_id(self.run_id, self.attempt)


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A claimed (or dead) outbox row."""

    id: int
    message_id: str
    tenant: str
    run_id: uuid.UUID
    attempt: int
    connection: str
    target: dict[str, Any]
    body: str
    headers: dict[str, str]
    created_at: datetime
    tries: int
    last_error: str | None = None
    sent_at: datetime | None = None
    dead_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class OutboxDepth:
    """The outbox's backlog: pending rows, the oldest one's creation, and dead messages."""

    pending: int
    oldest: datetime | None
    dead: int
    by_connection: dict[str, int] = field(default_factory=dict)
    """Pending rows per connection."""


@dataclass(frozen=True, slots=True)
class OutboxClaimParams:
    """Claim up to ``limit`` pending rows of ``connections`` that are due (``available_at <=
    now``), oldest first, each hidden from other relays for ``lease`` seconds (its
    ``available_at`` moves on; a relay that dies mid-publish leaves them to be claimed again
    then). PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: one ``UPDATE … RETURNING``."""

    connections: Sequence[str]
    limit: int = 500
    lease: float = 30.0
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class OutboxRetry:
    """A row whose publish failed for now: due again ``delay`` seconds from now."""

    id: int
    delay: float
    error: str


class OutboxStore(Protocol):
    """The store's outbox methods (``store/_sql_outbox.py``; SQL in ``queries/outbox.sql``)."""

    run_events: RunEvents | None
    """The operator's run events, set by the process that opened the store (None: none)."""

    async def outbox_claim(self, params: OutboxClaimParams) -> list[OutboxRow]: ...

    async def outbox_sent(self, ids: Sequence[int], now: datetime | None = None) -> int:
        """Mark rows published (idempotent: a row already sent stays as it was)."""
        ...

    async def outbox_retry(
        self, retries: Sequence[OutboxRetry], now: datetime | None = None
    ) -> int:
        """Put rows back for a later publish, keeping the error."""
        ...

    async def outbox_dead(
        self, dead: Sequence[tuple[int, str]], now: datetime | None = None
    ) -> int:
        """Move (id, error) rows to the dead-message list (the broker refused them for good)."""
        ...

    async def outbox_dead_list(
        self, tenant: str | None, limit: int = 100, after_id: int | None = None
    ) -> list[OutboxRow]:
        """Dead messages, oldest first (``tenant`` None: every tenant)."""
        ...

    async def outbox_replay(
        self, tenant: str | None, ids: Sequence[int] | None, now: datetime | None = None
    ) -> int:
        """Put dead messages (``ids``, or all of ``tenant``'s when None) back to pending, due
        now, their tries reset. Returns how many."""
        ...

    async def outbox_depth(self, now: datetime | None = None) -> OutboxDepth: ...

    async def outbox_prune(self, before: datetime, limit: int = 1000) -> int:
        """Delete up to ``limit`` rows sent before ``before``. Returns how many."""
        ...


RUN_EVENT_KINDS = ("started", "succeeded", "retrying", "dead", "cancelled", "skipped")
"""Run events an operator may publish (docs/brokers.md, "Run events"): a run started; ended
succeeded, dead or cancelled; failed an attempt with a retry scheduled (``retrying``); or an
occurrence was skipped (at start, by its overlap policy; by its misfire policy; or by the
scheduler, which then publishes one event per recorded skip range, with no run)."""

COMPLETION_EVENTS = frozenset({"succeeded", "retrying", "dead", "cancelled"})
START_EVENTS = frozenset({"started", "skipped"})
SKIP_EVENTS = frozenset({"skipped"})
STARTED_EVENTS = frozenset({"started"})
CANCEL_EVENTS = frozenset({"cancelled"})
"""A run cancelled by an operator (itself, or its workflow instance), or replaced by a newer
one (``overlap="replace"``)."""
REPLAY_EVENTS = frozenset({"retrying"})
"""A dead run an operator replayed (``runs_replay``): scheduled again, as after a retry."""
REAP_EVENTS = frozenset({"retrying", "dead", "cancelled"})
"""A run whose lease the leader's reaper found expired: sent back, dead, or ended replaced."""
END_EVENTS = frozenset({"skipped", "cancelled"})
"""A job's not-yet-started runs ended by a change to the job (its bounds, its schedule, its
status)."""

NO_RUN = uuid.UUID(int=0)
"""The outbox's ``run_id`` of a skip event of occurrences that never became runs."""


@dataclass(frozen=True, slots=True)
class RunEvents:
    """The operator's run events (``DUETIME_RUN_EVENTS``, parsed by
    ``targets/brokers/events.py``): the events of ``kinds`` of the runs of ``tenants`` (None:
    every tenant) are written to the outbox for ``target`` (a broker target naming
    ``connection``) in the transaction of the change each reports. A store with none set
    (``Store.run_events``) writes no event and its statements are as they were."""

    connection: str
    target: Mapping[str, Any]
    kinds: frozenset[str]
    tenants: frozenset[str] | None = None

    def sql_params(self, kinds: frozenset[str]) -> dict[str, Any]:
        """The parameters of the event statements for those of ``kinds`` that are wanted."""
        return {
            "connection": self.connection,
            "kinds": sorted(self.kinds & kinds),
            "tenants": None if self.tenants is None else sorted(self.tenants),
        }
