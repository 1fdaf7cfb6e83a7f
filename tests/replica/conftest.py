"""Fixtures of the read replica tests: one real primary (port 5480) and its streaming standby
(port 5481) for the session, under /tmp/h-replica/pair, with a migrated ``duetime`` database.
Without initdb or pg_basebackup the tests skip — and fail under CI=true."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime.app import AsyncApp
from tests.conftest import in_ci
from tests.replica.pair import StreamingPair, missing_tools

BASE = Path("/tmp/h-replica/pair")
PRIMARY_PORT = 5480
STANDBY_PORT = 5481


@pytest.fixture(scope="session")
def pair() -> Iterator[StreamingPair]:
    missing = missing_tools()
    if missing:
        reason = f"the read replica tests need {', '.join(missing)}"
        if in_ci():
            pytest.fail(f"{reason} (required when CI=true)", pytrace=False)
        pytest.skip(reason)
    made = StreamingPair(BASE, PRIMARY_PORT, STANDBY_PORT)
    try:
        made.start()
        made.query("primary", "CREATE DATABASE duetime")

        async def migrate() -> None:
            async with AsyncApp(made.url("primary", "duetime"), migrate=True):
                pass

        asyncio.run(migrate())
        made.wait_caught_up()
        yield made
    finally:
        made.stop()
