"""Overlap decisions at claim time (pure): skip, allow, serialize, replace, concurrency keys."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from duetime._types import OverlapPolicy, RunTrigger
from duetime.policies.overlap import (
    Candidate,
    StartCandidate,
    StartVerdict,
    decide,
    decide_start,
    plan_starts,
    replacing_keys,
)


def cand(
    key: str, policy: OverlapPolicy, *, limit: int = 1, trigger: RunTrigger = RunTrigger.SCHEDULE
) -> Candidate:
    return Candidate(uuid.uuid4(), key, trigger, policy, limit)


def test_skip_drops_a_run_while_another_of_its_job_runs() -> None:
    c = cand("job:a", OverlapPolicy.SKIP)
    decision = decide([c], {"job:a": 1}, 10)
    assert (decision.claim, decision.skip) == ([], [c.id])
    assert decide([c], {}, 10).claim == [c.id]


def test_of_two_due_together_the_first_runs_and_the_second_waits() -> None:
    first, second = cand("job:a", OverlapPolicy.SKIP), cand("job:a", OverlapPolicy.SKIP)
    decision = decide([first, second], {}, 10)
    assert (decision.claim, decision.skip) == ([first.id], [])


def test_a_manual_trigger_waits_instead_of_being_skipped() -> None:
    c = cand("job:a", OverlapPolicy.SKIP, trigger=RunTrigger.MANUAL)
    decision = decide([c], {"job:a": 1}, 10)
    assert (decision.claim, decision.skip) == ([], [])


def test_allow_runs_up_to_its_limit_and_zero_means_unlimited() -> None:
    runs = [cand("job:a", OverlapPolicy.ALLOW, limit=3) for _ in range(5)]
    assert decide(runs, {"job:a": 1}, 10).claim == [r.id for r in runs[:2]]
    unlimited = [cand("job:b", OverlapPolicy.ALLOW, limit=0) for _ in range(5)]
    assert decide(unlimited, {"job:b": 7}, 10).claim == [r.id for r in unlimited]


def test_serialize_runs_one_at_a_time_in_order() -> None:
    runs = [cand("job:a", OverlapPolicy.SERIALIZE) for _ in range(3)]
    assert decide(runs, {}, 10).claim == [runs[0].id]
    decision = decide(runs, {"job:a": 1}, 10)
    assert (decision.claim, decision.skip) == ([], [])


def test_replace_waits_for_the_running_one_then_starts_the_next_in_order() -> None:
    runs = [cand("job:a", OverlapPolicy.REPLACE) for _ in range(2)]
    # the store asks the key's running run to stop (decision 0016); meanwhile they wait
    assert replacing_keys(runs, {"job:a": 1}) == ["job:a"]
    assert decide(runs, {"job:a": 1}, 10).claim == []
    assert replacing_keys(runs, {}) == []
    assert decide(runs, {}, 10).claim == [runs[0].id]


def test_runs_claimed_ahead_are_reserved_one_per_key_and_never_skipped_early() -> None:
    ahead = [
        Candidate(uuid.uuid4(), "job:a", RunTrigger.SCHEDULE, OverlapPolicy.SKIP, 1, due=False)
        for _ in range(2)
    ]
    decision = decide(ahead, {"job:a": 1}, 10)
    assert (decision.claim, decision.skip) == ([ahead[0].id], [])


def test_a_concurrency_key_is_one_limit_across_jobs() -> None:
    a = cand("key:db", OverlapPolicy.ALLOW, limit=2)
    b = cand("key:db", OverlapPolicy.ALLOW, limit=2)
    c = cand("key:db", OverlapPolicy.ALLOW, limit=2)
    assert decide([a, b, c], {}, 10).claim == [a.id, b.id]
    assert decide([a, b, c], {"key:db": 2}, 10).claim == []


def test_capacity_bounds_the_claim() -> None:
    runs = [cand(f"job:{i}", OverlapPolicy.SKIP) for i in range(5)]
    assert len(decide(runs, {}, 3).claim) == 3


# --- a batch of starts (runs claimed ahead, at their instant) ---------------------------------

_policies = st.sampled_from(list(OverlapPolicy))
_start_candidates = st.lists(
    st.builds(
        lambda key, policy, trigger, limit: StartCandidate(
            uuid.uuid4(), 1, key, policy, trigger, limit
        ),
        st.sampled_from(["job:a", "job:b", "key:c"]),
        _policies,
        st.sampled_from(list(RunTrigger)),
        st.integers(0, 3),
    ),
    max_size=12,
)


@given(
    _start_candidates,
    st.dictionaries(st.sampled_from(["job:a", "job:b", "key:c"]), st.integers(0, 3)),
)
def test_a_batch_of_starts_is_judged_as_if_started_one_after_another(
    candidates: list[StartCandidate], running: dict[str, int]
) -> None:
    plan = plan_starts(candidates, running)
    replacing = {c.key for c in candidates if c.policy is OverlapPolicy.REPLACE}
    assert plan.replace == [c for c in candidates if c.key in replacing]
    counts = dict(running)
    expected: dict[str, list[StartCandidate]] = {"start": [], "skip": [], "defer": []}
    for c in candidates:
        if c.key in replacing:
            continue
        verdict = decide_start(c.policy, c.trigger, c.max_concurrency, counts.get(c.key, 0))
        assert verdict is not StartVerdict.REPLACE
        expected[verdict.value].append(c)
        if verdict is StartVerdict.START:
            counts[c.key] = counts.get(c.key, 0) + 1
    assert (plan.start, plan.skip, plan.defer) == (
        expected["start"],
        expected["skip"],
        expected["defer"],
    )


def test_two_runs_of_a_skip_job_at_one_instant_start_one_and_skip_the_other() -> None:
    first, second = (
        StartCandidate(uuid.uuid4(), 1, "job:a", OverlapPolicy.SKIP, RunTrigger.SCHEDULE, 1)
        for _ in range(2)
    )
    plan = plan_starts([first, second], {})
    assert (plan.start, plan.skip, plan.defer) == ([first], [second], [])
