"""The claim order (store/_fairness.py, docs/fairness.md) as properties: priorities, aging that
lets low priority be late but never starved, round robin and weights between tenants, and the
quota ledger and start bucket of the locked step."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from duetime._types import OverlapPolicy, RunTrigger
from duetime.policies.fairness import (
    Aging,
    FairItem,
    QuotaLedger,
    TenantQuota,
    bucket_capacity,
    bucket_refill,
    effective_priority,
    fair_order,
    plan_locked_claim,
)
from duetime.policies.overlap import Candidate

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
AGING = Aging(interval=60.0, cap=1000)

priorities = st.integers(min_value=-1000, max_value=1000)
waits = st.integers(min_value=-5_000_000, max_value=10**11)  # µs before NOW (negative: ahead)
tenants = st.sampled_from(["a", "b", "c", "d"])


def item(tenant: str, priority: int, waited_us: int) -> FairItem:
    return FairItem(uuid.uuid4(), tenant, priority, NOW - timedelta(microseconds=waited_us))


items_of = st.builds(item, tenants, priorities, waits)


def order(items: list[FairItem], aging: Aging = AGING, **kw: object) -> list[FairItem]:
    return fair_order(items, key=lambda i: i, now=NOW, aging=aging, **kw)  # type: ignore[arg-type]


def single_tenant(items: list[FairItem]) -> list[FairItem]:
    return [FairItem(i.id, "a", i.priority, i.available_at) for i in items]


# --- effective priority -------------------------------------------------------------------------


@given(priorities, waits, waits)
def test_waiting_longer_never_lowers_the_effective_priority(p: int, w1: int, w2: int) -> None:
    early, late = sorted((w1, w2))
    at_late = NOW - timedelta(microseconds=late)
    at_early = NOW - timedelta(microseconds=early)
    assert effective_priority(p, at_late, NOW, AGING) >= effective_priority(p, at_early, NOW, AGING)


@given(priorities, waits, priorities)
def test_aging_is_one_step_per_interval_up_to_the_cap(p: int, waited: int, cap: int) -> None:
    aging = Aging(interval=60.0, cap=cap)
    eff = effective_priority(p, NOW - timedelta(microseconds=waited), NOW, aging)
    step = 60_000_000
    assert eff == p * step + min(max(waited, 0), max((cap - p) * step, 0))
    assert p * step <= eff <= max(p, cap) * step  # a run above the cap does not age


@given(priorities, waits)
def test_aging_off_is_strict_priority(p: int, waited: int) -> None:
    off = Aging(interval=0.0)
    assert effective_priority(p, NOW - timedelta(microseconds=waited), NOW, off) == p


# --- one tenant: priority, then age -------------------------------------------------------------


@given(st.lists(items_of, max_size=30))
def test_order_is_a_permutation_and_does_not_depend_on_input_order(items: list[FairItem]) -> None:
    first = order(items)
    assert sorted(first, key=lambda i: i.id) == sorted(items, key=lambda i: i.id)
    assert order(list(reversed(items))) == first


@given(st.lists(items_of, min_size=2, max_size=30))
def test_equally_old_runs_go_by_priority(items: list[FairItem]) -> None:
    at = NOW - timedelta(seconds=5)
    same_age = [FairItem(i.id, "a", i.priority, at) for i in items]
    got = [i.priority for i in order(same_age)]
    assert got == sorted(got, reverse=True)


@given(st.lists(items_of, min_size=2, max_size=30), priorities)
def test_runs_of_one_priority_go_oldest_first(items: list[FairItem], p: int) -> None:
    same = [FairItem(i.id, "a", p, i.available_at) for i in items]
    got = [i.available_at for i in order(same)]
    assert got == sorted(got)


@given(priorities, priorities, st.integers(min_value=1, max_value=10**9))
def test_low_priority_is_late_never_starved(low: int, high: int, extra_us: int) -> None:
    """A run that waited (high - low) intervals more than a run of higher priority goes before
    it; with less waiting, the higher priority wins."""
    low, high = min(low, high), max(low, high)
    fresh = FairItem(uuid.uuid4(), "a", high, NOW)  # became available just now
    waited = (high - low) * 60_000_000 + extra_us
    old = FairItem(uuid.uuid4(), "a", low, NOW - timedelta(microseconds=waited))
    assert order([fresh, old])[0] is old
    if low < high:  # and before that, the higher priority wins
        young = FairItem(uuid.uuid4(), "a", low, NOW - timedelta(seconds=59 * (high - low)))
        assert order([young, fresh])[0] is fresh


@given(st.lists(items_of, min_size=1, max_size=30))
def test_a_stream_of_fresh_high_priority_runs_cannot_starve_an_old_one(
    items: list[FairItem],
) -> None:
    """Whatever arrives after it, at any priority and however long that waited, a run that has
    waited long enough is taken first: it reached the cap (the top of the range) and ties there
    go oldest first."""
    old = FairItem(uuid.uuid4(), "a", -1000, NOW - timedelta(seconds=2000 * 60))
    newer = [i for i in single_tenant(items) if i.available_at > old.available_at]
    assert order([*newer, old])[0] is old


# --- tenants: round robin and weights -----------------------------------------------------------


@given(st.lists(items_of, max_size=60))
def test_equal_weights_take_tenants_in_rounds(items: list[FairItem]) -> None:
    """In every prefix of the order, a tenant that still has runs has at most one run fewer
    than any other tenant taken so far."""
    got = order(items)
    total = Counter(i.tenant for i in items)
    taken: Counter[str] = Counter()
    for index, it in enumerate(got):
        taken[it.tenant] += 1
        waiting = [t for t in total if taken[t] < total[t]]
        for t in waiting:
            assert taken[it.tenant] <= taken[t] + 1, (index, taken, total)


@given(st.lists(items_of, max_size=60), st.dictionaries(tenants, st.integers(0, 10)))
def test_the_least_loaded_tenant_goes_first(items: list[FairItem], running: dict[str, int]) -> None:
    """Runs in flight count as rounds already had: each run taken belongs to a tenant with the
    fewest runs (in flight + taken so far) among those still waiting — so a claim of a single
    run goes to the tenant running least, not to the one with the oldest backlog."""
    got = order(items, running=running)
    total = Counter(i.tenant for i in items)
    taken: Counter[str] = Counter()
    for it in got:
        load = {t: running.get(t, 0) + taken[t] for t in total if taken[t] < total[t]}
        assert load[it.tenant] == min(load.values()), (it.tenant, load)
        taken[it.tenant] += 1


@given(st.dictionaries(tenants, st.integers(min_value=1, max_value=5), min_size=2))
def test_weights_share_each_round(weights: dict[str, int]) -> None:
    items = [item(t, 0, k) for t in weights for k in range(40)]
    rounds = 3
    prefix = order(items, weights=weights)[: rounds * sum(weights.values())]
    assert Counter(i.tenant for i in prefix) == {t: rounds * w for t, w in weights.items()}


def test_a_flood_does_not_delay_a_small_tenant() -> None:
    """5,000 runs of A due long before B's 5: B's all come within the first 10 places."""
    flood = [item("A", 0, 600_000_000 + k) for k in range(5000)]
    small = [item("B", 0, k) for k in range(5)]
    first = order(flood + small)[:10]
    assert Counter(i.tenant for i in first) == {"A": 5, "B": 5}


# --- quotas -------------------------------------------------------------------------------------


def cand(tenant: str, *, due: bool = True, key: str | None = None) -> tuple[FairItem, Candidate]:
    run_id = uuid.uuid4()
    at = NOW - timedelta(seconds=1) if due else NOW + timedelta(seconds=0.5)
    return FairItem(run_id, tenant, 0, at), Candidate(
        run_id,
        key or f"run:{run_id}",
        RunTrigger.SCHEDULE,
        OverlapPolicy.ALLOW if key is None else OverlapPolicy.SERIALIZE,
        0 if key is None else 1,
        due=due,
        tenant=tenant,
    )


@given(
    st.integers(min_value=0, max_value=20),
    st.integers(min_value=0, max_value=20),
    st.floats(min_value=0, max_value=20),
    st.integers(min_value=1, max_value=50),
)
def test_the_ledger_never_gives_more_than_the_quota(
    limit: int, running: int, tokens: float, capacity: int
) -> None:
    quotas = {"a": TenantQuota("a", limit, 10.0, running, tokens)}
    plan = plan_locked_claim(
        [cand("a") for _ in range(30)] + [cand("b") for _ in range(30)],
        weights={},
        running={},
        quotas=quotas,
        capacity=capacity,
        now=NOW,
        aging=AGING,
    )
    a = plan.ledger.taken["a"]
    assert a <= max(0, limit - running)
    assert a <= int(tokens + 1e-9)
    assert len(plan.decision.claim) <= capacity
    assert plan.ledger.tokens_after("a") == max(0.0, tokens - a)
    # the unlimited tenant fills what the quota leaves
    assert len(plan.decision.claim) == min(capacity, a + 30)


def test_a_rate_limited_tenant_is_claimed_only_once_due() -> None:
    ledger = QuotaLedger({"a": TenantQuota("a", None, 5.0, 0, 5.0)})
    ahead, due = cand("a", due=False)[1], cand("a")[1]
    assert not ledger(ahead)
    assert ledger(due)
    in_flight_only = QuotaLedger({"a": TenantQuota("a", 3, None, 0, 0.0)})
    assert in_flight_only(ahead)  # an in-flight limit alone still claims ahead


def test_quota_and_overlap_together() -> None:
    """A run waiting on its overlap key does not use the tenant's quota."""
    busy = cand("a", key="job:x")
    free = cand("a")
    plan = plan_locked_claim(
        [busy, free],
        weights={},
        running={"job:x": 1},
        quotas={"a": TenantQuota("a", 1, None, 0, 0.0)},
        capacity=10,
        now=NOW,
        aging=AGING,
    )
    assert plan.decision.claim == [free[1].id]


@given(
    st.floats(min_value=0.01, max_value=1000),
    st.floats(min_value=0, max_value=1000),
    st.floats(min_value=0, max_value=100),
)
def test_the_start_bucket_refills_at_its_rate_up_to_its_capacity(
    rate: float, tokens: float, elapsed: float
) -> None:
    start = min(tokens, bucket_capacity(rate))
    later = NOW + timedelta(seconds=elapsed)
    got = bucket_refill(start, NOW, later, rate)
    # elapsed time is whole microseconds
    assert abs(got - min(bucket_capacity(rate), start + elapsed * rate)) <= rate * 1e-6 + 1e-9
    assert bucket_refill(None, None, later, rate) == bucket_capacity(rate)
    assert bucket_refill(start, later, NOW, rate) == start  # a clock behind adds nothing
