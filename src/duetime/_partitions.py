"""Leased partition ownership: the records, the store's methods and the fair share (pure).

Every job carries a partition key, 0-255 (``registration.partition_of``). A scheduler that is
not given a static range takes a share of the 256 partitions through leases in the database
(``leadership/partitions.py`` renews them; docs/decisions/0028-partition-leases.md):

- a *member* row says the node is alive until its ``expires_at``;
- each live member's share is :func:`fair_share` of the members ordered by when they joined;
- a *lease* row per partition names its owner until ``expires_at``; the ``epoch`` (the fencing
  token) increases every time a lease is taken anew.

The materializer of a leased node only locks jobs of partitions whose lease it holds
unexpired, in the same transaction (``jobs_due_leased``): the fence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

PARTITIONS = 256
"""Job partition keys are 0 to PARTITIONS - 1."""


@dataclass(frozen=True, slots=True)
class PartitionLease:
    partition: int
    owner: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class PartitionClaimParams:
    """Release ``node_id``'s leases outside ``want``, then renew or take those of ``want``
    that are its own, free or expired, each for ``ttl`` seconds."""

    node_id: str
    want: Sequence[int]
    ttl: float
    now: datetime | None = None


class PartitionLeaseStore(Protocol):
    """The store's partition lease methods (``store/_sql_partitions.py``; SQL in each
    dialect's ``queries/partition_leases.sql``). Each is one transaction."""

    async def partition_members_beat(
        self, node_id: str, ttl: float, now: datetime | None = None
    ) -> tuple[str, ...]:
        """Join or renew ``node_id``'s membership for ``ttl`` seconds (expired members are
        dropped); the live members, first joined first."""
        ...

    async def partition_leases_claim(
        self, params: PartitionClaimParams
    ) -> tuple[PartitionLease, ...]:
        """Release, then renew or take (see :class:`PartitionClaimParams`); the leases the
        node holds afterwards, by partition."""
        ...

    async def partition_leases_leave(self, node_id: str, now: datetime | None = None) -> None:
        """A clean stop: every lease of ``node_id`` expires now and its membership ends, so
        the others take its partitions over at their next renewal."""
        ...

    async def partition_leases_list(self) -> list[PartitionLease]:
        """The lease of every partition ever leased, by partition (an expired one still names
        its last owner)."""
        ...


def fair_share(members: Sequence[str], node_id: str) -> tuple[int, ...]:
    """``node_id``'s share: the k-th of ``len(members)`` contiguous, near-equal ranges of the
    partitions, k its place in ``members``; nothing when it is not a member."""
    if node_id not in members:
        return ()
    k, n = members.index(node_id), len(members)
    return tuple(range(k * PARTITIONS // n, (k + 1) * PARTITIONS // n))


def spans(partitions: Iterable[int]) -> str:
    """``0-85,128-140``: the partitions as ranges (``-`` when there is none)."""
    keys = sorted(set(partitions))
    parts: list[str] = []
    i = 0
    while i < len(keys):
        j = i
        while j + 1 < len(keys) and keys[j + 1] == keys[j] + 1:
            j += 1
        parts.append(str(keys[i]) if i == j else f"{keys[i]}-{keys[j]}")
        i = j + 1
    return ",".join(parts) or "-"
