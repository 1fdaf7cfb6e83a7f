"""How far ahead of its free slots a worker claims.

A worker that claims only its free slots waits one claim round trip for every batch: with
short tasks its slots sit idle most of the time (10 slots of 50 µs tasks finish in 0.5 ms; a
claim takes 1–3 ms). So a claim may also take the runs the worker's slots will finish while
its next claim is on its way: ``worker_claim_ahead`` claim round trips' worth, from the
measured time a run holds a slot and the measured claim latency. Long tasks get nothing extra
(ten 1 s tasks finish nothing within a few milliseconds), so a worker never holds runs another
worker could start sooner; ``worker_concurrency`` stays the ceiling on runs executing at once.

Runs claimed ahead are started by the claim (as every due run is) and wait for a slot in claim
order, at most :data:`HELD_WAIT_LIMIT` (then they are handed back): nothing re-checks their job
or token before the call, so that wait bounds how long a cancel may miss them, how early their
``started_at`` may be, and what a worker that dies loses besides the runs it was executing
(docs/decisions/0009-claim-ahead.md). While a slot is held longer than that (long runs), the
worker claims nothing ahead.

How much one claim takes adapts to the backlog (docs/decisions/0014-adaptive-claiming.md):
``worker_batch`` is a ceiling, not the size. A claim starts at :data:`FIRST_CLAIM` at most; each
claim that comes back full (a backlog) doubles the size the next may take, up to the ceiling;
each claim whose runs held ahead waited longer than :data:`SOON` for a slot halves it (the
worker took more than it starts soon, and another worker could have started them). So a
worker of short tasks under a backlog claims in large batches (the claim's fixed cost spread
over more runs), and a worker that falls behind claims less.

Likewise ``worker_concurrency`` is a ceiling: a worker claims for :attr:`ClaimAhead.concurrency`
slots, :data:`START_CONCURRENCY` at first, doubled (up to the ceiling) after each claim that
came back full while the worker held at least that many runs — a backlog its slots did not
keep up with — and halved (not below the start) after a claim that found less than it asked
for while fewer than half the slots were busy.
"""

from __future__ import annotations

from datetime import datetime

from duetime._types import AttemptOutcome, RunState
from duetime.worker.retry import Decision

__all__ = [
    "FIRST_CLAIM",
    "HELD_WAIT_LIMIT",
    "SOON",
    "START_CONCURRENCY",
    "ClaimAhead",
    "held_too_long",
]

HELD_WAIT_LIMIT = 0.1
"""Seconds a run claimed ahead may wait for a slot before it is handed back; and while any
slot has been held longer than this (a long run), the worker claims nothing ahead."""

SOON = HELD_WAIT_LIMIT / 4
"""Seconds within which a worker expects to start a run it held ahead; a held run that waited
longer halves the next claims (see :meth:`ClaimAhead.held`)."""

START_CONCURRENCY = 10
"""The slots a worker claims for before a backlog showed it needs more (the ceiling if lower)."""

FIRST_CLAIM = 100
"""The most runs a claim takes before any claim came back full (then ``most`` at most)."""

_CLAIM_WEIGHT = 0.2
"""Weight of the newest claim latency in its moving average."""

_SERVE_WEIGHT = 0.02
"""Weight of the newest slot time in its moving average (one per run: a slower average)."""


class ClaimAhead:
    """Moving averages of the claim latency and of the time a run holds a slot; the number of
    runs a claim may take beyond the free slots, and the most one claim may take (adapted to
    the backlog). Not thread-safe: the worker's event loop only."""

    __slots__ = (
        "_cap",
        "_ceiling",
        "_claim",
        "_most",
        "_rounds",
        "_serve",
        "_shrunk",
        "_start",
        "concurrency",
    )

    def __init__(
        self, *, slots: int, most: int, rounds: float, start: int = START_CONCURRENCY
    ) -> None:
        self._ceiling = slots
        self._start = max(1, min(slots, start))
        self.concurrency = self._start
        """The slots the worker claims for now: between the start and ``slots`` (the
        ceiling)."""
        self._most = most
        self._rounds = rounds
        self._claim: float | None = None
        self._serve: float | None = None
        self._cap = min(most, max(slots, FIRST_CLAIM))
        self._shrunk = False

    @property
    def cap(self) -> int:
        """The most runs the next claim may take: between the slots and ``most``."""
        return self._cap

    def claimed(self, seconds: float) -> None:
        """One claim took ``seconds`` (the statement's round trip, whatever it returned)."""
        last = self._claim
        self._claim = seconds if last is None else last + _CLAIM_WEIGHT * (seconds - last)

    def returned(self, asked: int, got: int, holding: int) -> None:
        """A claim asked for ``asked`` runs and got ``got``; the worker now holds ``holding``
        runs. A full claim means a backlog: the next claims may take twice as many (up to
        ``most``), and if the worker's slots are all taken, it claims for twice as many slots
        (up to the ceiling). A short claim while fewer than half the slots are taken halves
        the slots (not below the start)."""
        self._shrunk = False
        if asked <= 0:
            return
        if got >= asked:
            if asked >= self._cap // 2:
                self._cap = min(self._most, self._cap * 2)
            if holding >= self.concurrency:
                self.concurrency = min(self._ceiling, self.concurrency * 2)
        elif holding < self.concurrency // 2:
            self.concurrency = max(self._start, self.concurrency // 2)

    def held(self, waited: float) -> None:
        """A run held ahead got its slot after ``waited`` seconds: longer than :data:`SOON`
        halves the claims (once per claim: the runs of one claim wait together)."""
        if waited > SOON and not self._shrunk:
            self._shrunk = True
            self._cap = max(min(self.concurrency, self._most), self._cap // 2)

    def served(self, seconds: float) -> None:
        """One run held a slot for ``seconds``."""
        last = self._serve
        self._serve = seconds if last is None else last + _SERVE_WEIGHT * (seconds - last)

    def allowance(self) -> int:
        """Runs a claim may take beyond the free slots: what the slots finish in ``rounds``
        claim latencies, at most :attr:`cap`; 0 until both are measured (or with ``rounds``
        0)."""
        if self._claim is None or not self._serve or self._rounds <= 0:
            return 0
        ahead = self._rounds * self._claim * self.concurrency / self._serve
        return min(self._cap, int(ahead))


def held_too_long(now: datetime) -> Decision:
    """The outcome of a run claimed ahead that found no slot within :data:`HELD_WAIT_LIMIT`:
    back to ``scheduled`` at once (its attempt refunded: it never began here)."""
    return Decision(
        AttemptOutcome.CANCELLED,
        RunState.SCHEDULED,
        now,
        "handed_back",
        None,
        f"held ahead of a free slot for {HELD_WAIT_LIMIT:g} s; handed back",
    )
