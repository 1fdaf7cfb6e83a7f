"""Workflows on each store (a SQLite file; the session's PostgreSQL schema), driven by
duetime.testing's real scheduler pass and worker on the frozen clock of tests/conftest.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from duetime.testing import FrozenApp, FrozenClock


@pytest.fixture
async def app(store_url: str, clock: FrozenClock) -> AsyncIterator[FrozenApp]:
    async with FrozenApp(store_url, clock=clock) as opened:
        yield opened
