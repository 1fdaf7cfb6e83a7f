"""Run ids by prefix (``runs_by_id_prefix``) and the app's ``runs.resolve`` over it, on both
stores: the tenant's runs whose id begins with a prefix, in id order, at most a limit."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime

import pytest
from storekit import OTHER_TENANT, TENANT, make_job, ref, s

from duetime.app import AsyncApp
from duetime.app.runs import AmbiguousRunId
from duetime.errors import NotFound, ValidationError
from duetime.store import Store
from duetime.store.base import RunIdPrefixParams, RunTriggerParams

LOW = uuid.UUID("abcd1234-0000-0000-0000-000000000000")
"""The smallest id with the prefix ``abcd1234``."""
MID = uuid.UUID("abcd1234-0000-4000-8000-000000000001")
HIGH = uuid.UUID("abcd1234-ffff-ffff-ffff-ffffffffffff")
"""The largest id with the prefix ``abcd1234``."""
BELOW = uuid.UUID("abcd1233-ffff-ffff-ffff-ffffffffffff")
ABOVE = uuid.UUID("abcd1235-0000-0000-0000-000000000000")
OTHERS = uuid.UUID("abcd1234-5555-4555-8555-555555555555")
"""Has the prefix, but is another tenant's."""


async def trigger_with_ids(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    t0: datetime,
    ids: list[uuid.UUID],
    *,
    tenant: str = TENANT,
    name: str = "job",
) -> None:
    """Manual runs of a new job of ``tenant`` whose ids are ``ids``: the store draws a run's id
    from ``uuid.uuid4``, which hands out ``ids`` while the runs are made."""
    job = await make_job(store, name, next_fire_at=None, tenant=tenant)
    chosen: Iterator[uuid.UUID] = iter(ids)
    with monkeypatch.context() as patch:
        patch.setattr(uuid, "uuid4", lambda: next(chosen))
        for i in range(len(ids)):
            run, created = await store.run_trigger(RunTriggerParams(ref(job), now=t0 + s(i)))
            assert created
            assert run.id == ids[i]


@pytest.fixture
async def prefixed(store: Store, monkeypatch: pytest.MonkeyPatch, t0: datetime) -> Store:
    await trigger_with_ids(store, monkeypatch, t0, [HIGH, BELOW, MID, ABOVE, LOW])
    await trigger_with_ids(store, monkeypatch, t0, [OTHERS], tenant=OTHER_TENANT, name="other")
    return store


async def ids(store: Store, prefix: str, *, tenant: str = TENANT, limit: int = 10) -> list[str]:
    found = await store.runs_by_id_prefix(RunIdPrefixParams(tenant, prefix, limit=limit))
    return [str(r.id) for r in found]


async def test_a_prefix_finds_the_tenants_runs_in_id_order(prefixed: Store) -> None:
    assert await ids(prefixed, "abcd1234") == [str(LOW), str(MID), str(HIGH)]
    assert await ids(prefixed, "abcd1234", limit=2) == [str(LOW), str(MID)]
    assert await ids(prefixed, "abcd1234", tenant=OTHER_TENANT) == [str(OTHERS)]
    assert await ids(prefixed, "abcd12340000") == [str(LOW), str(MID)]
    assert await ids(prefixed, "abcd12340000400080") == [str(MID)]
    assert await ids(prefixed, MID.hex) == [str(MID)]
    assert await ids(prefixed, "abcd1233") == [str(BELOW)]
    assert await ids(prefixed, "abcd1236") == []
    assert await ids(prefixed, "abcd1236", tenant="nobody") == []


async def test_found_runs_are_whole(prefixed: Store, t0: datetime) -> None:
    (run,) = await prefixed.runs_by_id_prefix(RunIdPrefixParams(OTHER_TENANT, "abcd1234"))
    assert run.id == OTHERS
    assert run.tenant == OTHER_TENANT
    assert run.job_name == "other"
    assert run.scheduled_for == t0


@pytest.mark.parametrize(
    "prefix", ["abcd123", "ABCD1234", "abcd-1234", "abcd1234-0000", "g" * 8, "a" * 33, ""]
)
def test_params_take_8_to_32_lowercase_hex_digits(prefix: str) -> None:
    with pytest.raises(ValueError, match="hex digits"):
        RunIdPrefixParams(TENANT, prefix)


# --- the app: runs.resolve ---------------------------------------------------------------------


@pytest.fixture
async def app(prefixed: Store, store_url: str) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, tenant=TENANT) as opened:
        yield opened


async def test_resolve_takes_a_unique_prefix_as_printed(app: AsyncApp) -> None:
    for text in ("abcd1233", "ABCD1233", "abcd1233-ff", "abcd1233ff", "abcd1233-ffff-f"):
        assert await app.runs.resolve(text) == BELOW
    assert await app.runs.resolve(str(MID)[:20]) == MID
    assert await app.resolve_run("abcd12340000400080") == MID
    # a full id is an id: not looked up (reading it says whether it exists)
    unknown = uuid.uuid4()
    assert await app.runs.resolve(str(unknown)) == unknown
    assert await app.runs.resolve(unknown) == unknown


async def test_resolve_is_filtered_by_tenant(app: AsyncApp) -> None:
    other = app.for_tenant(OTHER_TENANT)
    assert await other.runs.resolve("abcd1234") == OTHERS
    with pytest.raises(NotFound, match=f"^no run abcd1233 in tenant {OTHER_TENANT}$"):
        await other.runs.resolve("abcd1233")


async def test_an_ambiguous_prefix_names_the_candidates(app: AsyncApp, t0: datetime) -> None:
    with pytest.raises(AmbiguousRunId) as raised:
        await app.runs.resolve("abcd1234")
    error = raised.value
    assert isinstance(error, ValidationError)
    assert [r.id for r in error.candidates] == [LOW, MID, HIGH]
    assert not error.more
    assert str(error).startswith(f"run_id: abcd1234 is ambiguous in tenant {TENANT}: ")
    assert f"{MID} (job, {(t0 + s(2)).isoformat()})" in str(error)


async def test_an_ambiguous_prefix_says_when_there_are_more(
    store: Store, store_url: str, monkeypatch: pytest.MonkeyPatch, t0: datetime
) -> None:
    many = [uuid.UUID(f"feedface-0000-4000-8000-{i:012x}") for i in range(12)]
    await trigger_with_ids(store, monkeypatch, t0, many)
    async with AsyncApp(store_url, tenant=TENANT) as app:
        with pytest.raises(AmbiguousRunId) as raised:
            await app.runs.resolve("feedface")
        assert [r.id for r in raised.value.candidates] == many[:10]
        assert raised.value.more
        assert str(raised.value).endswith(", and more")
        assert [r.id for r in await app.runs.by_id_prefix("feedface", limit=12)] == many


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("abcd123", ValidationError, "too short"),
        ("abcd-1234", NotFound, "not a run id"),
        ("not-a-uuid", NotFound, "not a run id"),
        ("abcd1234x", NotFound, "not a run id"),
        ("", NotFound, "not a run id"),
        ("deadbeef", NotFound, f"no run deadbeef in tenant {TENANT}"),
    ],
)
async def test_resolve_refuses_what_names_no_run(
    app: AsyncApp, text: str, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        await app.runs.resolve(text)
