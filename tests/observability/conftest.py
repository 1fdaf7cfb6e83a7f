"""Fixtures shared by the observability tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.observability.alertkit import PATH
from tests.targets.receiver import Receiver, Reply


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A webhook receiver on loopback answering 200 at the alerts' PATH, stopped after the
    test (a test plans other replies or paths with ``receiver.plan``)."""
    r = Receiver()
    await r.start()
    r.plan(PATH, Reply(200))
    try:
        yield r
    finally:
        await r.stop()
