"""Registration's field errors for the overlap options of decision 0016 (issue 16 items 1 and
4), through ``app.schedule`` on both stores: a cap nothing would ever reach, a replace_timeout
too short for a worker to hear the request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from duetime import AsyncApp, ValidationError


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(store_url, migrate=True) as opened:
        yield opened


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param({"overlap": "allow", "max_waiting": 2}, "max_waiting", id="allow-unlimited"),
        pytest.param({"overlap": "replace", "replace_timeout": 1e-9}, "replace_timeout", id="1ns"),
        pytest.param({"overlap": "replace", "replace_timeout": 0.09}, "replace_timeout", id="90ms"),
    ],
)
async def test_bad_overlap_options_are_field_errors(
    app: AsyncApp, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        await app.schedule("j", task="duetime.noop", every=60, **options)
    assert refused.value.field == field


async def test_the_least_options_that_mean_something_are_accepted(app: AsyncApp) -> None:
    capped = await app.schedule(
        "capped", task="duetime.noop", every=60, overlap="allow", max_concurrency=2, max_waiting=2
    )
    assert capped.max_waiting == 2
    quick = await app.schedule(
        "quick", task="duetime.noop", every=60, overlap="replace", replace_timeout=0.1
    )
    assert quick.replace_timeout == 0.1


async def test_an_update_to_a_policy_that_never_queues_drops_the_cap(app: AsyncApp) -> None:
    """Changing only the overlap to one under which nothing waits (``allow`` without a limit
    included) resets ``max_waiting`` instead of refusing the update."""
    await app.schedule("capped", task="duetime.noop", every=60, overlap="serialize", max_waiting=3)
    changed = await app.update_job("capped", overlap="allow")
    assert (changed.overlap_policy, changed.max_concurrency, changed.max_waiting) == (
        "allow",
        0,
        0,
    )
    limited = await app.update_job("capped", overlap="allow", max_concurrency=2, max_waiting=2)
    assert limited.max_waiting == 2
    kept = await app.update_job("capped", overlap="serialize")
    assert kept.max_waiting == 2  # serialize queues: the cap stays
