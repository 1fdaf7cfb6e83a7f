"""Overlap decisions at claim time: pure, shared by both stores.

Runs whose job limits overlap carry an overlap key (``runs.concurrency_key``: ``job:<id>`` or
``key:<concurrency key>``). The store locks the candidates and counts the running runs per key
atomically (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock per key, then a fresh
count), then asks :func:`decide` which candidates start and which are skipped
(:func:`replacing_keys` first: the keys whose running runs a ``replace`` asks to stop).

- ``skip``: a run due while another of its key runs is skipped (reason ``overlap``). A manual
  trigger waits instead: an operator's explicit act is not dropped.
- ``allow``: up to ``max_concurrency`` at once (0 = no limit); the rest wait.
- ``serialize``: one at a time, in order; the rest wait (at most the job's ``max_waiting``:
  a newer run due at the cap is skipped ``queue_full``).
- ``buffer_one``: one at a time; of the runs waiting only the newest is kept, the older ones
  are skipped ``superseded``.
- ``replace``: the running runs of the key are asked to stop (``cancel_requested`` and a
  ``replace_deadline``, announced to their worker at once); the new run waits until they have
  stopped, or until the deadline, when the store cancels them outright (token bumped: their
  writes change nothing) and the new run starts. Older runs waiting meanwhile are superseded.

The store does the ``replace`` requests and the trimming of waiting runs
(``runs_trim_waiting``) before it asks :func:`decide`; see docs/decisions/0016.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from duetime._types import OverlapPolicy, RunTrigger


@dataclass(frozen=True, slots=True)
class Candidate:
    id: uuid.UUID
    key: str
    trigger: RunTrigger
    policy: OverlapPolicy
    max_concurrency: int
    due: bool = True
    """Already at its instant. A run claimed ahead is only reserved (one per key per claim);
    its overlap is judged when it starts (:func:`decide_start`), when the runs before it have
    had their chance to finish."""
    tenant: str = ""
    """For the tenant quotas of the claim's ``admit`` hook (store/_fairness.py)."""


@dataclass(slots=True)
class OverlapDecision:
    claim: list[uuid.UUID] = field(default_factory=list)
    skip: list[uuid.UUID] = field(default_factory=list)


def decide(
    candidates: Sequence[Candidate],
    running: Mapping[str, int],
    capacity: int,
    admit: Callable[[Candidate], bool] | None = None,
) -> OverlapDecision:
    """Walk ``candidates`` in claim order; ``running`` counts runs per key before this claim.

    Only runs that really run (committed by an earlier claim) make a key busy: among runs of
    one key due together (a catch-up), ``allow`` takes up to its limit and the other policies
    take the first and let the rest wait for the next claim — none is skipped for a sibling.
    ``admit`` (tenant quotas) is asked last, only about a run that would be claimed; False
    leaves it waiting."""
    decision = OverlapDecision()
    taken: Counter[str] = Counter()
    for c in candidates:
        if len(decision.claim) >= capacity:
            break
        busy = running.get(c.key, 0)
        if c.policy is OverlapPolicy.ALLOW:
            if c.max_concurrency and busy + taken[c.key] >= c.max_concurrency:
                continue
        elif taken[c.key]:
            continue
        elif not c.due:
            pass  # reserved ahead; judged when it starts
        elif busy:
            if c.policy is OverlapPolicy.SKIP and c.trigger is not RunTrigger.MANUAL:
                decision.skip.append(c.id)
            continue
        if admit is not None and not admit(c):
            continue
        decision.claim.append(c.id)
        taken[c.key] += 1
    return decision


def replacing_keys(candidates: Sequence[Candidate], running: Mapping[str, int]) -> list[str]:
    """The busy keys a due ``replace`` candidate wants: their running runs are to be asked to
    stop (or, past their deadline, cancelled) before :func:`decide`, which lets the candidate
    wait while any of them still runs."""
    keys = {
        c.key
        for c in candidates
        if c.due and c.policy is OverlapPolicy.REPLACE and running.get(c.key, 0)
    }
    return sorted(keys)


class StartVerdict(enum.Enum):
    START = "start"
    SKIP = "skip"
    DEFER = "defer"
    REPLACE = "replace"
    """Cancel the key's running runs, then start."""


def decide_start(
    policy: OverlapPolicy, trigger: RunTrigger, max_concurrency: int, running: int
) -> StartVerdict:
    """For a run claimed ahead, at its instant: ``running`` counts the key's started runs."""
    if not running:
        return StartVerdict.START
    if policy is OverlapPolicy.REPLACE:
        return StartVerdict.REPLACE
    if policy is OverlapPolicy.SKIP and trigger is not RunTrigger.MANUAL:
        return StartVerdict.SKIP
    if policy is OverlapPolicy.ALLOW and (not max_concurrency or running < max_concurrency):
        return StartVerdict.START
    return StartVerdict.DEFER


@dataclass(frozen=True, slots=True)
class StartCandidate:
    """A run claimed ahead, at its instant, with its overlap key (for :func:`plan_starts`)."""

    id: uuid.UUID
    token: int
    key: str
    policy: OverlapPolicy
    trigger: RunTrigger
    max_concurrency: int


@dataclass(slots=True)
class StartPlan:
    start: list[StartCandidate] = field(default_factory=list)
    skip: list[StartCandidate] = field(default_factory=list)
    defer: list[StartCandidate] = field(default_factory=list)
    replace: list[StartCandidate] = field(default_factory=list)
    """Left to the one-run path, in order: every run of a key that has a ``replace`` run in
    the batch (a replace cancels the key's running runs, then starts; the policy is rare)."""


def plan_starts(candidates: Sequence[StartCandidate], running: Mapping[str, int]) -> StartPlan:
    """:func:`decide_start` for a batch, in order: a run the batch starts counts as running for
    the later runs of its key, exactly as if each had been started alone, one after another.
    ``running`` counts each key's started runs (none of the batch); the caller holds the keys'
    locks. Keys with a ``replace`` run are left to the one-run path (:attr:`StartPlan.replace`).
    """
    plan = StartPlan()
    counts = dict(running)
    replacing = {c.key for c in candidates if c.policy is OverlapPolicy.REPLACE}
    for c in candidates:
        if c.key in replacing:
            plan.replace.append(c)
            continue
        verdict = decide_start(c.policy, c.trigger, c.max_concurrency, counts.get(c.key, 0))
        if verdict is StartVerdict.START:
            plan.start.append(c)
            counts[c.key] = counts.get(c.key, 0) + 1
        elif verdict is StartVerdict.SKIP:
            plan.skip.append(c)
        else:
            plan.defer.append(c)
    return plan
