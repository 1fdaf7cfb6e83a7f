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
"""

from __future__ import annotations

from datetime import datetime

from duetime._types import AttemptOutcome, RunState
from duetime.worker.retry import Decision

__all__ = ["HELD_WAIT_LIMIT", "ClaimAhead", "held_too_long"]

HELD_WAIT_LIMIT = 0.1
"""Seconds a run claimed ahead may wait for a slot before it is handed back; and while any
slot has been held longer than this (a long run), the worker claims nothing ahead."""

_CLAIM_WEIGHT = 0.2
"""Weight of the newest claim latency in its moving average."""

_SERVE_WEIGHT = 0.02
"""Weight of the newest slot time in its moving average (one per run: a slower average)."""


class ClaimAhead:
    """Moving averages of the claim latency and of the time a run holds a slot; the number of
    runs a claim may take beyond the free slots. Not thread-safe: the worker's event loop
    only."""

    __slots__ = ("_claim", "_most", "_rounds", "_serve", "_slots")

    def __init__(self, *, slots: int, most: int, rounds: float) -> None:
        self._slots = slots
        self._most = most
        self._rounds = rounds
        self._claim: float | None = None
        self._serve: float | None = None

    def claimed(self, seconds: float) -> None:
        """One claim took ``seconds`` (the statement's round trip, whatever it returned)."""
        last = self._claim
        self._claim = seconds if last is None else last + _CLAIM_WEIGHT * (seconds - last)

    def served(self, seconds: float) -> None:
        """One run held a slot for ``seconds``."""
        last = self._serve
        self._serve = seconds if last is None else last + _SERVE_WEIGHT * (seconds - last)

    def allowance(self) -> int:
        """Runs a claim may take beyond the free slots: what the slots finish in ``rounds``
        claim latencies, at most ``most``; 0 until both are measured (or with ``rounds`` 0)."""
        if self._claim is None or not self._serve or self._rounds <= 0:
            return 0
        ahead = self._rounds * self._claim * self._slots / self._serve
        return min(self._most, int(ahead))


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
