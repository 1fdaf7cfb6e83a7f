"""Who is claimed first: priorities with aging, tenant fairness, per-tenant quotas — pure, shared
by both stores (docs/fairness.md states the same rules for users).

**Effective priority.** A run waiting since ``available_at`` gains one priority step per
``interval`` of waiting, until it reaches ``cap`` (a run whose own priority is at or above
``cap`` does not age). Kept exact as an integer in microseconds::

    eff = priority * step + min(max(now_us - available_at_us, 0), max((cap - priority) * step, 0))

where ``step`` is the interval in microseconds.

(``interval`` 0 turns aging off: ``eff = priority``.) With ``cap`` at the top of the priority
range (the default), every waiting run eventually ties with the most urgent and then goes
oldest first: late, never starved. Within a tenant runs are ranked by
``eff`` descending, then ``available_at``, then id. Within one (tenant, queue, priority) group
``eff`` never grows with ``available_at``, so the top ``k`` of a tenant are among the oldest
``k`` of each of its groups: that is what lets the claim read each group's oldest runs from an
index (``runs_fair``) instead of sorting every due run.

**Fairness.** The ``rank``-th run of a tenant of weight ``w`` with ``running`` runs in flight
belongs to round ``(running + rank - 1) / w``; a claim takes runs by round, then ``eff``
descending, then ``available_at``, then id. With equal weights that is round robin — one run of
each tenant with due runs, then a second of each — counting what each already runs, so a claim
of one run goes to the tenant with the fewest in flight: a tenant flooding the workers cannot
keep a small one waiting however small the claims are. (Runs in flight are only counted when
several tenants have due runs, and up to :data:`RUNNING_COUNTED`.)

**Quotas.** A tenant may cap its runs in flight (``running``, claimed ahead or started) and its
run starts per second (a token bucket holding ``max(1, rate)`` starts, refilled at ``rate``).
A rate-limited tenant's runs are only claimed once due, so each start is charged in the
transaction that makes it: over any span of ``T`` seconds a tenant starts at most
``max(1, rate) + rate * T`` runs, whatever the number of workers.

The SQL of both stores (``queries/fairness.sql``) implements :func:`effective_priority` and
:func:`fair_order` for the one-statement claim; the locked step (quotas, overlap) calls them
here.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from duetime.policies.overlap import Candidate, OverlapDecision, decide

T = TypeVar("T")

RUNNING_COUNTED = 1000
"""A tenant's runs in flight count as rounds up to this many (the SQL counts no further)."""
_MICROS = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Aging:
    """Priority aging: one step per ``interval`` seconds of waiting, up to priority ``cap``."""

    interval: float = 60.0
    cap: int = 1000

    @property
    def interval_us(self) -> int:
        return max(0, round(self.interval * _MICROS))


def _micros(at: datetime) -> int:
    delta = at - _EPOCH  # as store._rows.to_micros (exact integer microseconds)
    return (delta.days * 86_400 + delta.seconds) * _MICROS + delta.microseconds


def effective_priority(priority: int, available_at: datetime, now: datetime, aging: Aging) -> int:
    """The run's priority plus what waiting earned it, in microsecond units (module docstring)."""
    step = aging.interval_us
    if step <= 0:
        return priority
    room = max(aging.cap * step - priority * step, 0)
    return priority * step + min(max(_micros(now) - _micros(available_at), 0), room)


@dataclass(frozen=True, slots=True)
class FairItem:
    """What ordering needs to know about a run."""

    id: uuid.UUID
    tenant: str
    priority: int
    available_at: datetime


def fair_order(
    items: Sequence[T],
    *,
    key: Callable[[T], FairItem],
    now: datetime,
    aging: Aging,
    weights: Mapping[str, int] | None = None,
    running: Mapping[str, int] | None = None,
) -> list[T]:
    """``items`` in claim order: rounds of the tenants (by weight, default 1, after the runs
    they have ``running``), and within a round by effective priority, then ``available_at``,
    then id (module docstring)."""
    weights = weights or {}
    running = running or {}
    decorated = []
    for item in items:
        fair = key(item)
        eff = effective_priority(fair.priority, fair.available_at, now, aging)
        decorated.append((fair.tenant, -eff, fair.available_at, fair.id, item))
    decorated.sort(key=lambda d: d[:4])
    ranks: Counter[str] = Counter()
    ordered = []
    for tenant, neg_eff, available_at, run_id, item in decorated:
        ranks[tenant] += 1
        weight = max(1, weights.get(tenant, 1))
        had = min(running.get(tenant, 0), RUNNING_COUNTED)
        rounds = (had + ranks[tenant] - 1) / weight
        ordered.append((rounds, neg_eff, available_at, run_id, item))
    ordered.sort(key=lambda d: d[:4])
    return [d[4] for d in ordered]


