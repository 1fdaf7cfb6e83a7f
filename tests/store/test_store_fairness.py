"""The fair claim (docs/fairness.md) on both stores: tenants share a claim (round robin, weights),
priorities with aging, worker pools (queues), per-tenant quotas enforced across concurrent
claimers, tenant limits and stats, and the hash seed and jitter of jobs."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from storekit import (
    TASK,
    TENANT,
    claim,
    complete,
    completion,
    fill_planner,
    job_params,
    make_job,
    materialize,
    ref,
    s,
    upsert,
)

from duetime._types import Job, Run, Schedule, ScheduleKind, TenantLimits
from duetime.policies.fairness import Aging, FairItem, fair_order
from duetime.store import Store
from duetime.store.base import (
    ClaimedRun,
    JobRef,
    RunsClaimParams,
    RunsCompleteParams,
    RunTriggerParams,
    TenantLimitsSetParams,
)

StoreFactory = Callable[..., Awaitable[Store]]


async def tenant_job(store: Store, t0: datetime, tenant: str, **kw: object) -> Job:
    """A job that never fires by itself (runs come from triggers)."""
    return await make_job(store, f"job-{tenant}", tenant=tenant, next_fire_at=t0 + s(86400), **kw)


async def runs_at(
    store: Store, job: Job, instants: list[datetime], priority: int | None = None
) -> list[Run]:
    """Manual runs of ``job`` available at ``instants`` (optionally with their own priority)."""
    made = []
    for at in instants:
        run, _ = await store.run_trigger(RunTriggerParams(ref(job), priority=priority, now=at))
        made.append(run)
    return made


async def flood(store: Store, t0: datetime, tenant: str, count: int, first: datetime) -> Job:
    """``count`` scheduled runs of one job of ``tenant``, 10 ms apart from ``first`` (one
    materializing transaction)."""
    job = await make_job(store, f"flood-{tenant}", tenant=tenant, next_fire_at=first)

    def only(due: Job, now: datetime, until: datetime):  # type: ignore[no-untyped-def]
        plan = fill_planner(0.01)(due, now, until)
        return plan if due.id == job.id else replace(plan, runs=[], next_fire_at=None)

    await materialize(store, first, planner=only, horizon=(count - 1) * 0.01)
    return job


async def set_limits(store: Store, tenant: str, **limits: object) -> TenantLimits:
    return await store.tenant_limits_set(TenantLimitsSetParams(tenant=tenant, **limits))  # type: ignore[arg-type]


def tenants_of(claimed: list[ClaimedRun]) -> Counter[str]:
    return Counter(c.run.tenant for c in claimed)


# --- sharing a claim ---------------------------------------------------------------------------


async def test_a_flood_does_not_hold_back_a_small_tenant(store: Store, t0: datetime) -> None:
    """Tenant A has 5,000 runs due for a minute; B's 5 became due just now: the very first
    claim takes all of B's (A's are not oldest-first ahead of them)."""
    await flood(store, t0, "A", 5000, t0 - s(60))
    b = await tenant_job(store, t0, "B")
    small = await runs_at(store, b, [t0 - s(0.05 * k) for k in range(5)])
    first = await claim(store, t0, limit=50)
    assert len(first) == 50
    assert {r.id for r in small} <= {c.run.id for c in first}
    assert tenants_of(first) == {"A": 45, "B": 5}


async def test_tenants_share_a_claim_by_weight(store: Store, t0: datetime) -> None:
    await flood(store, t0, "A", 200, t0 - s(10))
    await flood(store, t0, "B", 200, t0 - s(5))
    await flood(store, t0, "C", 200, t0 - s(1))
    await set_limits(store, "A", weight=3)
    await set_limits(store, "B", weight=2)
    first = await claim(store, t0, limit=60)
    assert tenants_of(first) == {"A": 30, "B": 20, "C": 10}


async def test_a_claim_of_one_goes_to_the_tenant_running_least(store: Store, t0: datetime) -> None:
    """A worker with one free slot: the tenant flooding it does not win every claim."""
    await flood(store, t0, "A", 40, t0 - s(60))
    assert tenants_of(await claim(store, t0, limit=10)) == {"A": 10}
    await flood(store, t0, "B", 40, t0 - s(1))
    singles = [await claim(store, t0, limit=1) for _ in range(10)]
    assert [tenants_of(c) for c in singles] == [{"B": 1}] * 10  # until B runs as many as A
    assert tenants_of(await claim(store, t0, limit=4)) == {"A": 2, "B": 2}


async def test_a_tenant_filter_and_a_single_tenant_keep_plain_order(
    store: Store, t0: datetime
) -> None:
    job = await tenant_job(store, t0, TENANT)
    made = await runs_at(store, job, [t0 - s(k) for k in range(6)])
    other = await tenant_job(store, t0, "other")
    await runs_at(store, other, [t0 - s(100)])
    params = RunsClaimParams(
        worker_id="w", tasks=(TASK,), limit=3, lease_ttl=30, lookahead=0, now=t0, tenant=TENANT
    )
    got = await store.runs_claim(params)
    assert [c.run.id for c in got] == [r.id for r in reversed(made[3:])]  # oldest first


# --- priorities and aging -----------------------------------------------------------------------


async def test_a_waiting_run_rises_above_fresher_higher_priority(
    store: Store, t0: datetime
) -> None:
    job = await tenant_job(store, t0, TENANT)
    [aged] = await runs_at(store, job, [t0 - s(61)], priority=0)  # waited > 1 step
    [young] = await runs_at(store, job, [t0 - s(59)], priority=0)
    [fresh] = await runs_at(store, job, [t0], priority=1)

    async def order(aging: float) -> list[uuid.UUID]:
        got = []
        for _ in range(3):
            params = RunsClaimParams(
                worker_id="w", tasks=(TASK,), limit=1, lease_ttl=30, lookahead=0, now=t0,
                priority_aging=aging,
            )  # fmt: skip
            [claimed] = await store.runs_claim(params)
            got.append(claimed.run.id)
        return got

    assert await order(60.0) == [aged.id, fresh.id, young.id]


async def test_without_aging_priority_is_strict(store: Store, t0: datetime) -> None:
    job = await tenant_job(store, t0, TENANT)
    [aged] = await runs_at(store, job, [t0 - s(3600)], priority=0)
    [fresh] = await runs_at(store, job, [t0], priority=1)
    params = RunsClaimParams(
        worker_id="w", tasks=(TASK,), limit=1, lease_ttl=30, lookahead=0, now=t0,
        priority_aging=0.0,
    )  # fmt: skip
    assert [c.run.id for c in await store.runs_claim(params)] == [fresh.id]
    assert [c.run.id for c in await store.runs_claim(params)] == [aged.id]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_claim_takes_what_the_ordering_function_puts_first(
    store: Store, t0: datetime, seed: int
) -> None:
    """The one-statement SQL claim and store/_fairness.fair_order agree (priorities, aging,
    tenant rounds, weights) on random runs."""
    rng = random.Random(seed)
    aging = Aging(interval=rng.choice([1.0, 7.0, 60.0]), cap=rng.choice([2, 5, 1000]))
    weights = {t: rng.randint(1, 3) for t in ("t1", "t2", "t3")}
    items = []
    for tenant, weight in weights.items():
        await set_limits(store, tenant, weight=weight)
        job = await tenant_job(store, t0, tenant)
        for _ in range(rng.randint(5, 25)):
            at = t0 - timedelta(microseconds=rng.randint(0, 120_000_000))
            [run] = await runs_at(store, job, [at], priority=rng.randint(-3, 3))
            items.append(FairItem(run.id, tenant, run.priority, run.available_at))
    limit = rng.randint(5, len(items) - 1)
    expected = fair_order(items, key=lambda i: i, now=t0, aging=aging, weights=weights)
    params = RunsClaimParams(
        worker_id="w", tasks=(TASK,), limit=limit, lease_ttl=30, lookahead=0, now=t0,
        priority_aging=aging.interval, priority_aging_cap=aging.cap,
    )  # fmt: skip
    got = await store.runs_claim(params)
    assert {c.run.id for c in got} == {i.id for i in expected[:limit]}


# --- worker pools -------------------------------------------------------------------------------


async def test_a_worker_pool_claims_only_its_queues(store: Store, t0: datetime) -> None:
    short = await make_job(store, "short", next_fire_at=t0 + s(86400), queue="short")
    long = await make_job(store, "long", next_fire_at=t0 + s(86400), queue="long")
    plain = await make_job(store, "plain", next_fire_at=t0 + s(86400))
    for job in (short, long, plain):
        await runs_at(store, job, [t0 - s(1), t0])

    def params(queues: list[str] | None) -> RunsClaimParams:
        return RunsClaimParams(
            worker_id="w", tasks=(TASK,), limit=10, lease_ttl=30, lookahead=0, now=t0,
            queues=queues,
        )  # fmt: skip

    assert await store.runs_claim(params([])) == []
    got = await store.runs_claim(params(["short"]))
    assert [c.run.queue for c in got] == ["short", "short"]
    got = await store.runs_claim(params(["long", "nope"]))
    assert [c.run.queue for c in got] == ["long", "long"]
    got = await store.runs_claim(params(None))
    assert [c.run.queue for c in got] == ["default", "default"]


async def test_many_groups_share_a_claim_with_either_statement(store: Store, t0: datetime) -> None:
    """Two tenants with runs in three queues each: six groups whose shares add up to three
    times the batch. PostgreSQL then claims with the statement that locks only what it picks
    (`wide`); the claims take the same turns either way, every run once."""
    made: list[Run] = []
    for tenant in ("A", "B"):
        for queue in ("q1", "q2", "q3"):
            job = await make_job(
                store, f"{tenant}-{queue}", tenant=tenant, queue=queue, next_fire_at=t0 + s(86400)
            )
            made += await runs_at(store, job, [t0 - s(0.1 * k) for k in range(4)])
    claims = []
    for _ in range(3):
        claims.append(await claim(store, t0, limit=10))
        await complete(store, t0, *(completion(c) for c in claims[-1]))
        if len(claims) == 1:  # six groups of a due run or more: their shares add up to 30
            assert store._claims_wide is (store.dialect == "postgres")  # type: ignore[attr-defined]
    assert [tenants_of(c) for c in claims] == [{"A": 5, "B": 5}, {"A": 5, "B": 5}, {"A": 2, "B": 2}]
    assert sorted(c.run.id for batch in claims for c in batch) == sorted(r.id for r in made)


# --- quotas -------------------------------------------------------------------------------------


async def test_in_flight_quota(store: Store, t0: datetime) -> None:
    await flood(store, t0, "A", 10, t0 - s(1))
    await flood(store, t0, "B", 10, t0 - s(1))
    limits = await set_limits(store, "A", max_in_flight=3)
    assert limits == TenantLimits("A", 3, None, 1)
    first = await claim(store, t0, limit=10)
    assert tenants_of(first) == {"A": 3, "B": 7}
    assert tenants_of(await claim(store, t0, limit=10)) == {"B": 3}  # A is at its limit
    done = next(c for c in first if c.run.tenant == "A")
    await complete(store, t0 + s(1), completion(done))
    assert tenants_of(await claim(store, t0 + s(1), limit=10)) == {"A": 1}
    await set_limits(store, "A", max_in_flight=0)  # 0 removes the limit
    assert tenants_of(await claim(store, t0 + s(1), limit=10)) == {"A": 6}


async def test_start_rate_quota(store: Store, t0: datetime) -> None:
    await flood(store, t0, "A", 20, t0 - s(1))
    await set_limits(store, "A", max_starts_per_second=2.0)
    assert len(await claim(store, t0, limit=10)) == 2  # a full bucket: max(1, rate) starts
    assert await claim(store, t0, limit=10) == []
    assert len(await claim(store, t0 + s(0.5), limit=10)) == 1
    assert await claim(store, t0 + s(0.6), limit=10) == []
    assert len(await claim(store, t0 + s(60), limit=10)) == 2  # never more than the bucket
    await set_limits(store, "A", max_starts_per_second=0.5)  # below 1/s: one start per 2 s
    assert len(await claim(store, t0 + s(62), limit=10)) == 1
    assert await claim(store, t0 + s(63), limit=10) == []
    assert len(await claim(store, t0 + s(64), limit=10)) == 1


async def test_a_rate_limited_tenant_is_not_claimed_ahead(store: Store, t0: datetime) -> None:
    a = await tenant_job(store, t0, "A")
    [ahead] = await runs_at(store, a, [t0 + s(0.5)])
    await set_limits(store, "A", max_starts_per_second=100.0)
    assert await claim(store, t0, limit=10, lookahead=1) == []
    [got] = await claim(store, t0 + s(0.5), limit=10, lookahead=1)
    assert got.run.id == ahead.id
    assert got.run.started_at == t0 + s(0.5)


async def test_a_limited_tenant_keeps_its_place_in_the_order(store: Store, t0: datetime) -> None:
    """A limited tenant with room still gets its round-robin share (not only leftovers)."""
    await flood(store, t0, "A", 50, t0 - s(30))
    await flood(store, t0, "B", 50, t0 - s(1))
    await set_limits(store, "B", max_in_flight=100)
    assert tenants_of(await claim(store, t0, limit=20)) == {"A": 10, "B": 10}


async def _claim_and_finish(
    store: Store, worker: str, rng: random.Random, stop: asyncio.Event, held: list[int]
) -> int:
    """Claim small batches on the database clock and complete each run a little later."""
    done = 0
    pending: set[asyncio.Task[None]] = set()

    async def finish(c: ClaimedRun) -> None:
        await asyncio.sleep(rng.uniform(0, 0.02))
        await store.runs_complete(RunsCompleteParams([completion(c)]))

    while not stop.is_set():
        got = await store.runs_claim(
            RunsClaimParams(
                worker_id=worker, tasks=(TASK,), limit=rng.randint(1, 6), lease_ttl=60,
                lookahead=0.2,
            )
        )  # fmt: skip
        for c in got:
            done += 1
            task = asyncio.create_task(finish(c))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.sleep(0 if got else 0.005)
    await asyncio.gather(*pending)
    held.append(done)
    return done


async def test_quotas_hold_across_concurrent_claimers(make_store: StoreFactory) -> None:
    """Four store instances claim at once on the database clock: tenant A never has more than
    its max_in_flight running (sampled, and from attempt history), and its starts never beat
    its token bucket (from attempt history)."""
    stores = [await make_store(clock=None) for _ in range(5)]
    main = stores[0]
    now = await main.db_now()
    a = await tenant_job(main, now, "A")
    b = await tenant_job(main, now, "B")
    a_runs = await runs_at(main, a, [now - s(1)] * 120)
    await runs_at(main, b, [now - s(1)] * 60)
    max_in_flight, rate = 4, 40.0
    await set_limits(main, "A", max_in_flight=max_in_flight, max_starts_per_second=rate)
    stop = asyncio.Event()
    held: list[int] = []
    claimers = [
        asyncio.create_task(_claim_and_finish(st, f"w{i}", random.Random(i), stop, held))
        for i, st in enumerate(stores[1:])
    ]
    samples = []
    deadline = asyncio.get_running_loop().time() + 30
    while asyncio.get_running_loop().time() < deadline:
        stats = await main.tenant_stats()
        running = sum(x.in_flight for x in stats if x.tenant == "A")
        samples.append(running)
        if not any(x.due or x.in_flight for x in stats):
            break
        await asyncio.sleep(0.002)
    stop.set()
    await asyncio.gather(*claimers)
    assert sum(held) == 180
    assert max(samples) <= max_in_flight
    assert max(samples) >= 2  # the claimers did compete

    attempts = [att for r in a_runs for att in await main.attempts_list("A", r.id)]
    assert len(attempts) == 120
    # in flight, from history: at each claim, the tenant's other attempts still open. SQLite
    # stamps a completion inside its (serialized) transaction: exact. PostgreSQL reads the clock
    # when the completing statement starts, and commits later — under load, many ms later — so
    # an attempt may look open a little after the claim that counted it finished; the sampled
    # check above is the exact one there
    slack = timedelta(milliseconds=0 if main.dialect == "sqlite" else 250)
    for x in attempts:
        open_then = [
            y for y in attempts
            if y is not x and y.claimed_at <= x.claimed_at < y.finished_at - slack
        ]  # fmt: skip
        assert len(open_then) + 1 <= max_in_flight
    # starts: over any span, at most the bucket (max(1, rate)) plus rate per second
    starts = sorted(att.started_at for att in attempts if att.started_at is not None)
    assert len(starts) == 120
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            span = (starts[j] - first).total_seconds()
            assert j - i + 1 <= max(1.0, rate) + rate * span + 1e-6, (i, j, span)
    span = (starts[-1] - starts[0]).total_seconds()
    assert span >= (120 - rate) / rate * 0.99  # and the rate really throttled them


# --- tenant limits and stats --------------------------------------------------------------------


async def test_tenant_limits_set_get_list(store: Store) -> None:
    assert await store.tenant_limits_get("nobody") == TenantLimits("nobody")
    assert await store.tenant_limits_set(
        TenantLimitsSetParams("acme", max_in_flight=5, weight=2)
    ) == TenantLimits("acme", 5, None, 2)
    assert await store.tenant_limits_set(
        TenantLimitsSetParams("acme", max_starts_per_second=1.5)
    ) == TenantLimits("acme", 5, 1.5, 2)
    secret = await store.tenant_secret("acme")  # the same row keeps its webhook secret
    assert secret == await store.tenant_secret("acme")
    await store.tenant_limits_set(TenantLimitsSetParams("zeta", weight=4))
    assert await store.tenant_limits_list() == [
        TenantLimits("acme", 5, 1.5, 2),
        TenantLimits("zeta", None, None, 4),
    ]
    assert await store.tenant_limits_set(
        TenantLimitsSetParams("acme", max_in_flight=0, max_starts_per_second=0)
    ) == TenantLimits("acme", None, None, 2)


async def test_tenant_stats(store: Store, t0: datetime) -> None:
    await flood(store, t0, "A", 10, t0 - s(30))
    short = await make_job(store, "short", tenant="B", next_fire_at=t0 + s(86400), queue="short")
    await runs_at(store, short, [t0 - s(5), t0 + s(5)])
    await set_limits(store, "A", max_in_flight=2)
    await claim(store, t0, limit=10)  # A: 2 running (its limit); B: 1 running
    stats = {(x.tenant, x.queue): x for x in await store.tenant_stats(t0 + s(1))}
    a, b = stats[("A", "default")], stats[("B", "short")]
    assert (a.due, a.in_flight, a.throttled) == (8, 2, 8)
    assert a.oldest_due_age == pytest.approx(31 - 0.02, abs=1e-6)
    assert (b.due, b.in_flight, b.throttled, b.oldest_due_age) == (0, 1, 0, 0.0)


# --- hash seed and jitter -----------------------------------------------------------------------


async def test_a_jobs_hash_seed_and_jitter_are_kept(store: Store, t0: datetime) -> None:
    cron = Schedule(ScheduleKind.CRON, cron="H H(0-5) * * *", hash_seed="acme\x1fnightly")
    params = replace(job_params("nightly", next_fire_at=t0 + s(60), schedule=cron), jitter=2.5)
    job, _ = await upsert(store, params)
    again = await store.job_get(JobRef(tenant=TENANT, id=job.id))
    assert again.schedule == cron
    assert again.jitter == 2.5
    plain = await make_job(
        store, "plain", next_fire_at=t0, schedule=Schedule(ScheduleKind.CRON, cron="0 0 * * THU")
    )
    assert plain.schedule.hash_seed is None  # no H: equal expressions stay equal schedules
