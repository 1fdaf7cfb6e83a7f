"""Fixtures shared by the HTTP target tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.targets.receiver import Receiver


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver listening on loopback, stopped after the test."""
    server = Receiver()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