# --- quotas -----------------------------------------------------------------------------------


def bucket_capacity(rate: float) -> float:
    """How many starts a tenant's token bucket holds: one second's worth, at least one."""
    return max(1.0, rate)


def bucket_refill(tokens: float | None, at: datetime | None, now: datetime, rate: float) -> float:
    """Tokens in the bucket at ``now``: ``tokens`` at ``at`` plus ``rate`` per second since,
    up to the capacity; a bucket never used (``tokens`` None) is full."""
    capacity = bucket_capacity(rate)
    if tokens is None or at is None:
        return capacity
    elapsed = max(0.0, (now - at).total_seconds())
    return min(capacity, tokens + elapsed * rate)


@dataclass(frozen=True, slots=True)
class TenantQuota:
    """A limited tenant's limits and what it uses right now."""

    tenant: str
    max_in_flight: int | None
    max_starts_per_second: float | None
    running: int
    tokens: float
    """Tokens in its bucket now (refilled); unused without a rate."""

    def budget(self) -> int:
        """How many more runs a claim may give it now."""
        left = math.inf
        if self.max_in_flight is not None:
            left = min(left, self.max_in_flight - self.running)
        if self.max_starts_per_second is not None:
            left = min(left, math.floor(self.tokens + 1e-9))
        return max(0, int(min(left, 1 << 30)))


@dataclass(slots=True)
class QuotaLedger:
    """Admits candidates against their tenants' quotas during one claim (used as the ``admit``
    hook of :func:`duetime.policies.overlap.decide`)."""

    quotas: Mapping[str, TenantQuota]
    left: dict[str, int] = field(default_factory=dict)
    taken: Counter[str] = field(default_factory=Counter)
    throttled: Counter[str] = field(default_factory=Counter)
    """Candidates a quota held back, per tenant."""

    def __post_init__(self) -> None:
        self.left = {t: q.budget() for t, q in self.quotas.items()}

    def __call__(self, candidate: Candidate) -> bool:
        quota = self.quotas.get(candidate.tenant)
        if quota is None:
            return True
        # a rate-limited tenant's run is claimed only once due: its start is charged now
        if (quota.max_starts_per_second is not None and not candidate.due) or (
            self.left[candidate.tenant] <= 0
        ):
            self.throttled[candidate.tenant] += 1
            return False
        self.left[candidate.tenant] -= 1
        self.taken[candidate.tenant] += 1
        return True

    def tokens_after(self, tenant: str) -> float:
        """The tenant's bucket after this claim's starts."""
        quota = self.quotas[tenant]
        return max(0.0, quota.tokens - self.taken[tenant])


# --- the claim's locked step ------------------------------------------------------------------

OWN_KEY_PREFIX = "run:"
"""Key of a limited tenant's run that has no overlap key: never busy, never locked."""


def overlap_keys(candidates: Sequence[Candidate]) -> list[str]:
    """The overlap keys whose running runs the locked step must count (and lock)."""
    return sorted({c.key for c in candidates if not c.key.startswith(OWN_KEY_PREFIX)})


def tenant_lock_key(tenant: str) -> str:
    """The advisory-lock key that serializes the quota checks of ``tenant`` (PostgreSQL)."""
    return f"tenant:{tenant}"


@dataclass(slots=True)
class LockedClaim:
    decision: OverlapDecision
    ledger: QuotaLedger

    def buckets(self) -> list[tuple[str, float]]:
        """(tenant, tokens left) for each rate-limited tenant that started runs."""
        return [
            (tenant, self.ledger.tokens_after(tenant))
            for tenant in sorted(self.ledger.taken)
            if self.ledger.quotas[tenant].max_starts_per_second is not None
        ]


def plan_locked_claim(
    candidates: Sequence[tuple[FairItem, Candidate]],
    *,
    weights: Mapping[str, int],
    running: Mapping[str, int],
    quotas: Mapping[str, TenantQuota],
    capacity: int,
    now: datetime,
    aging: Aging,
    in_flight: Mapping[str, int] | None = None,
) -> LockedClaim:
    """Order the candidates fairly (``in_flight``: runs per tenant), then walk them with the
    overlap rules (``running``: runs per overlap key) and the quotas."""
    ordered = fair_order(
        candidates, key=lambda p: p[0], now=now, aging=aging, weights=weights, running=in_flight
    )
    ledger = QuotaLedger(quotas)
    decision = decide([p[1] for p in ordered], running, capacity, admit=ledger)
    return LockedClaim(decision, ledger)
